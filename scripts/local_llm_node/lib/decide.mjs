// Call or answer: how the server decides, when tools are offered, whether the
// model's answer is a tool call or text, before the grammar shapes either.
//
// Why: a grammar that allows "calls or text" constrains how a call is
// written, not whether one is made. A small model (Qwen2.5-Coder-1.5B) asked
// to change something often *describes* the call in prose ("To rename the
// task, you can use the `update_entity` tool: …") instead of making it, and
// under the grammar the description is valid text. Two checks catch it:
//
// 1. The first token (`callShare`): after the prompt, the probability the
//    model gives to starting a call (its `<tool_call>` token) and to starting
//    a call written the wrong way (a `{`, a fence, a `<` tag). When that share
//    is at least the threshold, the answer is generated under the calls-only
//    grammar; otherwise under the text-only grammar. A question the model
//    answers puts next to nothing there; a change it means to make, a few
//    percent even when prose wins the argmax.
// 2. The text (`TextGate`): text is held back for its first tokens; if in that
//    window it names an offered tool (`update_entity`, or a name in backticks
//    or quotes), it is a described call: nothing of it is sent, and the
//    answer is generated again under the calls-only grammar. Held text is
//    sent when the window ends without one (or the answer ends), then text
//    streams as it comes.
//
// `tool_choice` is honoured: "none" offers no call, "required" and a named
// function skip the decision (calls-only grammar; a named function: only it).
//
// No third-party imports: tested without node-llama-cpp or the model.

/** The share of the first token's probability that starts a call:
 * `probabilities` is `[[token, p], …]` (or a Map, most likely first),
 * `startsCall(token)` tells a token that starts one. Tokens below `floor`
 * are not looked at (they cannot move the share). */
export function callShare(probabilities, startsCall, floor = 1e-5) {
  let share = 0;
  for (const [token, p] of probabilities) {
    if (p < floor) break;
    if (startsCall(token)) share += p;
  }
  return share;
}

/** Whether a token's text starts a call: the model's call token
 * (`<tool_call>`, told apart by the caller), or text that begins (after
 * white space) with `{`, a backtick or `<`: a call written the wrong way. */
export function startsCallText(text) {
  return /^\s*[{`<]/.test(text);
}

/**
 * The threshold and the hold window for an answer, by what it answers:
 * - the user (the last message is theirs): `threshold` and `hold`: this is
 *   where a small model describes the call it was asked to make;
 * - a tool result: `afterTool` and no hold. Here the model mostly reports
 *   what the call did, naming the tool it used; forcing a call on a small
 *   share, or on a named tool, made it call the same tool again and again
 *   (a move of a calendar event, repeated until the turn's round limit).
 *   A high threshold leaves the model's own choice (the argmax, about half).
 */
export function policyFor(messages, { threshold, afterTool, hold }) {
  const last = messages.length ? messages[messages.length - 1].role : "user";
  return last === "tool" ? { threshold: afterTool, hold: 0 } : { threshold, hold };
}

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The offered tool that `text` names as a call would: a name with an
 * underscore as a whole word (`update_entity`), any name in backticks or
 * quotes, or a name followed by `(`. Null when none. */
export function namedTool(text, names) {
  for (const name of names) {
    const n = escapeRegExp(name);
    const word = name.includes("_") ? `(?<![A-Za-z0-9_])${n}(?![A-Za-z0-9_])` : null;
    const marked = `[\`"'“‘]${n}[\`"'”’]|(?<![A-Za-z0-9_])${n}\\(`;
    if (new RegExp(word ? `${word}|${marked}` : marked).test(text)) return name;
  }
  return null;
}

/**
 * The text of one answer as the client may see it. `push(raw, tokens)` with
 * the whole raw text so far and the number of tokens generated returns
 * `{show}` (text to send now, maybe "") or `{call: name}` (the text names an
 * offered tool inside the window: send nothing, generate a call instead).
 * `end(raw)` returns what is still held (the answer ended).
 *
 * `hold`: tokens held back before any text is sent (0: none, no check).
 * `keep(raw)`: how many characters of `raw` may be sent at all (the server
 * holds a partial character or the start of a stop text).
 */
export class TextGate {
  constructor(names, hold, keep = (raw) => raw.length) {
    Object.assign(this, { names, hold, keep });
    this.shown = 0;
    this.open = hold <= 0;
  }

  push(raw, tokens) {
    if (!this.open) {
      const name = namedTool(raw, this.names);
      if (name) return { call: name };
      if (tokens < this.hold) return { show: "" };
      this.open = true;
    }
    return { show: this.take(raw, this.keep(raw)) };
  }

  end(raw) {
    if (!this.open) {
      const name = namedTool(raw, this.names);
      if (name) return { call: name };
      this.open = true;
    }
    return { show: this.take(raw, raw.length) };
  }

  take(raw, end) {
    if (end <= this.shown) return "";
    const t = raw.slice(this.shown, end);
    this.shown = end;
    return t;
  }
}
