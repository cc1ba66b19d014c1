#!/usr/bin/env python3
"""The local model server: OpenAI ``/v1/chat/completions`` (streamed or not)
and ``/v1/models`` over one GGUF model run by llama-cpp-python.

Why our own server rather than ``python -m llama_cpp.server`` (0.3.x): its
chat handlers cannot stream tool calls (with ``chatml-function-calling`` the
tools are dropped unless ``tool_choice`` is set, and ``"auto"`` with
``stream: true`` raises "Automatic streaming tool choice is not supported";
with a model's own template the call comes back as plain text), and it
refuses an assistant tool-call message with ``content: null`` (HTTP 500).

Contract:
- The prompt is the model's own chat template (GGUF metadata
  ``tokenizer.chat_template``) rendered with the request's messages and
  ``tools`` (openai_wire.template_messages says how messages are adapted).
- The answer goes through toolcalls.ToolCallStream: text is streamed as it
  comes, except what may be the start of a tool call; calls become
  ``tool_calls`` deltas (one chunk per call, name and whole arguments) and
  ``finish_reason: "tool_calls"``. With ``stream_options.include_usage`` a
  last chunk carries ``usage`` (prompt and completion tokens counted here).
- One request computes at a time (the model is one context); others wait.
  A client that goes away stops its generation at the next token.
- The prompt cache (LlamaRAMCache) keeps the model state of recent answers,
  so a turn whose prompt starts like an earlier one (same system prompt and
  tools) only computes the new part.
- Bad requests get HTTP 400 ``{"error": {"code", "message"}}``; a prompt
  longer than the window gets 400 ``context_length_exceeded``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jinja2.sandbox  # noqa: E402  (a dependency of llama-cpp-python)
from llama_cpp import Llama, LlamaRAMCache  # noqa: E402

from openai_wire import BadRequest, ChatParams, Chunks, completion, error_body, finish_reason, read_request  # noqa: E402
from toolcalls import Call, Text, ToolCallStream  # noqa: E402

# Qwen2.5 ends a turn with <|im_end|>; "<tool_response>" and "<|im_start|>"
# would be the model inventing the tool's answer or the next turn.
STOP = ["<|im_end|>", "<|endoftext|>", "<tool_response>", "<|im_start|>"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Model:
    def __init__(self, args: argparse.Namespace):
        t0 = time.monotonic()
        self.alias = args.model_alias
        self.llm = Llama(model_path=args.model, n_ctx=args.n_ctx, n_threads=args.n_threads or None,
                         n_batch=args.n_batch, verbose=False)
        if args.cache_bytes > 0:
            self.llm.set_cache(LlamaRAMCache(capacity_bytes=args.cache_bytes))
        source = self.llm.metadata.get("tokenizer.chat_template")
        if not source:
            raise SystemExit(f"{args.model} has no tokenizer.chat_template: cannot render prompts")
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        # As Hugging Face renders templates: tojson without HTML escaping.
        env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
        env.globals["raise_exception"] = self._raise
        self.template = env.from_string(source)
        self.lock = threading.Lock()
        self.dump_dir = args.dump_dir
        log(f"loaded {args.model} as {self.alias} (n_ctx {args.n_ctx}) in {time.monotonic() - t0:.1f}s")

    @staticmethod
    def _raise(msg: str) -> None:
        raise BadRequest(f"chat template: {msg}")

    def prompt_tokens(self, p: ChatParams) -> List[int]:
        text = self.template.render(messages=p.messages, tools=p.tools or None, add_generation_prompt=True,
                                    bos_token="", eos_token="<|im_end|>")
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def max_tokens(self, p: ChatParams, n_prompt: int) -> int:
        room = self.llm.n_ctx() - n_prompt
        if room < 16:
            raise BadRequest(f"context_length_exceeded: the prompt is {n_prompt} tokens; "
                             f"the window is {self.llm.n_ctx()}")
        return min(p.max_tokens or room, room)

    def generate(self, tokens: List[int], max_tokens: int, p: ChatParams) -> Iterator[Tuple[str, str]]:
        """(text piece, finish reason or "") per generated token."""
        for c in self.llm.create_completion(prompt=tokens, max_tokens=max_tokens, temperature=p.temperature,
                                            stop=STOP, stream=True):
            ch = c["choices"][0]
            yield ch.get("text") or "", ch.get("finish_reason") or ""


class Handler(BaseHTTPRequestHandler):
    model: Model  # set in main
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *a: Any) -> None:  # requests are logged by the handlers
        pass

    def _json(self, status: int, body: Dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            m = {"id": self.model.alias, "object": "model", "owned_by": "local", "created": 0}
            self._json(200, {"object": "list", "data": [m]})
        else:
            self._json(404, error_body("not_found", f"no route {self.path}"))

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, error_body("not_found", f"no route {self.path}"))
            return
        try:
            n = int(self.headers.get("content-length") or 0)
            params = read_request(json.loads(self.rfile.read(n) or b"null"))
        except (ValueError, BadRequest) as e:  # JSONDecodeError is a ValueError
            self._json(400, error_body("invalid_request", str(e)))
            return
        with self.model.lock:
            try:
                tokens = self.model.prompt_tokens(params)
                max_tokens = self.model.max_tokens(params, len(tokens))
            except BadRequest as e:
                code = "context_length_exceeded" if str(e).startswith("context_length") else "invalid_request"
                self._json(400, error_body(code, str(e)))
                return
            except jinja2.TemplateError as e:
                self._json(400, error_body("invalid_request", f"chat template: {e}"))
                return
            answer = Answer(self.model, params, tokens, max_tokens)
            if params.stream:
                self._stream(answer)
            else:
                self._json(200, answer.whole())

    def _stream(self, answer: "Answer") -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for chunk in answer.chunks():
                self.wfile.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            log("client went away; generation stopped")
        except Exception as e:  # noqa: BLE001 - the stream is open: report in-band
            log(f"generation failed: {e!r}")
            try:
                self.wfile.write(b"data: " + json.dumps(error_body("model_error", str(e))).encode() + b"\n\n")
            except OSError:
                pass


class Answer:
    """One answer: model tokens through the tool-call parser, as chunks."""

    def __init__(self, model: Model, p: ChatParams, tokens: List[int], max_tokens: int):
        self.model, self.p, self.tokens, self.max_tokens = model, p, tokens, max_tokens
        self.parser = ToolCallStream(p.tool_names())
        self.raw: List[str] = []
        self.t0 = time.monotonic()
        self.first = 0.0
        self.hit_length = False

    def events(self) -> Iterator[Any]:
        for piece, reason in self.model.generate(self.tokens, self.max_tokens, self.p):
            if not self.first:
                self.first = time.monotonic() - self.t0
            self.raw.append(piece)
            self.hit_length = self.hit_length or reason == "length"
            yield from self.parser.feed(piece)
        yield from self.parser.finish()
        self._done()

    def chunks(self) -> Iterator[Dict[str, Any]]:
        c = Chunks(self.model.alias, int(time.time()))
        yield c.role()
        calls = 0
        for e in self.events():
            if isinstance(e, Text):
                yield c.text(e.text)
            else:
                yield c.tool_call(calls, e)
                calls += 1
        yield c.finish(finish_reason(calls, self.hit_length))
        if self.p.include_usage:
            yield c.usage(len(self.tokens), self.completion_tokens())

    def whole(self) -> Dict[str, Any]:
        text, calls = "", []
        for e in self.events():
            if isinstance(e, Text):
                text += e.text
            else:
                calls.append(e)
        reason = finish_reason(len(calls), self.hit_length)
        return completion(self.model.alias, int(time.time()), text, calls, reason, len(self.tokens),
                          self.completion_tokens())

    def completion_tokens(self) -> int:
        return len(self.model.llm.tokenize("".join(self.raw).encode("utf-8"), add_bos=False, special=True))

    def _done(self) -> None:
        total = time.monotonic() - self.t0
        n = self.completion_tokens()
        gen = max(total - self.first, 1e-6)
        log(f"prompt {len(self.tokens)} tok, tools {len(self.p.tools)}, first token {self.first:.1f}s, "
            f"{n} tok in {total:.1f}s ({n / gen:.1f} tok/s), {self.parser.calls} tool call(s)")
        if self.model.dump_dir:
            os.makedirs(self.model.dump_dir, exist_ok=True)
            name = os.path.join(self.model.dump_dir, f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json")
            with open(name, "w") as f:
                json.dump({"tools": self.p.tools, "messages": self.p.messages, "prompt_tokens": len(self.tokens),
                           "raw": "".join(self.raw)},
                          f, ensure_ascii=False, indent=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the GGUF file")
    ap.add_argument("--model-alias", default="local", help="the model name clients send and /v1/models lists")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--n-ctx", type=int, default=8192, help="the context window, in tokens")
    ap.add_argument("--n-batch", type=int, default=512)
    ap.add_argument("--n-threads", type=int, default=0, help="0: llama.cpp's default")
    ap.add_argument("--cache-bytes", type=int, default=2 << 30, help="prompt cache size (0: off)")
    ap.add_argument("--dump-dir", default="", help="write each request's messages and raw answer here")
    args = ap.parse_args()
    Handler.model = Model(args)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    log(f"serving http://{args.host}:{args.port}/v1 (model {args.model_alias})")
    server.serve_forever()


if __name__ == "__main__":
    main()
