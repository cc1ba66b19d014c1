// Reads the wire types' JSON Schema (shared::edge::openapi::schema_json) on stdin
// and writes their TypeScript to stdout. Run through scripts/gen-types.sh,
// which also writes the result to src/api/types.gen.ts; the Rust test
// tests/tests/web_types.rs runs the same conversion and fails on drift.
import { compile } from 'json-schema-to-typescript';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const schema = JSON.parse(Buffer.concat(chunks).toString('utf8'));

// Every definition is an export of its own: a root that names them all.
const names = Object.keys(schema.$defs).sort();
const root = {
  ...schema,
  title: 'WireTypes',
  type: 'object',
  properties: Object.fromEntries(names.map((n) => [n, { $ref: `#/$defs/${n}` }])),
  additionalProperties: false,
};

const ts = await compile(root, 'WireTypes', {
  bannerComment:
    '/* Generated from the Rust types (shared::edge::openapi) by scripts/gen-types.sh: do not edit. */',
  additionalProperties: false,
  unreachableDefinitions: true,
  format: true,
  style: { singleQuote: true, printWidth: 120 },
});
process.stdout.write(ts);
