"""The OpenAI Chat Completions wire format, as the local model server speaks it.

Contract: ``read_request`` checks a request body and returns what the model
needs (messages ready for a Hugging Face chat template, the tools, sampling
settings) or raises ``BadRequest`` with a message for the client. The
``*_chunk`` helpers build ``chat.completion.chunk`` objects; ``completion``
builds a whole (non-streamed) answer.

Why messages are rewritten before templating: OpenAI clients send an
assistant tool-call message with ``content: null`` and the arguments as a
JSON *string*; chat templates (Qwen2.5's among them) concatenate
``message.content`` and render ``arguments | tojson``, so they need a string
and an object. llama-cpp-python's own server refuses the null (HTTP 500).

No third-party imports: tested without llama_cpp or the model.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from toolcalls import Call

ROLES = {"system", "user", "assistant", "tool"}


class BadRequest(ValueError):
    """A request the server refuses, with the reason for the client (HTTP 400)."""


@dataclass
class ChatParams:
    messages: List[Dict[str, Any]]
    tools: List[Dict[str, Any]] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    max_tokens: Optional[int] = None
    temperature: float = 0.2

    def tool_names(self) -> List[str]:
        return [t.get("function", {}).get("name", "") for t in self.tools]


def _text(content: Any, where: str) -> str:
    """Message content as text: null is empty, parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(parts)
    raise BadRequest(f"{where}.content must be a string, an array of text parts or null")


def _template_tool_call(tc: Any, where: str) -> Dict[str, Any]:
    fn = tc.get("function") if isinstance(tc, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise BadRequest(f"{where} must be {{'type': 'function', 'function': {{'name', 'arguments'}}}}")
    args = fn.get("arguments", "{}")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            pass  # shown to the model as the string it sent
    return {"id": tc.get("id"), "type": "function", "function": {"name": fn["name"], "arguments": args}}


def template_messages(raw: Any) -> List[Dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise BadRequest("messages must be a non-empty array")
    out = []
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise BadRequest(f"{where}.role must be one of {sorted(ROLES)}")
        msg = {"role": m["role"], "content": _text(m.get("content"), where)}
        calls = m.get("tool_calls") or []
        if calls:
            if m["role"] != "assistant" or not isinstance(calls, list):
                raise BadRequest(f"{where}.tool_calls must be an array on an assistant message")
            msg["tool_calls"] = [_template_tool_call(tc, f"{where}.tool_calls[{j}]") for j, tc in enumerate(calls)]
        if m.get("tool_call_id") is not None:
            msg["tool_call_id"] = m["tool_call_id"]
        out.append(msg)
    return out


def read_request(body: Any) -> ChatParams:
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in tools):
        raise BadRequest("tools must be an array of {'type': 'function', 'function': {...}}")
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest("max_tokens must be a positive integer")
    temperature = body.get("temperature")
    if temperature is not None and not isinstance(temperature, (int, float)):
        raise BadRequest("temperature must be a number")
    opts = body.get("stream_options") or {}
    return ChatParams(
        messages=template_messages(body.get("messages")),
        tools=tools,
        stream=bool(body.get("stream")),
        include_usage=bool(isinstance(opts, dict) and opts.get("include_usage")),
        max_tokens=max_tokens,
        temperature=0.2 if temperature is None else float(temperature),
    )


def error_body(code: str, message: str) -> Dict[str, Any]:
    return {"error": {"code": code, "type": code, "message": message}}


class Chunks:
    """The chunks of one streamed answer (one id, model and timestamp)."""

    def __init__(self, model: str, created: int):
        self.base = {"id": "chatcmpl-" + uuid.uuid4().hex[:24], "object": "chat.completion.chunk",
                     "created": created, "model": model}

    def _chunk(self, delta: Dict[str, Any], finish: Optional[str] = None) -> Dict[str, Any]:
        return {**self.base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def role(self) -> Dict[str, Any]:
        return self._chunk({"role": "assistant", "content": ""})

    def text(self, text: str) -> Dict[str, Any]:
        return self._chunk({"content": text})

    def tool_call(self, index: int, call: Call) -> Dict[str, Any]:
        return self._chunk({"tool_calls": [tool_call_json(call, index)]})

    def finish(self, reason: str) -> Dict[str, Any]:
        return self._chunk({}, reason)

    def usage(self, prompt: int, completion: int) -> Dict[str, Any]:
        return {**self.base, "choices": [], "usage": usage_json(prompt, completion)}


def tool_call_json(call: Call, index: Optional[int] = None) -> Dict[str, Any]:
    tc: Dict[str, Any] = {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                          "function": {"name": call.name, "arguments": call.arguments}}
    if index is not None:
        tc["index"] = index
    return tc


def usage_json(prompt: int, completion: int) -> Dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def finish_reason(calls: int, hit_length: bool) -> str:
    if calls:
        return "tool_calls"
    return "length" if hit_length else "stop"


def completion(model: str, created: int, text: str, calls: List[Call], reason: str,
               prompt: int, completion_tokens: int) -> Dict[str, Any]:
    message: Dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = [tool_call_json(c) for c in calls]
    return {"id": "chatcmpl-" + uuid.uuid4().hex[:24], "object": "chat.completion", "created": created,
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": reason}],
            "usage": usage_json(prompt, completion_tokens)}
