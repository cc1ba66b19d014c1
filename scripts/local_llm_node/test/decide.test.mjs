// Call or answer (lib/decide.mjs), the grammar's modes and tool_choice,
// without node-llama-cpp or a model: `node --test scripts/local_llm_node/test/`.

import { test } from "node:test";
import assert from "node:assert/strict";
import { callShare, namedTool, policyFor, startsCallText, TextGate } from "../lib/decide.mjs";
import { answerGrammar } from "../lib/grammar.mjs";
import { BadRequest, readRequest, readToolChoice } from "../lib/wire.mjs";

const tool = (name) => ({ type: "function", function: { name, parameters: { type: "object", properties: {} } } });
const TOOLS = [tool("update_entity"), tool("create_task"), tool("search")];
const NAMES = ["update_entity", "create_task", "search"];

test("the first token's share that starts a call: the call token and calls written the wrong way", () => {
  const CALL = 7;
  const text = { 1: "To", 2: "Paris", 3: "```", 4: " {", 5: "<", 6: "I" };
  const starts = (t) => t === CALL || startsCallText(text[t] ?? "");
  // Prose wins the argmax, yet a call holds a real share.
  assert.equal(
    callShare(
      [
        [1, 0.8],
        [CALL, 0.06],
        [3, 0.02],
        [4, 0.01],
        [6, 0.01],
      ],
      starts,
    ).toFixed(2),
    "0.09",
  );
  // A question: next to nothing.
  assert.ok(callShare(new Map([[2, 0.97], [6, 0.02], [CALL, 1e-4]]), starts) < 0.001);
  // Below the floor nothing is looked at (the list is most likely first).
  assert.equal(callShare([[2, 0.99], [CALL, 1e-6]], starts), 0);
  for (const t of ["{", " {\"", "```", "`", "<", "<json>"]) assert.ok(startsCallText(t), t);
  for (const t of ["To", "Paris", " I", "1"]) assert.ok(!startsCallText(t), t);
});

test("a text names an offered tool as a call would", () => {
  assert.equal(namedTool("To rename it, use the update_entity tool", NAMES), "update_entity");
  assert.equal(namedTool("you can call `search` with the query", NAMES), "search");
  assert.equal(namedTool('use "create_task" for that', NAMES), "create_task");
  assert.equal(namedTool("search(query)", NAMES), "search");
  // Plain words are not calls: a name without an underscore must be marked.
  assert.equal(namedTool("I will search the documents for you.", NAMES), null);
  assert.equal(namedTool("Paris", NAMES), null);
  // Part of a longer identifier is not the tool.
  assert.equal(namedTool("my_update_entity_helper", NAMES), null);
});

test("held text is sent once the window passes without a described call", () => {
  const g = new TextGate(NAMES, 3);
  assert.deepEqual(g.push("The", 1), { show: "" });
  assert.deepEqual(g.push("The capital", 2), { show: "" });
  assert.deepEqual(g.push("The capital is", 3), { show: "The capital is" });
  assert.deepEqual(g.push("The capital is Paris", 4), { show: " Paris" });
  assert.deepEqual(g.end("The capital is Paris."), { show: "." });
});

test("a described call inside the window sends nothing and becomes a call", () => {
  const g = new TextGate(NAMES, 8);
  assert.deepEqual(g.push("To rename", 2), { show: "" });
  assert.deepEqual(g.push("To rename the task, call update_entity", 7), { call: "update_entity" });
  // A short answer that ends inside the window is checked too.
  assert.deepEqual(new TextGate(NAMES, 8).end("Use `create_task`."), { call: "create_task" });
  assert.deepEqual(new TextGate(NAMES, 8).end("Paris"), { show: "Paris" });
});

test("after the window, text streams and a later tool name is only text", () => {
  const g = new TextGate(NAMES, 1);
  assert.deepEqual(g.push("Done.", 1), { show: "Done." });
  assert.deepEqual(g.push("Done. I used create_task", 2), { show: " I used create_task" });
  // No window: nothing held, nothing checked.
  assert.deepEqual(new TextGate(NAMES, 0).push("call update_entity", 1), { show: "call update_entity" });
});

test("the gate holds what the server says it may not send yet", () => {
  const g = new TextGate([], 0, (raw) => raw.length - 2);
  assert.deepEqual(g.push("Hello <|", 2), { show: "Hello " });
  assert.deepEqual(g.end("Hello <|"), { show: "<|" });
});

test("the grammar's modes: either, calls only, text only", () => {
  assert.match(answerGrammar(TOOLS), /^root ::= calls \| text$/m);
  assert.match(answerGrammar(TOOLS, "calls"), /^root ::= calls$/m);
  assert.match(answerGrammar(TOOLS, "text"), /^root ::= text$/m);
  assert.throws(() => answerGrammar(TOOLS, "maybe"), /mode/);
});

test("an answer holds at most maxCalls calls (one under parallel_tool_calls: false)", () => {
  const calls = (n) => answerGrammar(TOOLS, "calls", n).split("\n").find((l) => l.startsWith("calls ::="));
  assert.equal(calls(1), "calls ::= callblock");
  assert.equal(calls(3), 'calls ::= callblock ( "\\n" callblock ( "\\n" callblock )? )?');
  assert.equal(calls(Infinity), 'calls ::= callblock ( "\\n" callblock )*');
  assert.equal(calls(undefined), calls(Infinity));
});

test("tool_choice: auto, none, required, a named function", () => {
  assert.deepEqual(readToolChoice(undefined, TOOLS), { mode: "auto", tools: TOOLS });
  assert.deepEqual(readToolChoice("auto", TOOLS), { mode: "auto", tools: TOOLS });
  assert.deepEqual(readToolChoice("none", TOOLS), { mode: "none", tools: [] });
  assert.deepEqual(readToolChoice("required", TOOLS), { mode: "required", tools: TOOLS });
  assert.deepEqual(readToolChoice({ type: "function", function: { name: "search" } }, TOOLS), {
    mode: "required",
    tools: [TOOLS[2]],
  });
  assert.throws(() => readToolChoice({ type: "function", function: { name: "nope" } }, TOOLS), /not an offered tool/);
  assert.throws(() => readToolChoice("required", []), BadRequest);
  assert.throws(() => readToolChoice("sometimes", TOOLS), /tool_choice must be/);
  const p = readRequest({ messages: [{ role: "user", content: "x" }], tools: TOOLS, tool_choice: "required" });
  assert.equal(p.toolChoice, "required");
  assert.equal(p.allowCalls, true);
  assert.equal(readRequest({ messages: [{ role: "user", content: "x" }], tools: TOOLS }).toolChoice, "auto");
});

test("after a tool result: a higher threshold and no hold (a report names the tool it used)", () => {
  const opts = { threshold: 0.05, afterTool: 0.5, hold: 48 };
  const user = [{ role: "system", content: "rules" }, { role: "user", content: "Move my 3pm to 4pm." }];
  assert.deepEqual(policyFor(user, opts), { threshold: 0.05, hold: 48 });
  const tool = [...user, { role: "assistant", content: "", tool_calls: [] }, { role: "tool", content: "{}" }];
  assert.deepEqual(policyFor(tool, opts), { threshold: 0.5, hold: 0 });
  // The report after a call streams as it comes, the tool's name and all.
  const { hold } = policyFor(tool, opts);
  assert.deepEqual(new TextGate(NAMES, hold).push("Moved it with update_entity.", 5), { show: "Moved it with update_entity." });
});
