#!/usr/bin/env node
// The local model server: OpenAI `/v1/chat/completions` (streamed or not)
// and `/v1/models` over one GGUF model, run by node-llama-cpp's prebuilt
// llama.cpp (npm `@node-llama-cpp/linux-x64`: nothing is compiled).
//
// Contract:
// - The prompt is the model's own chat template (GGUF metadata
//   `tokenizer.chat_template`, rendered with @huggingface/jinja) over the
//   request's messages and `tools` (lib/wire.mjs says how messages are
//   adapted: `content: null`, arguments as a string).
// - With tools offered, the server first decides whether the answer is a
//   call or text (lib/decide.mjs: the first token's probability share that
//   starts a call against a threshold; `tool_choice` "required" or a named
//   function: a call), then constrains it by that mode's grammar
//   (lib/grammar.mjs): `<tool_call>` blocks whose JSON names an offered tool
//   with arguments of its schema, or plain text. So a call always parses and
//   is never written as a fenced block that nobody runs. A text answer to the
//   user is held back for its first tokens: if it names an offered tool
//   there, it was a described call, and the answer is generated again as one.
//   Calls go out as OpenAI `tool_calls` deltas (one chunk per call, as soon
//   as it closes) and `finish_reason: "tool_calls"`; text streams as it comes
//   (after the hold).
//   With `stream_options.include_usage` a last chunk carries `usage`.
// - Prompt cache: a few slots (llama.cpp sequences, 4 by default: the global,
//   a project, the calendar scope and the summarizer's prompts) keep the model
//   state of recent prompts; a request takes the slot sharing the longest
//   useful prefix with its prompt (lib/wire.mjs chooseSlot) and computes only the rest (the stable system rules and tool
//   definitions come first, so a new project's first turn reuses them). A
//   slot holding a warmed head keeps it: a prompt that would cut the head
//   goes to another slot while there is one.
//   `--warm FILE` (repeatable): a scope's stable head (`messages`, the
//   first system message, and `tools`; scripts/local_llm_node/warm/: global,
//   project, calendar) is computed into a slot of its own, so the first turn
//   of a scope computes only its own part (the stack starts the server while
//   the Rust functions still compile). The first file is computed as soon as
//   the model is loaded, before any request is served; the others only while
//   no request waits: between chunks of 32 tokens a waiting request goes
//   first, and the head is finished (from where it stopped) once the server
//   is idle again.
// - `--state-dir DIR`: each warmed head's sequence state is saved there
//   (lib/state.mjs: named by the model and the head's tokens, checked by its
//   sha256) and loaded at the next start instead of computed; a missing,
//   corrupt or mismatched file is ignored and the head computed again.
// - One request computes at a time (2 cores); others wait their turn. A
//   client that goes away stops its generation at the next token.
// - Threads: all cores while the rest of the machine is idle, one fewer
//   while other processes use half a core or more (lib/threads.mjs,
//   checked every 250 ms: llama.cpp's threads spin-wait for each other).
// - Bad requests get HTTP 400 `{"error": {"code", "message"}}`; a prompt
//   longer than the window gets 400 `context_length_exceeded`.

import { createServer } from "node:http";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";
import { Template } from "@huggingface/jinja";
import { getLlama, LlamaGrammarEvaluationState, LlamaLogLevel } from "node-llama-cpp";
import { isVerified, prune, saveVerified, stateKey } from "./lib/state.mjs";
import { callShare, policyFor, startsCallText, TextGate } from "./lib/decide.mjs";
import { answerGrammar, parseAnswer, toolNames } from "./lib/grammar.mjs";
import { othersCores, sampleCpu, threadsFor } from "./lib/threads.mjs";
import {
  BadRequest,
  chooseSlot,
  Chunks,
  commonPrefix,
  completion,
  errorBody,
  finishReason,
  readRequest,
} from "./lib/wire.mjs";

