// The OpenAI Chat Completions wire format, as the local model server speaks it.
//
// Contract: `readRequest(body)` checks a request body and returns what the
// model needs (messages ready for a Hugging Face chat template, the tools,
// sampling settings) or throws `BadRequest` with a message for the client.
// `Chunks` builds the `chat.completion.chunk` objects of one streamed answer
// (tool calls in OpenAI's delta form: one delta per call with its index, id,
// name and whole arguments); `completion` builds a whole (non-streamed) one.
//
// Why messages are rewritten before templating: OpenAI clients send an
// assistant tool-call message with `content: null` and the arguments as a
// JSON *string*; chat templates (Qwen2.5's among them) concatenate
// `message.content` and render `arguments | tojson`, so they need a string
// and an object.
//
// No third-party imports: tested without node-llama-cpp or the model.

import { randomBytes } from "node:crypto";

const ROLES = new Set(["system", "user", "assistant", "tool"]);

export class BadRequest extends Error {
  constructor(message, code = "invalid_request") {
    super(message);
    this.code = code;
  }
}

/** Message content as text: null is empty, text parts are joined. */
function text(content, where) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .filter((p) => p && typeof p === "object" && p.type === "text")
      .map((p) => p.text ?? "")
      .join("");
  }
  throw new BadRequest(`${where}.content must be a string, an array of text parts or null`);
}

function templateToolCall(tc, where) {
  const fn = tc && typeof tc === "object" ? tc.function : undefined;
  if (!fn || typeof fn !== "object" || typeof fn.name !== "string") {
    throw new BadRequest(`${where} must be {"type": "function", "function": {"name", "arguments"}}`);
  }
  let args = fn.arguments ?? "{}";
  if (typeof args === "string") {
    try {
      args = args.trim() ? JSON.parse(args) : {};
    } catch {
      // Shown to the model as the string it sent.
    }
  }
  return { id: tc.id, type: "function", function: { name: fn.name, arguments: args } };
}

export function templateMessages(raw) {
  if (!Array.isArray(raw) || raw.length === 0) throw new BadRequest("messages must be a non-empty array");
  return raw.map((m, i) => {
    const where = `messages[${i}]`;
    if (!m || typeof m !== "object" || !ROLES.has(m.role)) {
      throw new BadRequest(`${where}.role must be one of ${[...ROLES].sort().join(", ")}`);
    }
    const msg = { role: m.role, content: text(m.content, where) };
    const calls = m.tool_calls || [];
    if (calls.length) {
      if (m.role !== "assistant" || !Array.isArray(calls)) {
        throw new BadRequest(`${where}.tool_calls must be an array on an assistant message`);
      }
      msg.tool_calls = calls.map((tc, j) => templateToolCall(tc, `${where}.tool_calls[${j}]`));
    }
    if (m.tool_call_id !== undefined && m.tool_call_id !== null) msg.tool_call_id = m.tool_call_id;
    return msg;
  });
}

export function readRequest(body) {
  if (!body || typeof body !== "object" || Array.isArray(body)) throw new BadRequest("the body must be a JSON object");
  const tools = body.tools || [];
  if (!Array.isArray(tools) || !tools.every((t) => t && typeof t === "object" && t.function && typeof t.function === "object")) {
    throw new BadRequest('tools must be an array of {"type": "function", "function": {...}}');
  }
  const maxTokens = body.max_tokens ?? body.max_completion_tokens ?? null;
  if (maxTokens !== null && !(Number.isInteger(maxTokens) && maxTokens >= 1)) {
    throw new BadRequest("max_tokens must be a positive integer");
  }
  const temperature = body.temperature ?? null;
  if (temperature !== null && typeof temperature !== "number") throw new BadRequest("temperature must be a number");
  const choice = readToolChoice(body.tool_choice, tools);
  const parallel = body.parallel_tool_calls ?? true;
  if (typeof parallel !== "boolean") throw new BadRequest("parallel_tool_calls must be a boolean");
  const opts = body.stream_options && typeof body.stream_options === "object" ? body.stream_options : {};
  return {
    messages: templateMessages(body.messages),
    // tool_choice "none": the tools stay in the prompt, but no call may be made.
    tools,
    allowCalls: tools.length > 0 && choice.mode !== "none",
    // "auto": the server decides call or text (lib/decide.mjs); "required":
    // a call, of any offered tool, or of `callTools` only (a named function).
    toolChoice: choice.mode,
    callTools: choice.tools,
    // OpenAI's `parallel_tool_calls: false`: at most one call per answer.
    oneCall: !parallel,
    stream: Boolean(body.stream),
    includeUsage: Boolean(opts.include_usage),
    maxTokens,
    temperature: temperature === null ? 0.2 : temperature,
  };
}

