// The warm heads (warm/*.json) against the slot choice, and the saved
// states' names and checks (lib/state.mjs), without node-llama-cpp or a
// model: `node --test scripts/local_llm_node/test/`.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chooseSlot } from "../lib/wire.mjs";
import { isVerified, prune, saveVerified, stateKey } from "../lib/state.mjs";

const WARM = new URL("../warm/", import.meta.url);
const SCOPES = ["global", "project", "calendar"];

/** A stand-in tokenizer: words, spaces and punctuation, one id each (the
 * heads' shared prefixes keep their shape; counts are near the model's). */
function tokenizer() {
  const ids = new Map();
  return (text) =>
    text.match(/\w+|\s+|[^\w\s]/g).map((piece) => {
      if (!ids.has(piece)) ids.set(piece, ids.size + 1);
      return ids.get(piece);
    });
}

/** A head as the chat template lays it out: the rules, then the tools. */
function render(head) {
  return `<|im_start|>system\n${head.messages[0].content}\n\n# Tools\n${head.tools.map((t) => JSON.stringify(t)).join("\n")}<|im_end|>\n`;
}

function heads(tok) {
  return Object.fromEntries(SCOPES.map((s) => [s, tok(render(JSON.parse(readFileSync(new URL(`${s}.json`, WARM), "utf8"))))]));
}

/** The server's slots as chooseSlot sees them, with a clock for `used`. */
class Slots {
  constructor(n) {
    this.slots = Array.from({ length: n }, () => ({ tokens: [], used: 0 }));
    this.clock = 0;
  }

  /** Where `tokens` goes; the slot then holds them (as after a request),
   * its warmed head kept when they extend it. */
  take(tokens) {
    const pick = chooseSlot(this.slots, tokens);
    const head = this.slots[pick.index].head;
    const kept = head > 0 && pick.reuse >= head ? head : 0;
    this.slots[pick.index] = { tokens, used: ++this.clock, head: kept };
    return pick;
  }

  /** A warm-up: the slot holds `tokens` as a scope's head. */
  warm(tokens) {
    const pick = this.take(tokens);
    this.slots[pick.index].head = tokens.length;
    return pick;
  }
}

test("each scope's head is its own, and shares only its first words with the others", () => {
  const h = heads(tokenizer());
  for (const a of SCOPES) {
    assert.ok(h[a].length > 500, `${a}: ${h[a].length} tokens`);
    for (const b of SCOPES.filter((s) => s !== a)) assert.notDeepEqual(h[a], h[b]);
  }
});

test("the warmed heads take a slot each, and each scope's turn then takes its own", () => {
  const tok = tokenizer();
  const h = heads(tok);
  const s = new Slots(4);
  const warmed = Object.fromEntries(SCOPES.map((scope) => [scope, s.warm(h[scope])]));
  assert.deepEqual(new Set(Object.values(warmed).map((w) => w.index)).size, 3, JSON.stringify(warmed));
  assert.ok(Object.values(warmed).every((w) => w.reuse === 0), "no head reuses another's first words");

  const turn = (scope, context, message) =>
    [...h[scope], ...tok(`<|im_start|>system\n${context}<|im_end|>\n<|im_start|>user\n${message}<|im_end|>\n<|im_start|>assistant\n`)];
  const project = s.take(turn("project", 'Context (JSON):\n{"project": {"name": "Launch"}}', "Add a task"));
  assert.deepEqual(project, { index: warmed.project.index, reuse: h.project.length });
  const calendar = s.take(turn("calendar", "Calendar: today 2026-12-07", "What is on tomorrow?"));
  assert.deepEqual(calendar, { index: warmed.calendar.index, reuse: h.calendar.length });
  // The summarizer's prompt shares nothing: the fourth slot, no warm head lost.
  const summary = s.take(tok("<|im_start|>system\nSummarize the conversation below.<|im_end|>\n"));
  assert.ok(!Object.values(warmed).some((w) => w.index === summary.index));
  // Another project's first turn: the project slot again, its head (and
  // the first words of the first project's context) reused.
  const other = s.take(turn("project", 'Context (JSON):\n{"project": {"name": "Garden"}}', "Plan the beds"));
  assert.equal(other.index, warmed.project.index);
  assert.ok(other.reuse >= h.project.length, `${other.reuse} of ${h.project.length}`);
  const global = s.take(turn("global", "", "Create a project called Launch"));
  assert.deepEqual(global, { index: warmed.global.index, reuse: h.global.length });
});