// Text the model may write that ends the answer (the template's turn end is
// an end-of-generation token, checked apart): the start of another turn.
const STOP_TEXT = ["<|im_start|>", "<|endoftext|>", "<tool_response>"];

// Tokens a yielding warm-up computes between looks for a waiting request:
// the most a request waits for it. On a fresh clone the warm-up runs on one
// thread beside cargo at ~21 tok/s: 256 made the first answer wait 9 s, 96
// still 4 s; 32 is about 1.5 s there.
const WARM_CHUNK = 32;

function log(msg) {
  process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

const { values: args } = parseArgs({
  options: {
    model: { type: "string" },
    "model-alias": { type: "string", default: "local" },
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "8080" },
    "n-ctx": { type: "string", default: "8192" },
    // Threads at most (default: the cores), and while other processes use
    // half a core or more (default: one fewer, at least 1; lib/threads.mjs).
    threads: { type: "string", default: "" },
    "threads-busy": { type: "string", default: "" },
    slots: { type: "string", default: "4" },
    "dump-dir": { type: "string", default: "" },
    warm: { type: "string", multiple: true, default: [] },
    "state-dir": { type: "string", default: "" },
    // With tools offered (tool_choice "auto"), the answer is a call when the
    // first token's probability share that starts one reaches this
    // (lib/decide.mjs): a small model often describes the call it means to
    // make in prose instead of making it.
    "call-threshold": { type: "string", default: "0.05" },
    // The same after a tool result (lib/decide.mjs policyFor).
    "call-threshold-after-tool": { type: "string", default: "0.5" },
    // Tokens of a text answer held back, in which naming an offered tool
    // turns the answer into a call (0: no hold, no check).
    "hold-tokens": { type: "string", default: "48" },
    // Calls in one answer at most (1 when the request says
    // `parallel_tool_calls: false`): a small model repeated one call until
    // the token limit.
    "max-calls": { type: "string", default: "8" },
  },
});
if (!args.model) {
  log("usage: server.mjs --model FILE.gguf [--model-alias NAME] [--port 8080] [--n-ctx 8192] [--slots 4] [--warm HEAD.json]...");
  process.exit(2);
}

/** Sets `llama.maxThreads` every 250 ms (lib/threads.mjs): fewer threads at
 * once when other processes take the cores, all of them again only after
 * 2 s without (so a busy machine never gets the spinning pair). */
class Governor {
  constructor(llama) {
    const cores = Math.max(1, availableParallelism());
    this.cores = cores;
    this.max = Math.max(1, Number(args.threads) || cores);
    this.busy = Math.max(1, Math.min(this.max, Number(args["threads-busy"]) || this.max - 1));
    this.llama = llama;
    this.samples = [sampleCpu()];
    this.calm = 0;
    // The context takes its ideal threads clamped to this: all of them first.
    llama.maxThreads = this.max;
  }

  /** Once the context exists: careful until the first samples say otherwise. */
  start() {
    this.set(this.busy, "start");
    if (this.max > this.busy) setInterval(() => this.tick(), 250).unref();
  }

  tick() {
    const cur = sampleCpu();
    const prev = this.samples[0];
    this.samples = [...this.samples, cur].slice(-2);
    const want = threadsFor(prev, cur, { cores: this.cores, threads: this.max, busyThreads: this.busy });
    this.calm = want === this.max ? this.calm + 1 : 0;
    if (want < this.now) this.set(want, `others use ${othersCores(prev, cur, this.cores).toFixed(2)} cores`);
    else if (want > this.now && this.calm >= 8) this.set(want, "the machine is otherwise idle");
  }

  set(n, why) {
    if (n === this.now) return;
    this.now = n;
    this.llama.maxThreads = n;
    log(`threads ${n} (${why})`);
  }
}