/** OpenAI's `tool_choice`: "auto" (or absent), "none", "required", or
 * `{"type": "function", "function": {"name": N}}` naming an offered tool.
 * Returns `{mode: "auto" | "none" | "required", tools}`: the tools a call
 * may name. */
export function readToolChoice(choice, tools) {
  if (choice === undefined || choice === null || choice === "auto") return { mode: "auto", tools };
  if (choice === "none") return { mode: "none", tools: [] };
  if (choice === "required") {
    if (!tools.length) throw new BadRequest('tool_choice "required" needs tools');
    return { mode: "required", tools };
  }
  const name = choice && typeof choice === "object" ? choice.function?.name : undefined;
  if (typeof name !== "string") {
    throw new BadRequest('tool_choice must be "auto", "none", "required" or {"type": "function", "function": {"name": …}}');
  }
  const named = tools.filter((t) => t.function.name === name);
  if (!named.length) throw new BadRequest(`tool_choice names ${JSON.stringify(name)}, which is not an offered tool`);
  return { mode: "required", tools: named };
}

export function errorBody(code, message) {
  return { error: { code, type: code, message } };
}

function id(prefix) {
  return prefix + randomBytes(12).toString("hex");
}

export function toolCallJson(call, index) {
  const tc = { id: id("call_"), type: "function", function: { name: call.name, arguments: call.arguments } };
  return index === undefined ? tc : { index, ...tc };
}

export function usageJson(prompt, completion) {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

export function finishReason(calls, hitLength) {
  if (calls) return "tool_calls";
  return hitLength ? "length" : "stop";
}

/** The chunks of one streamed answer (one id, model and timestamp). */
export class Chunks {
  constructor(model, created) {
    this.base = { id: id("chatcmpl-"), object: "chat.completion.chunk", created, model };
  }

  chunk(delta, finish = null) {
    return { ...this.base, choices: [{ index: 0, delta, finish_reason: finish }] };
  }

  role() {
    return this.chunk({ role: "assistant", content: "" });
  }

  text(t) {
    return this.chunk({ content: t });
  }

  toolCall(index, call) {
    return this.chunk({ tool_calls: [toolCallJson(call, index)] });
  }

  finish(reason) {
    return this.chunk({}, reason);
  }

  usage(prompt, completion) {
    return { ...this.base, choices: [], usage: usageJson(prompt, completion) };
  }
}

export function completion(model, created, text, calls, reason, prompt, completionTokens) {
  const message = { role: "assistant", content: text || (calls.length ? null : "") };
  if (calls.length) message.tool_calls = calls.map((c) => toolCallJson(c));
  return {
    id: id("chatcmpl-"),
    object: "chat.completion",
    created,
    model,
    choices: [{ index: 0, message, finish_reason: reason }],
    usage: usageJson(prompt, completionTokens),
  };
}

/** The length of the longest common prefix of two token arrays. */
export function commonPrefix(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * The cache slot for a prompt: the one whose cached tokens share the longest
 * useful prefix with it, else an empty or the least recently used one. A
 * prefix is useful when it covers at least half of what the slot holds (or
 * 1024 tokens): a project prompt shares only its first sentences with a
 * cached global one, and taking that slot would throw away the global
 * prompt's state for 70 tokens of reuse.
 *
 * A slot holding a scope's warmed head (`head`: its length) is kept for
 * prompts that extend the whole head: one that would cut it (another mode's
 * prompt sharing the rules and some tools, the summarizer's) goes to another
 * slot while there is one. Plain LRU let the eval's mode and calendar turns
 * cut the project head, and the next project turn computed 5 225 tokens
 * (153 s on 2 idle cores) instead of 216.
 *
 * `slots`: `[{tokens: number[], used: number, head?: number}]`; returns `{index, reuse}`.
 */
export function chooseSlot(slots, tokens) {
  const cuts = (s) => s.head > 0 && commonPrefix(s.tokens, tokens) < s.head;
  const open = slots.some((s) => !cuts(s));
  let best = null;
  slots.forEach((s, index) => {
    if (open && cuts(s)) return;
    const n = commonPrefix(s.tokens, tokens);
    const reuse = n > 0 && n >= Math.min(1024, s.tokens.length / 2) ? n : 0;
    if (!best || reuse > best.reuse || (reuse === best.reuse && s.used < best.used)) {
      best = { index, reuse, used: s.used };
    }
  });
  return { index: best.index, reuse: best.reuse };
}
