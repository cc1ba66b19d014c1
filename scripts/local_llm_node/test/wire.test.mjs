// The wire translation and the answer grammar, without node-llama-cpp or a
// model: `node --test scripts/local_llm_node/test/` (scripts/test.sh runs it).

import { test } from "node:test";
import assert from "node:assert/strict";
import { answerGrammar, arrayItems, literal, parseAnswer, toolNames } from "../lib/grammar.mjs";
import { BadRequest, chooseSlot, Chunks, commonPrefix, completion, readRequest, templateMessages } from "../lib/wire.mjs";

const TOOLS = [
  {
    type: "function",
    function: {
      name: "create_task",
      description: "Create a task",
      parameters: {
        type: "object",
        properties: {
          title: { type: "string" },
          due: { type: ["string", "null"], format: "date" },
          priority: { type: "string", enum: ["low", "high"] },
          tags: { type: "array", items: { type: "string" } },
        },
        required: ["title"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "update_entity",
      parameters: {
        type: "object",
        properties: {
          id: { type: "string" },
          fields: { oneOf: [{ type: "object", properties: { name: { type: "string" } } }, { type: "null" }] },
        },
      },
    },
  },
  { type: "function", function: { name: "get_doc_structure", parameters: { type: "object", properties: {} } } },
];

test("an assistant tool-call message with content null reads as the template needs it", () => {
  const msgs = templateMessages([
    { role: "system", content: "rules" },
    { role: "user", content: [{ type: "text", text: "add " }, { type: "text", text: "it" }] },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "create_task", arguments: '{"title":"x"}' } }],
    },
    { role: "tool", tool_call_id: "c1", content: '{"ok":true}' },
  ]);
  assert.equal(msgs[1].content, "add it");
  assert.equal(msgs[2].content, "");
  assert.deepEqual(msgs[2].tool_calls[0].function, { name: "create_task", arguments: { title: "x" } });
  assert.equal(msgs[3].tool_call_id, "c1");
});

test("arguments that are not JSON stay the string the model sent", () => {
  const [m] = templateMessages([
    { role: "assistant", content: null, tool_calls: [{ function: { name: "f", arguments: "{oops" } }] },
  ]);
  assert.equal(m.tool_calls[0].function.arguments, "{oops");
});

test("parallel_tool_calls: false asks for one call per answer", () => {
  const messages = [{ role: "user", content: "x" }];
  assert.equal(readRequest({ messages }).oneCall, false);
  assert.equal(readRequest({ messages, parallel_tool_calls: true }).oneCall, false);
  assert.equal(readRequest({ messages, parallel_tool_calls: false }).oneCall, true);
  assert.throws(() => readRequest({ messages, parallel_tool_calls: "no" }), /parallel_tool_calls/);
});

test("bad requests are refused with a reason", () => {
  assert.throws(() => readRequest([]), BadRequest);
  assert.throws(() => readRequest({ messages: [] }), /non-empty/);
  assert.throws(() => readRequest({ messages: [{ role: "robot", content: "x" }] }), /role/);
  assert.throws(() => readRequest({ messages: [{ role: "user", content: 5 }] }), /content/);
  assert.throws(() => readRequest({ messages: [{ role: "user", content: "x" }], max_tokens: 0 }), /max_tokens/);
  assert.throws(() => readRequest({ messages: [{ role: "user", content: "x" }], tools: [{}] }), /tools/);
  assert.throws(
    () => readRequest({ messages: [{ role: "user", content: "x", tool_calls: [{ function: {} }] }] }),
    /tool_calls/,
  );
});

test("a request's settings: usage, tool choice, temperature", () => {
  const p = readRequest({
    messages: [{ role: "user", content: "x" }],
    tools: TOOLS,
    stream: true,
    stream_options: { include_usage: true },
    max_completion_tokens: 64,
  });
  assert.equal(p.stream, true);
  assert.equal(p.includeUsage, true);
  assert.equal(p.maxTokens, 64);
  assert.equal(p.temperature, 0.2);
  assert.equal(p.allowCalls, true);
  assert.equal(readRequest({ messages: [{ role: "user", content: "x" }], tools: TOOLS, tool_choice: "none" }).allowCalls, false);
  assert.equal(readRequest({ messages: [{ role: "user", content: "x" }] }).allowCalls, false);
});

test("streamed chunks: tool calls in OpenAI's delta form, then finish and usage", () => {
  const c = new Chunks("m", 1);
  const role = c.role();
  assert.equal(role.object, "chat.completion.chunk");
  assert.deepEqual(role.choices[0].delta, { role: "assistant", content: "" });
  const call = c.toolCall(1, { name: "create_task", arguments: '{"title":"x"}' });
  const tc = call.choices[0].delta.tool_calls[0];
  assert.equal(tc.index, 1);
  assert.equal(tc.type, "function");
  assert.match(tc.id, /^call_[0-9a-f]{24}$/);
  assert.deepEqual(tc.function, { name: "create_task", arguments: '{"title":"x"}' });
  assert.equal(c.finish("tool_calls").choices[0].finish_reason, "tool_calls");
  const usage = c.usage(10, 3);
  assert.deepEqual(usage.choices, []);
  assert.deepEqual(usage.usage, { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 });
  // One id for every chunk of an answer.
  assert.equal(role.id, usage.id);
});

