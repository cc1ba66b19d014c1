// The answer's grammar (GBNF, llama.cpp's grammar format): what the model
// may write when tools are offered, so that every tool call it makes parses
// and names an offered tool with arguments of that tool's JSON Schema.
//
// Contract: `answerGrammar(tools)` returns GBNF text whose language is
// either
//   - one or more calls, each `<tool_call>\n{"name": N, "arguments": A}\n</tool_call>`
//     (Qwen2.5's own form), separated by one newline, where N is an offered
//     tool's name and A an object of its parameters' schema (required
//     properties always, optional ones in schema order, each at most once);
//   - or plain text that starts with none of `<`, `{`, `` ` ``, or white
//     space, and holds no `{`, no ```` ``` ```` and no `<t`: so a call can never be
//     written as a fenced or bare JSON block that nobody runs.
// `parseAnswer` turns such an answer back into text or calls.
//
// Why our own JSON-Schema-to-GBNF rather than node-llama-cpp's
// createGrammarForJsonSchema: that one writes every listed property (it
// ignores `required`), so an update tool with ten optional fields would make
// the model fill all ten. Schema keywords not listed below (format, pattern,
// lengths, minimum …) are not enforced here: the app validates the
// arguments and tells the model what was wrong.

const STRING_CHAR = String.raw`[^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4}`;

const BASE_RULES = [
  `ws ::= [ ]?`,
  `jstring ::= "\\"" jchar* "\\""`,
  `jchar ::= ${STRING_CHAR}`,
  `jinteger ::= "-"? ("0" | [1-9] [0-9]{0,15})`,
  `jnumber ::= jinteger ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?`,
  `jboolean ::= "true" | "false"`,
  `jnull ::= "null"`,
  `jvalue ::= jstring | jnumber | jboolean | jnull | jobject | jarray`,
  `jobject ::= "{" ws ( jstring ws ":" ws jvalue ( ws "," ws jstring ws ":" ws jvalue )* )? ws "}"`,
  `jarray ::= "[" ws ( jvalue ( ws "," ws jvalue )* )? ws "]"`,
];

