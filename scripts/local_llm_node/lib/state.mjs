// Warm heads kept across restarts: where a head's saved sequence state lives
// and whether a saved file may be loaded.
//
// Contract: `stateKey(model, tokens)` names the state of one head's tokens
// under one model file (and the llama.cpp build that wrote it): a head or
// model that changes gets a new name, so a stale file is never loaded for
// it. `saveVerified(file, write)` has `write(tmp)` write the state, then
// moves it into place and writes its sha256 beside it (`FILE.sha256`);
// `isVerified(file)` says whether a file is whole and unchanged since.
// Why the checksum: llama.cpp reads a sequence state without checking its
// data, and node-llama-cpp warns that a wrong file may crash the process; a
// torn write or a flipped bit must cost a recompute, never the server.
// `prune(dir, keep)` removes the state files of heads no longer warmed.
//
// No third-party imports: tested without node-llama-cpp or the model.

import { createHash } from "node:crypto";
import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

const STATE_FILE = /^[0-9a-f]{64}\.bin(\.sha256)?$/;

/** The file name (`<sha256>.bin`) of the state of `tokens` under `model`
 * (the model file's name and the llama.cpp build's version). */
export function stateKey(model, tokens) {
  const h = createHash("sha256");
  h.update(`${model}\n`);
  h.update(new Uint8Array(Uint32Array.from(tokens).buffer));
  return `${h.digest("hex")}.bin`;
}

function sha256File(file) {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

/** Writes `file` through `write(tmp)` (async), then its checksum. */
export async function saveVerified(file, write) {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    await write(tmp);
    renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
  }
  writeFileSync(`${file}.sha256`, `${sha256File(file)}\n`);
}

/** Whether `file` exists, has its checksum beside it, and matches it. */
export function isVerified(file) {
  try {
    return readFileSync(`${file}.sha256`, "utf8").trim() === sha256File(file);
  } catch {
    return false;
  }
}

/** Removes the state files in `dir` other than `keep` (file names). */
export function prune(dir, keep) {
  const wanted = new Set([...keep].flatMap((k) => [basename(k), `${basename(k)}.sha256`]));
  let names = [];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const gone = names.filter((n) => STATE_FILE.test(n) && !wanted.has(n));
  for (const n of gone) rmSync(join(dir, n), { force: true });
  return gone;
}