test("a whole answer with calls has content null", () => {
  const w = completion("m", 1, "", [{ name: "f", arguments: "{}" }], "tool_calls", 5, 2);
  assert.equal(w.choices[0].message.content, null);
  assert.equal(w.choices[0].message.tool_calls[0].function.name, "f");
  assert.equal(completion("m", 1, "hi", [], "stop", 5, 2).choices[0].message.content, "hi");
});

test("the grammar names every tool and keeps optional fields optional", () => {
  const g = answerGrammar(TOOLS);
  assert.deepEqual(toolNames(TOOLS), ["create_task", "update_entity", "get_doc_structure"]);
  for (const name of toolNames(TOOLS)) assert.ok(g.includes(literal(JSON.stringify(name))), name);
  assert.match(g, /^root ::= calls \| text$/m);
  // create_task: title required, then due / priority / tags each optional.
  const obj = g.split("\n").find((l) => l.includes(literal('"title"')));
  assert.ok(obj.includes(literal('"due"')) && obj.includes(")?"), obj);
  // The enum is its values, as JSON strings.
  assert.ok(g.includes(`${literal('"low"')} | ${literal('"high"')}`), g);
  // Every rule used is defined.
  const defined = new Set(g.split("\n").filter(Boolean).map((l) => l.split(" ::= ")[0]));
  for (const line of g.split("\n").filter(Boolean)) {
    const body = line.split(" ::= ")[1].replace(/"(?:[^"\\]|\\.)*"/g, "").replace(/\[(?:[^\]\\]|\\.)*\]/g, "");
    for (const ref of body.match(/[a-z][a-z0-9]*/g) || []) assert.ok(defined.has(ref), `${ref} in ${line}`);
  }
});

test("a bounded array closes at maxItems; an unbounded one may run on", () => {
  assert.equal(arrayItems("x"), `( x ( ws "," ws x )* )?`);
  // stages: 1 to 3 items, then only "]" fits.
  assert.equal(arrayItems("x", 1, 3), `x ( ws "," ws x ( ws "," ws x )? )?`);
  assert.equal(arrayItems("x", 0, 1), `( x )?`);
  assert.equal(arrayItems("x", 2), `x ws "," ws x ( ws "," ws x )*`);
  const g = answerGrammar([{ type: "function", function: { name: "plan", parameters: {
    type: "object", required: ["stages"],
    properties: { stages: { type: "array", maxItems: 2, items: { type: "string" } } } } } }]);
  assert.ok(g.includes(`"[" ws ( jstring ( ws "," ws jstring )? )? ws "]"`), g);
});

test("the answer is calls or text", () => {
  const raw =
    '<tool_call>\n{"name": "create_task", "arguments": {"title": "Write the post"}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "get_doc_structure", "arguments": {}}\n</tool_call>';
  assert.deepEqual(parseAnswer(raw), {
    kind: "calls",
    calls: [
      { name: "create_task", arguments: '{"title":"Write the post"}' },
      { name: "get_doc_structure", arguments: "{}" },
    ],
  });
  // Cut off inside the second call: the closed one is kept.
  assert.equal(parseAnswer(raw.slice(0, -20)).calls.length, 1);
  assert.deepEqual(parseAnswer("Paris."), { kind: "text", text: "Paris." });
});

test("common prefix of cached and new prompt tokens", () => {
  assert.equal(commonPrefix([1, 2, 3], [1, 2, 4, 5]), 2);
  assert.equal(commonPrefix([], [1]), 0);
  assert.equal(commonPrefix([1, 2], [1, 2]), 2);
});

test("a prompt takes the slot it shares most with, never one it barely shares with", () => {
  const global = { tokens: [1, 2, 3, 4, 5, 6, 7, 8], used: 3 };
  const project = { tokens: [1, 2, 9, 9, 9, 9], used: 2 };
  const empty = { tokens: [], used: 0 };
  // Another project: shares the rules with the project slot (most of it).
  assert.deepEqual(chooseSlot([global, project, empty], [1, 2, 9, 9, 9, 7, 7]), { index: 1, reuse: 5 });
  // A new scope sharing only the first tokens with the global one: the empty slot.
  assert.deepEqual(chooseSlot([global, project, empty], [1, 2, 4]), { index: 2, reuse: 0 });
  // No empty slot: the least recently used one.
  assert.deepEqual(chooseSlot([global, { ...project, tokens: [5] }], [8, 8]), { index: 1, reuse: 0 });
  // The same prompt again: all of it.
  assert.deepEqual(chooseSlot([global, project], global.tokens), { index: 0, reuse: 8 });
});