class Model {
  async load() {
    const t0 = Date.now();
    // build "never": the prebuilt binary or nothing (never a compile on a user's machine).
    this.llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error, progressLogs: false });
    this.model = await this.llama.loadModel({ modelPath: args.model });
    const source = this.model.fileInfo.metadata?.tokenizer?.chat_template;
    if (!source) throw new Error(`${args.model} has no tokenizer.chat_template: cannot render prompts`);
    this.template = new Template(source);
    this.threads = new Governor(this.llama);
    this.context = await this.model.createContext({
      contextSize: Number(args["n-ctx"]),
      sequences: Number(args.slots),
      // As many as the governor allows at each batch.
      threads: { ideal: this.threads.max, min: 1 },
    });
    this.threads.start();
    this.nCtx = this.context.contextSize;
    this.slots = Array.from({ length: Number(args.slots) }, () => ({ seq: this.context.getSequence(), used: 0 }));
    this.grammars = new Map();
    this.policy = {
      threshold: Number(args["call-threshold"]),
      afterTool: Number(args["call-threshold-after-tool"]),
      hold: Number(args["hold-tokens"]),
    };
    this.starts = new Map();
    this.queue = Promise.resolve();
    // Chat requests queued or running, and who waits for there to be none.
    this.requests = 0;
    this.idleWaiters = [];
    log(
      `loaded ${args.model} as ${args["model-alias"]} (n_ctx ${this.nCtx}, ${this.slots.length} cache slots, ` +
        `${this.llama.cpuMathCores} cores, threads ${this.threads.max} or ${this.threads.busy} when others are busy, ` +
        `${this.llama.buildType} llama.cpp) in ${((Date.now() - t0) / 1000).toFixed(1)}s`,
    );
  }

  /** The tokens of a head file (see the module's contract: `--warm`), as
   * a request's prompt starts: rendered without a generation prompt, the
   * head ends with the system turn's `<|im_end|>`, where the request's next
   * message starts. */
  headTokens(path) {
    const head = JSON.parse(readFileSync(path, "utf8"));
    const text = this.template.render({
      messages: head.messages,
      tools: head.tools?.length ? head.tools : undefined,
      add_generation_prompt: false,
      bos_token: "",
      eos_token: "<|im_end|>",
    });
    const tokens = this.model.tokenize(text, true);
    if (tokens.length >= this.nCtx) throw new Error(`${path}: ${tokens.length} tokens do not fit the window`);
    return tokens;
  }

  /** Where the state of `tokens` is kept (none without `--state-dir`). */
  statePath(tokens) {
    if (!args["state-dir"]) return null;
    return join(args["state-dir"], stateKey(`${basename(args.model)} ${this.llama.llamaCppRelease?.release ?? ""}`, tokens));
  }

  /** Computes a head into the slot that shares most of it (or loads its
   * saved state into an empty one). With `yieldable`, stops between chunks
   * while a request waits, keeping what it computed: returns false, and a
   * later call goes on from there. */
  async warm(path, { yieldable }) {
    const t0 = Date.now();
    const tokens = this.headTokens(path);
    const { slot, n } = this.slotFor(tokens);
    // A request of this scope may have computed it already: keep its turn.
    if (n === tokens.length) {
      slot.head = tokens.length;
      return true;
    }
    if (n < slot.seq.nextTokenIndex) {
      await slot.seq.eraseContextTokenRanges([{ start: n, end: slot.seq.nextTokenIndex }]);
    }
    const file = this.statePath(tokens);
    if (slot.seq.nextTokenIndex === 0 && (await this.loadState(slot, tokens, file))) {
      log(`loaded ${tokens.length} tok from ${path} (state ${basename(file)}, slot ${this.slots.indexOf(slot)}) in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
      slot.head = tokens.length;
      return true;
    }
    const from = slot.seq.nextTokenIndex;
    while (slot.seq.nextTokenIndex < tokens.length) {
      if (yieldable && this.requests > 0) {
        log(`warm-up from ${path} yields to a request at ${slot.seq.nextTokenIndex}/${tokens.length} tok`);
        return false;
      }
      const at = slot.seq.nextTokenIndex;
      await slot.seq.controlledEvaluate(tokens.slice(at, yieldable ? at + WARM_CHUNK : tokens.length));
    }
    log(`warmed ${tokens.length} tok (${from} cached) from ${path} into slot ${this.slots.indexOf(slot)} in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    slot.head = tokens.length;
    if (file) await this.save(slot, file);
    return true;
  }

  /** Saves a warmed head's state; a failure only costs the next start time. */
  async save(slot, file) {
    const t0 = Date.now();
    try {
      mkdirSync(args["state-dir"], { recursive: true });
      await saveVerified(file, (tmp) => slot.seq.saveStateToFile(tmp));
      log(`saved its state as ${file} in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    } catch (e) {
      log(`state ${file} not saved: ${e.message || e}`);
    }
  }

  /** Loads a head's saved state into an empty slot: only a file whose
   * checksum holds (lib/state.mjs) and whose tokens are the head's. */
  async loadState(slot, tokens, file) {
    if (!file || !isVerified(file)) return false;
    try {
      await slot.seq.loadStateFromFile(file, { acceptRisk: true });
    } catch (e) {
      // llama.cpp clears the sequence when a read fails.
      log(`state ${file} not loaded (${e.message || e}): computing the head`);
      return false;
    }
    const got = slot.seq.contextTokens;
    if (got.length === tokens.length && commonPrefix(got, tokens) === tokens.length) return true;
    log(`state ${file} holds other tokens: computing the head`);
    await slot.seq.eraseContextTokenRanges([{ start: 0, end: slot.seq.nextTokenIndex }]);
    return false;
  }

  /** Resolves once no chat request is queued or running. */
  idle() {
    return this.requests === 0 ? Promise.resolve() : new Promise((r) => this.idleWaiters.push(r));
  }

  /** Runs a chat request's `fn` in turn (see `exclusive`), counted: warm-ups
   * yield to it. */
  async request(fn) {
    this.requests++;
    try {
      return await this.exclusive(fn);
    } finally {
      if (--this.requests === 0) for (const r of this.idleWaiters.splice(0)) r();
    }
  }

  /** Runs `fn` when every earlier request is done: one computes at a time. */
  exclusive(fn) {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }

  promptTokens(p) {
    let text;
    try {
      text = this.template.render({
        messages: p.messages,
        tools: p.tools.length ? p.tools : undefined,
        add_generation_prompt: true,
        bos_token: "",
        eos_token: "<|im_end|>",
      });
    } catch (e) {
      throw new BadRequest(`chat template: ${e.message}`);
    }
    return this.model.tokenize(text, true);
  }

  /** Whether `token` starts a call (lib/decide.mjs startsCallText; never an
   * end-of-generation or `<|…|>` control token). */
  startsCall(token) {
    let s = this.starts.get(token);
    if (s === undefined) {
      const text = this.model.detokenize([token], true);
      s = !this.model.isEogToken(token) && !text.startsWith("<|") && startsCallText(text);
      if (this.starts.size > 50000) this.starts.clear();
      this.starts.set(token, s);
    }
    return s;
  }

  async grammar(tools, mode, maxCalls) {
    const key = `${mode}/${maxCalls}/${JSON.stringify(tools)}`;
    let g = this.grammars.get(key);
    if (!g) {
      g = await this.llama.createGrammar({ grammar: answerGrammar(tools, mode, maxCalls) });
      if (this.grammars.size > 16) this.grammars.clear();
      this.grammars.set(key, g);
    }
    return g;
  }

  /** The slot for `tokens` (lib/wire.mjs chooseSlot) and how many of its
   * cached tokens the prompt reuses. */
  slotFor(tokens) {
    const { index, reuse } = chooseSlot(
      this.slots.map((s) => ({ tokens: s.seq.contextTokens, used: s.used, head: s.head })),
      tokens,
    );
    const slot = this.slots[index];
    slot.used = Date.now();
    return { slot, n: reuse };
  }
}

/** One answer: the call-or-text decision (lib/decide.mjs), then generation
 * through the grammar of the chosen mode, as events. */
class Answer {
  constructor(model, p, tokens, maxTokens) {
    Object.assign(this, { model, p, tokens, maxTokens });
    this.raw = "";
    this.generated = 0;
    this.wasted = 0; // tokens of a described call, thrown away
    this.hitLength = false;
    this.aborted = false;
    this.t0 = Date.now();
    this.first = 0;
    this.reused = 0;
    this.calls = 0;
    this.share = null;
    this.mode = "plain";
    this.described = null;
  }

  /** Yields `{text}` and `{call}` events in order. */
  async *events() {
    const m = this.model;
    const { slot, n } = m.slotFor(this.tokens);
    this.seq = slot.seq;
    const keep = Math.min(n, this.tokens.length - 1);
    this.reused = keep;
    this.policy = policyFor(this.p.messages, m.policy);
    if (keep < this.seq.nextTokenIndex) {
      await this.seq.eraseContextTokenRanges([{ start: keep, end: this.seq.nextTokenIndex }]);
    }
    if (!this.p.allowCalls) this.mode = "plain";
    else if (this.p.toolChoice === "required") this.mode = "calls";
    else this.mode = (await this.decide()) ? "calls" : "text";
    try {
      yield* this.generate(this.mode);
    } finally {
      this.done();
    }
  }

  /** Computes the prompt and the first token's probabilities: whether the
   * share that starts a call reaches the threshold. The last prompt token is
   * then erased, so generation computes it again under the chosen grammar. */
  async decide() {
    const m = this.model;
    const input = this.tokens.slice(this.seq.nextTokenIndex);
    const last = input.length - 1;
    const out = await this.seq.controlledEvaluate(
      input.map((t, i) => (i === last ? [t, { generateNext: { probabilities: true } }] : t)),
    );
    const probs = out[last]?.next?.probabilities;
    this.share = probs ? callShare(probs, (t) => m.startsCall(t)) : 0;
    await this.erase();
    return this.share >= this.policy.threshold;
  }

  /** Erases everything after the prompt's last token but one. */
  async erase() {
    const from = this.tokens.length - 1;
    if (this.seq.nextTokenIndex > from) {
      await this.seq.eraseContextTokenRanges([{ start: from, end: this.seq.nextTokenIndex }]);
    }
  }

  /** Generates in `mode` ("plain": no tools; "text"; "calls"). Text that
   * names an offered tool early (lib/decide.mjs TextGate) is thrown away and
   * the answer generated again as calls. */
  async *generate(mode) {
    const m = this.model;
    const tools = mode === "calls" ? this.p.callTools : this.p.tools;
    const grammarEvaluationState =
      mode === "plain" ? undefined : new LlamaGrammarEvaluationState({ model: m.model, grammar: await m.grammar(tools, mode, this.p.oneCall ? 1 : Number(args["max-calls"])) });
    // Hold a possibly partial character, and a possible start of a stop text.
    const keepText = (raw) => (raw.endsWith("\uFFFD") ? raw.length - 1 : raw.length) - heldSuffix(raw.replace(/\uFFFD$/, ""), STOP_TEXT);
    const gate = new TextGate(mode === "text" ? toolNames(this.p.tools) : [], mode === "text" ? this.policy.hold : 0, keepText);
    const out = [];
    this.raw = "";
    let callsShown = 0;
    let described = null;
    for await (const token of this.seq.evaluate(this.tokens.slice(this.seq.nextTokenIndex), {
      temperature: this.p.temperature,
      grammarEvaluationState,
    })) {
      if (!this.first) this.first = Date.now() - this.t0;
      if (this.aborted) break;
      if (m.model.isEogToken(token)) break;
      out.push(token);
      this.generated++;
      this.raw = m.model.detokenize(out);
      const stop = STOP_TEXT.map((s) => this.raw.indexOf(s)).filter((i) => i >= 0);
      if (stop.length) this.raw = this.raw.slice(0, Math.min(...stop));
      if (mode === "calls") {
        const calls = parseAnswer(this.raw).calls || [];
        for (; callsShown < calls.length; callsShown++) yield { call: calls[callsShown] };
      } else {
        const g = gate.push(this.raw, out.length);
        if (g.call) {
          described = g.call;
          break;
        }
        if (g.show) yield { text: g.show };
      }
      if (stop.length) break;
      if (this.generated >= this.maxTokens) {
        this.hitLength = true;
        break;
      }
    }
    if (mode !== "calls" && !described && !this.aborted) {
      const g = gate.end(this.raw);
      if (g.call) described = g.call;
      else if (g.show) yield { text: g.show };
    }
    if (described && !this.aborted) {
      this.described = described;
      this.wasted += out.length;
      this.generated -= out.length;
      this.hitLength = false;
      await this.erase();
      yield* this.generate("calls");
      return;
    }
    this.calls = callsShown;
  }

  done() {
    const total = (Date.now() - this.t0) / 1000;
    const gen = Math.max(total - this.first / 1000, 1e-6);
    const decision =
      this.mode === "plain"
        ? ""
        : `, ${this.share === null ? "call required" : `call share ${this.share.toFixed(4)} (threshold ${this.policy.threshold})`} → ${this.mode}` +
          (this.described ? `, text named ${this.described}: ${this.wasted} tok thrown away, then calls` : "");
    log(
      `prompt ${this.tokens.length} tok (${this.reused} cached), tools ${this.p.tools.length}${decision}, ` +
        `first token ${(this.first / 1000).toFixed(1)}s, ${this.generated} tok in ${total.toFixed(1)}s ` +
        `(${(this.generated / gen).toFixed(1)} tok/s), ${this.calls} tool call(s)${this.aborted ? ", client went away" : ""}`,
    );
    if (args["dump-dir"]) {
      mkdirSync(args["dump-dir"], { recursive: true });
      const name = join(args["dump-dir"], `${new Date().toISOString().replace(/[:.]/g, "-")}-${process.pid}.json`);
      writeFileSync(
        name,
        JSON.stringify(
          {
            tools: this.p.tools,
            messages: this.p.messages,
            prompt_tokens: this.tokens.length,
            call_share: this.share,
            mode: this.mode,
            described: this.described,
            raw: this.raw,
          },
          null,
          1,
        ),
      );
    }
  }
}

/** Length of the longest end of `s` that is a proper prefix of a marker. */
function heldSuffix(s, markers) {
  let best = 0;
  for (const mk of markers) {
    for (let n = Math.min(mk.length - 1, s.length); n > best; n--) {
      if (s.endsWith(mk.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}

function sendJson(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
  res.end(data);
}

async function readBody(req) {
  const parts = [];
  for await (const c of req) parts.push(c);
  return Buffer.concat(parts).toString("utf8");
}

async function chat(model, req, res) {
  let p;
  try {
    p = readRequest(JSON.parse((await readBody(req)) || "null"));
  } catch (e) {
    sendJson(res, 400, errorBody("invalid_request", e instanceof SyntaxError ? `invalid JSON: ${e.message}` : e.message));
    return;
  }
  let gone = false;
  res.on("close", () => {
    gone = !res.writableFinished;
  });
  await model.request(async () => {
    if (gone) return;
    let tokens;
    try {
      tokens = model.promptTokens(p);
    } catch (e) {
      sendJson(res, 400, errorBody("invalid_request", e.message));
      return;
    }
    const room = model.nCtx - tokens.length;
    if (room < 16) {
      sendJson(res, 400, errorBody("context_length_exceeded", `the prompt is ${tokens.length} tokens; the window is ${model.nCtx}`));
      return;
    }
    const answer = new Answer(model, p, tokens, Math.min(p.maxTokens || room, room));
    res.on("close", () => {
      if (!res.writableFinished) answer.aborted = true;
    });
    const created = Math.floor(Date.now() / 1000);
    if (!p.stream) {
      let text = "";
      const calls = [];
      for await (const e of answer.events()) {
        if (e.call) calls.push(e.call);
        else text += e.text;
      }
      const reason = finishReason(calls.length, answer.hitLength);
      sendJson(res, 200, completion(args["model-alias"], created, text, calls, reason, tokens.length, answer.generated));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "close" });
    const send = (obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const c = new Chunks(args["model-alias"], created);
    send(c.role());
    let calls = 0;
    try {
      for await (const e of answer.events()) {
        if (e.call) send(c.toolCall(calls++, e.call));
        else send(c.text(e.text));
      }
      send(c.finish(finishReason(calls, answer.hitLength)));
      if (p.includeUsage) send(c.usage(tokens.length, answer.generated));
      res.end("data: [DONE]\n\n");
    } catch (e) {
      // The stream is open: report in-band.
      log(`generation failed: ${e.stack || e}`);
      send(errorBody("model_error", String(e.message || e)));
      res.end();
    }
  });
}

/** Warms the heads (see the module's contract): the first before any
 * request, the others while no request waits. A file that can't be read or
 * rendered is logged and skipped: it only saves time. Then removes the saved
 * states of heads no longer warmed. */
function warmUp(model, paths) {
  const [first, ...rest] = paths;
  // Queued first, so a request waits for it (a global prompt starts with the
  // same head) rather than computing the head beside it.
  const firstDone = first
    ? model.exclusive(() => model.warm(first, { yieldable: false })).catch((e) => log(`warm-up from ${first} skipped: ${e.message || e}`))
    : Promise.resolve();
  (async () => {
    await firstDone;
    for (const path of rest) {
      for (let done = false; !done; ) {
        await model.idle();
        done = await model
          .exclusive(() => model.warm(path, { yieldable: true }))
          .catch((e) => (log(`warm-up from ${path} skipped: ${e.message || e}`), true));
      }
    }
    if (args["state-dir"]) {
      const keep = paths.flatMap((p) => {
        try {
          return [model.statePath(model.headTokens(p))];
        } catch {
          return [];
        }
      });
      for (const gone of prune(args["state-dir"], keep)) log(`removed ${gone}: no warm head has it`);
    }
  })();
}

async function main() {
  const model = new Model();
  await model.load();
  const server = createServer((req, res) => {
    const path = (req.url || "").split("?")[0].replace(/\/+$/, "");
    if (req.method === "GET" && (path === "/v1/models" || path === "/models")) {
      sendJson(res, 200, { object: "list", data: [{ id: args["model-alias"], object: "model", owned_by: "local", created: 0 }] });
    } else if (req.method === "POST" && (path === "/v1/chat/completions" || path === "/chat/completions")) {
      chat(model, req, res).catch((e) => {
        log(`request failed: ${e.stack || e}`);
        if (!res.headersSent) sendJson(res, 500, errorBody("model_error", String(e.message || e)));
        else res.end();
      });
    } else {
      sendJson(res, 404, errorBody("not_found", `no route ${req.method} ${req.url}`));
    }
  });
  warmUp(model, args.warm);
  server.keepAliveTimeout = 5000;
  server.listen(Number(args.port), args.host, () => log(`serving http://${args.host}:${args.port}/v1 (model ${args["model-alias"]})`));
}

main().catch((e) => {
  log(`fatal: ${e.stack || e}`);
  process.exit(1);
});