/** A GBNF string literal for `s`. */
export function literal(s) {
  return (
    '"' +
    s
      .replace(/\\/g, "\\\\")
      .replace(/"/g, '\\"')
      .replace(/\n/g, "\\n")
      .replace(/\r/g, "\\r")
      .replace(/\t/g, "\\t") +
    '"'
  );
}

/** The GBNF literal of a JSON value written as JSON (`"x"` for the string x). */
function jsonLiteral(v) {
  return literal(JSON.stringify(v));
}

class Rules {
  constructor() {
    this.rules = new Map();
    this.n = 0;
  }

  /** Adds `body` under a new name (or the name of an identical body). */
  add(prefix, body) {
    for (const [name, b] of this.rules) if (b === body) return name;
    const name = `${prefix}${this.n++}`;
    this.rules.set(name, body);
    return name;
  }

  text() {
    return [...this.rules].map(([n, b]) => `${n} ::= ${b}`).join("\n");
  }
}

function types(schema) {
  if (Array.isArray(schema.type)) return schema.type;
  return schema.type ? [schema.type] : [];
}

/** allOf's parts merged into one schema (objects: properties and required joined). */
function merged(schema) {
  if (!Array.isArray(schema.allOf)) return schema;
  const out = { ...schema };
  delete out.allOf;
  for (const part of schema.allOf.map(merged)) {
    for (const [k, v] of Object.entries(part)) {
      if (k === "properties") out.properties = { ...(out.properties || {}), ...v };
      else if (k === "required") out.required = [...(out.required || []), ...v];
      else if (!(k in out)) out[k] = v;
    }
  }
  return out;
}

/** The GBNF expression for a value of `schema` (rules added to `r`). */
export function valueRule(schema, r, depth = 0) {
  if (schema === true || schema === undefined || schema === null || depth > 12) return "jvalue";
  if (schema === false) return "jnull";
  schema = merged(schema);
  if ("const" in schema) return jsonLiteral(schema.const);
  if (Array.isArray(schema.enum)) {
    return r.add("enum", schema.enum.map(jsonLiteral).join(" | ") || "jnull");
  }
  const alts = schema.oneOf || schema.anyOf;
  if (Array.isArray(alts) && alts.length) {
    const parts = [...new Set(alts.map((s) => valueRule(s, r, depth + 1)))];
    return parts.length === 1 ? parts[0] : r.add("alt", parts.join(" | "));
  }
  const ts = types(schema);
  if (ts.length > 1) {
    const parts = [...new Set(ts.map((t) => valueRule({ ...schema, type: t }, r, depth + 1)))];
    return r.add("alt", parts.join(" | "));
  }
  switch (ts[0]) {
    case "string":
      return "jstring";
    case "integer":
      return "jinteger";
    case "number":
      return "jnumber";
    case "boolean":
      return "jboolean";
    case "null":
      return "jnull";
    case "array": {
      const item = valueRule(schema.items, r, depth + 1);
      return r.add("arr", `"[" ws ${arrayItems(item, schema.minItems, schema.maxItems)} ws "]"`);
    }
    case "object":
      return objectRule(schema, r, depth);
    default:
      return schema.properties ? objectRule(schema, r, depth) : "jvalue";
  }
}

/** The items of an array of `item`s, between `minItems` and `maxItems`
 * when the schema bounds them (a bounded list closes: a small model that
 * repeats an item cannot run on to the token limit). Spelled out, not
 * `{m,n}`: nested optionals keep the grammar's parse states few. */
export function arrayItems(item, minItems, maxItems) {
  const min = Number.isInteger(minItems) && minItems > 0 ? minItems : 0;
  const max = Number.isInteger(maxItems) && maxItems >= Math.max(min, 1) ? maxItems : Infinity;
  const next = `ws "," ws ${item}`;
  if (max === Infinity) {
    const rest = `( ${next} )*`;
    if (min === 0) return `( ${item} ${rest} )?`;
    return [item, ...Array(min - 1).fill(next), rest].join(" ");
  }
  // The optional tail: up to (max - have) more items, nested.
  const tail = (n) => (n <= 0 ? "" : `( ${[next, tail(n - 1)].filter(Boolean).join(" ")} )?`);
  if (min === 0) return `( ${[item, tail(max - 1)].filter(Boolean).join(" ")} )?`;
  return [item, ...Array(min - 1).fill(next), tail(max - min)].filter(Boolean).join(" ");
}

/** An object: its required properties in order, then each optional one at
 * most once, in schema order. No other keys (a key the schema does not name
 * is one the app would refuse). */
function objectRule(schema, r, depth) {
  const props = Object.entries(schema.properties || {});
  if (!props.length) {
    return schema.additionalProperties === false ? r.add("obj", `"{" ws "}"`) : "jobject";
  }
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const kv = ([name, s]) => `${literal(JSON.stringify(name))} ws ":" ws ${valueRule(s, r, depth + 1)}`;
  const req = props.filter(([n]) => required.has(n)).map(kv);
  const opt = props.filter(([n]) => !required.has(n)).map(kv);
  const comma = `ws "," ws`;
  let body;
  if (req.length) {
    body = req.join(` ${comma} `) + opt.map((o) => ` ( ${comma} ${o} )?`).join("");
  } else {
    // Any non-empty ordered subset of the optional ones, or none.
    const starts = opt.map((o, i) => [o, ...opt.slice(i + 1).map((x) => `( ${comma} ${x} )?`)].join(" "));
    body = `( ${starts.map((s) => `( ${s} )`).join(" | ")} )?`;
  }
  return r.add("obj", `"{" ws ${body} ws "}"`);
}

/** The tools' (OpenAI `tools` array) names, in order. */
export function toolNames(tools) {
  return (tools || []).map((t) => t?.function?.name).filter((n) => typeof n === "string" && n);
}

/** The GBNF of an answer when `tools` are offered (see the module's
 * contract). `mode`: "either" (calls or text), "calls" (one or more calls:
 * the server decided the answer is a call, or `tool_choice` requires one) or
 * "text" (text only: the server decided the answer is not a call). */
export function answerGrammar(tools, mode = "either", maxCalls = Infinity) {
  const r = new Rules();
  const calls = (tools || [])
    .filter((t) => typeof t?.function?.name === "string" && t.function.name)
    .map((t) => {
      const args = valueRule(t.function.parameters || { type: "object", properties: {} }, r);
      const argsRule = args === "jvalue" || args.startsWith('"') ? "jobject" : args;
      return r.add(
        "call",
        `"{" ws ${literal('"name"')} ws ":" ws ${jsonLiteral(t.function.name)} ws "," ws ${literal('"arguments"')} ws ":" ws ${argsRule} ws "}"`,
      );
    });
  if (!calls.length) throw new Error("answerGrammar: no tool has a name");
  const root = { either: "calls | text", calls: "calls", text: "text" }[mode];
  if (!root) throw new Error(`answerGrammar: unknown mode ${mode}`);
  const top = [
    `root ::= ${root}`,
    // At most `maxCalls` calls in one answer: a small model repeated one
    // call (39 `create_task`s) until the token limit (issue 31).
    `calls ::= callblock ${callsTail(maxCalls)}`.trimEnd(),
    `callblock ::= "<tool_call>\\n" calljson "\\n</tool_call>"`,
    `calljson ::= ${calls.join(" | ")}`,
    // Text: no leading white space, `<`, `{` or backtick; inside, no `{`,
    // no three backticks, no `<` followed by `t` (the start of a tag).
    String.raw`text ::= [^<{${"`"} \t\n] tchar*`,
    String.raw`tchar ::= [^<{${"`"}] | "<" [^t{${"`"}] | "${"`"}" [^{${"`"}] | "${"``"}" [^{${"`"}]`,
  ];
  return [...top, ...BASE_RULES, r.text()].join("\n") + "\n";
}

/** After an answer's first call, the rest: up to `maxCalls - 1` more. */
function callsTail(maxCalls) {
  const more = '"\\n" callblock';
  if (!(Number.isInteger(maxCalls) && maxCalls >= 1)) return `( ${more} )*`;
  const tail = (n) => (n <= 0 ? "" : `( ${[more, tail(n - 1)].filter(Boolean).join(" ")} )?`);
  return tail(maxCalls - 1);
}

/**
 * The answer a grammar-constrained generation wrote: `{kind: "calls",
 * calls: [{name, arguments}]}` (arguments as a JSON string, as OpenAI's
 * `function.arguments`) or `{kind: "text", text}`.
 * An answer cut off inside a call (max_tokens) keeps the calls that closed.
 */
export function parseAnswer(raw) {
  if (!raw.startsWith("<tool_call>")) return { kind: "text", text: raw };
  const calls = [];
  const re = /<tool_call>\n([\s\S]*?)\n<\/tool_call>/g;
  let m;
  while ((m = re.exec(raw))) {
    try {
      const v = JSON.parse(m[1]);
      calls.push({ name: v.name, arguments: JSON.stringify(v.arguments ?? {}) });
    } catch {
      // Not reachable under the grammar; an unparsable block is skipped.
    }
  }
  return { kind: "calls", calls };
}

/** Splits streamed text into what can be shown now and what to hold: the
 * answer is a call list when it starts with `<`, which the grammar allows
 * only for `<tool_call>`. */
export function answerKind(rawSoFar) {
  if (!rawSoFar) return "unknown";
  return rawSoFar.startsWith("<") ? "calls" : "text";
}