test("a prompt that would cut a warmed head takes another slot, and the head stays", () => {
  const tok = tokenizer();
  const h = heads(tok);
  const s = new Slots(4);
  const warmed = Object.fromEntries(SCOPES.map((scope) => [scope, s.warm(h[scope])]));
  // A mode's prompt: the project head's rules and first tools, then its own
  // (as the eval's audit and forecast turns): more than 1024 tokens shared.
  const shared = h.project.slice(0, Math.max(1100, Math.floor(h.project.length * 0.6)));
  assert.ok(shared.length < h.project.length && shared.length >= 1024, `${shared.length} of ${h.project.length}`);
  for (const mode of ["audit", "forecast", "brief"]) {
    const pick = s.take([...shared, ...tok(`<|im_start|>system\nmode ${mode} tools<|im_end|>\n`)]);
    assert.ok(!Object.values(warmed).some((w) => w.index === pick.index), `${mode} took a head's slot ${pick.index}`);
  }
  // Every head is still whole: each scope's next turn reuses all of it.
  for (const scope of SCOPES) {
    const next = s.take([...h[scope], ...tok(`<|im_start|>user\nnext ${scope} turn<|im_end|>\n`)]);
    assert.deepEqual(next, { index: warmed[scope].index, reuse: h[scope].length }, scope);
  }
  // With every slot holding a head, a prompt still gets one (the least recently used).
  const full = new Slots(3);
  SCOPES.forEach((scope) => full.warm(h[scope]));
  assert.ok(full.take(tok("<|im_start|>system\nSummarize.<|im_end|>\n")).index >= 0);
});

test("a state's name changes with the model and with every token of the head", () => {
  const key = stateKey("qwen.gguf b6000", [1, 2, 3]);
  assert.match(key, /^[0-9a-f]{64}\.bin$/);
  assert.equal(stateKey("qwen.gguf b6000", [1, 2, 3]), key);
  assert.notEqual(stateKey("other.gguf b6000", [1, 2, 3]), key);
  assert.notEqual(stateKey("qwen.gguf b6001", [1, 2, 3]), key);
  assert.notEqual(stateKey("qwen.gguf b6000", [1, 2, 4]), key);
  assert.notEqual(stateKey("qwen.gguf b6000", [1, 2]), key);
});

test("a saved state is loaded only while whole and unchanged", async () => {
  const dir = mkdtempSync(join(tmpdir(), "llm-state-"));
  const file = join(dir, stateKey("m", [1]));
  assert.equal(isVerified(file), false, "absent");
  await saveVerified(file, async (tmp) => writeFileSync(tmp, Buffer.from("kv state bytes")));
  assert.equal(isVerified(file), true);
  assert.deepEqual(readdirSync(dir).sort(), [`${stateKey("m", [1])}`, `${stateKey("m", [1])}.sha256`], "no temporary file left");
  writeFileSync(file, Buffer.from("kv state bytez"));
  assert.equal(isVerified(file), false, "a changed byte");
  writeFileSync(file, Buffer.from("kv state"));
  assert.equal(isVerified(file), false, "cut short");
  // A failed write leaves neither the file nor a temporary one.
  const other = join(dir, stateKey("m", [2]));
  await assert.rejects(saveVerified(other, async () => {
    throw new Error("disk full");
  }));
  assert.equal(isVerified(other), false);
  assert.equal(readdirSync(dir).length, 2);
});

test("prune keeps the warmed heads' states and what is not a state", () => {
  const dir = mkdtempSync(join(tmpdir(), "llm-state-"));
  const keep = stateKey("m", [1]);
  const old = stateKey("m", [2]);
  for (const n of [keep, `${keep}.sha256`, old, `${old}.sha256`, "notes.txt"]) writeFileSync(join(dir, n), "x");
  assert.deepEqual(prune(dir, [join(dir, keep)]).sort(), [old, `${old}.sha256`]);
  assert.deepEqual(readdirSync(dir).sort(), [keep, `${keep}.sha256`, "notes.txt"].sort());
  assert.deepEqual(prune(join(dir, "absent"), []), []);
});
