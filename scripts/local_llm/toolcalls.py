"""Tool calls out of a small model's streamed text.

Contract: a ``ToolCallStream`` is fed the model's raw text as it is generated
and turns it into ``Text`` and ``Call`` events, in order. Text is given back
at once unless it may be the start of a tool call; only that part is held.

Models whose chat template renders ``tools`` (Qwen2.5: ``<tool_call>`` tags)
still answer in free text, and small ones drift between forms. Seen in real
outputs (fixtures/): ``<tool_call>{json}</tool_call>`` (the template's own
form), ``<tools><function name="..." arguments='{json}'/></tools>`` (the
model echoing the template's ``<tools>`` list), the same JSON in a fenced block (```json / ```tool_call, or none), a
bare JSON object as the whole answer, and a JSON array of such objects. The
JSON is ``{"name": ..., "arguments": {...}}``; ``parameters`` for
``arguments``, arguments given as a JSON string, and OpenAI's
``{"function": {"name", "arguments"}}`` nesting are accepted too.

Which text becomes a call:
- inside ``<tool_call>`` or ``<tools>`` tags: any object of the call shape (the model said
  it is a call; an unknown name is the app's to refuse, with an error the
  model can read);
- in a fence or bare: only when every object names an offered tool, so a
  code example that happens to be JSON stays text.
Anything that does not parse stays text, unchanged. A tag left open at the
end (the model stopped before ``</tool_call>``) is parsed as if closed.

No third-party imports: tested without llama_cpp or the model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterable, List, Optional, Union

# Tags around calls, and how each closes.
TAGS = {"<tool_call>": "</tool_call>", "<tools>": "</tools>"}
FENCE = "```"
# Inside a tag, besides JSON: <function name="N" arguments='{...}'/> or
# <function name="N">{...}</function>.
FUNCTION_ELEMENT = re.compile(
    r"""<function\s+name\s*=\s*["']([^"']+)["']\s*"""
    r"""(?:arguments\s*=\s*(?:'(.*?)'|"((?:[^"\\]|\\.)*)")\s*/>|>(.*?)</function>)""",
    re.S,
)
# Fence info strings under which a call may be written.
CALL_FENCES = {"", "json", "tool_call", "tool_code", "javascript", "js"}


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Call:
    name: str
    # The arguments object as JSON text (OpenAI's `function.arguments`).
    arguments: str


Event = Union[Text, Call]


def _as_call(obj: object) -> Optional[Call]:
    """The call an object describes, or None if it is not of the call shape."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    return Call(name.strip(), json.dumps(args, ensure_ascii=False))


def parse_calls(text: str) -> Optional[List[Call]]:
    """The calls in ``text`` (one JSON object or an array of them, nothing
    else around it but whitespace), or None."""
    text = text.strip()
    if not text:
        return None
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        return None
    # Small models sometimes close one brace too many; that alone is not
    # reason enough to show the user raw JSON.
    if text[end:].strip() not in ("", "}"):
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(v) for v in items]
    if not calls or any(c is None for c in calls):
        return None
    return calls  # type: ignore[return-value]


def parse_tag_body(text: str) -> Optional[List[Call]]:
    """The calls inside a tag: JSON (``parse_calls``) or ``<function>``
    elements and nothing else but whitespace."""
    calls = parse_calls(text)
    if calls or "<function" not in text:
        return calls
    out, rest = [], text
    for m in FUNCTION_ELEMENT.finditer(text):
        raw = m.group(2) if m.group(2) is not None else m.group(3) if m.group(3) is not None else m.group(4)
        call = _as_call({"name": m.group(1), "arguments": (raw or "").strip() or "{}"})
        if call is None:
            return None
        out.append(call)
        rest = rest.replace(m.group(0), "", 1)
    return out if out and not rest.strip() else None


def _held_suffix(buf: str, markers: Iterable[str]) -> int:
    """Length of the longest end of ``buf`` that is a proper prefix of a marker."""
    best = 0
    for m in markers:
        for n in range(min(len(m) - 1, len(buf)), best, -1):
            if buf.endswith(m[:n]):
                best = n
                break
    return best


def _json_end(buf: str) -> Optional[int]:
    """Index just past the first balanced top-level JSON value that starts
    ``buf`` (``{`` or ``[``), or None while it is still open."""
    depth, in_str, esc = 0, False, False
    for i, ch in enumerate(buf):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


class ToolCallStream:
    """The incremental parser. States: ``text`` (streaming, holding only a
    possible marker start), ``tag`` (inside ``self.tag``), ``fence_info``
    (reading a fence's info string), ``fence`` (a fence that may hold a
    call), ``code`` (an ordinary code block, streamed), ``bare`` (a JSON value
    at the start of the answer)."""

    def __init__(self, tool_names: Iterable[str]):
        self.tools = set(tool_names)
        self.state = "text"
        self.buf = ""
        self.info = ""
        self.tag = ""
        # Nothing but whitespace has been given out yet (a bare JSON call
        # is only recognised as the whole answer's start).
        self.at_start = True
        self.calls = 0

    def feed(self, piece: str) -> List[Event]:
        self.buf += piece
        out: List[Event] = []
        while self._step(out):
            pass
        return _merge(out)

    def finish(self) -> List[Event]:
        """Ends the answer: whatever is held becomes a call or text."""
        out: List[Event] = []
        buf, self.buf = self.buf, ""
        if self.state == "tag":
            out += self._calls_or_text(buf, self.tag + buf, any_name=True)
        elif self.state in ("fence", "bare"):
            prefix = FENCE + self.info + "\n" if self.state == "fence" else ""
            out += self._calls_or_text(buf, prefix + buf, any_name=False)
        elif self.state == "fence_info":
            out.append(Text(FENCE + buf))
        else:
            out.append(Text(buf))
        self.state = "text"
        return _merge([e for e in out if not (isinstance(e, Text) and not e.text)])

    # One transition; True when another may follow on the same buffer.
    def _step(self, out: List[Event]) -> bool:
        return getattr(self, "_step_" + self.state)(out)

    def _emit(self, out: List[Event], text: str) -> None:
        if text:
            out.append(Text(text))
            if text.strip():
                self.at_start = False

    def _step_text(self, out: List[Event]) -> bool:
        if self.at_start:
            stripped = self.buf.lstrip()
            if not stripped:
                return False  # only whitespace so far: it may precede a call
            if stripped[0] in "{[":
                self._emit(out, self.buf[: len(self.buf) - len(stripped)])
                self.buf, self.state = stripped, "bare"
                return True
        hits = [(self.buf.find(m), m) for m in (*TAGS, FENCE)]
        hits = [(i, m) for i, m in hits if i >= 0]
        if hits:
            i, m = min(hits)
            self._emit(out, self.buf[:i])
            self.buf = self.buf[i + len(m) :]
            self.state = "fence_info" if m == FENCE else "tag"
            self.tag, self.info = m, ""
            return True
        keep = _held_suffix(self.buf, (*TAGS, FENCE))
        self._emit(out, self.buf[: len(self.buf) - keep])
        self.buf = self.buf[len(self.buf) - keep :]
        return False

    def _step_tag(self, out: List[Event]) -> bool:
        closing = TAGS[self.tag]
        close = self.buf.find(closing)
        reopen = self.buf.find(self.tag)
        if close < 0 and reopen < 0:
            return False
        # A second opening tag before any close ends the first call.
        if close < 0 or 0 <= reopen < close:
            end, rest, raw_close = reopen, self.buf[reopen:], ""
        else:
            end, rest, raw_close = close, self.buf[close + len(closing) :], closing
        body = self.buf[:end]
        out += self._calls_or_text(body, self.tag + body + raw_close, any_name=True)
        self.buf, self.state = rest, "text"
        return True

    def _step_fence_info(self, out: List[Event]) -> bool:
        nl = self.buf.find("\n")
        if nl < 0:
            return False
        self.info, self.buf = self.buf[:nl], self.buf[nl + 1 :]
        if self.info.strip().lower() in CALL_FENCES:
            self.state = "fence"
        else:
            self._emit(out, FENCE + self.info + "\n")
            self.state = "code"
        return True

    def _step_fence(self, out: List[Event]) -> bool:
        stripped = self.buf.lstrip()
        if stripped and stripped[0] not in "{[":
            # Not JSON: an ordinary code block after all.
            self._emit(out, FENCE + self.info + "\n")
            self.state = "code"
            return True
        close = self.buf.find(FENCE)
        if close < 0:
            return False
        body, self.buf = self.buf[:close], self.buf[close + len(FENCE) :]
        out += self._calls_or_text(body, FENCE + self.info + "\n" + body + FENCE, any_name=False)
        self.state = "text"
        return True

    def _step_code(self, out: List[Event]) -> bool:
        close = self.buf.find(FENCE)
        if close >= 0:
            self._emit(out, self.buf[: close + len(FENCE)])
            self.buf, self.state = self.buf[close + len(FENCE) :], "text"
            return True
        keep = _held_suffix(self.buf, (FENCE,))
        self._emit(out, self.buf[: len(self.buf) - keep])
        self.buf = self.buf[len(self.buf) - keep :]
        return False

    def _step_bare(self, out: List[Event]) -> bool:
        end = _json_end(self.buf)
        if end is None:
            return False
        body, self.buf = self.buf[:end], self.buf[end:]
        out += self._calls_or_text(body, body, any_name=False)
        self.state = "text"
        return True

    def _calls_or_text(self, body: str, raw: str, any_name: bool) -> List[Event]:
        calls = parse_tag_body(body) if any_name else parse_calls(body)
        if calls and (any_name or all(c.name in self.tools for c in calls)):
            self.calls += len(calls)
            self.at_start = False
            return list(calls)
        self.at_start = self.at_start and not raw.strip()
        return [Text(raw)] if raw else []


def _merge(events: List[Event]) -> List[Event]:
    """Adjacent texts joined: fewer, larger deltas."""
    out: List[Event] = []
    for e in events:
        if isinstance(e, Text) and out and isinstance(out[-1], Text):
            out[-1] = Text(out[-1].text + e.text)
        else:
            out.append(e)
    return out


def parse_all(text: str, tool_names: Iterable[str], piece: int = 0) -> List[Event]:
    """The events of a whole answer, fed ``piece`` characters at a time (all
    at once when 0): what a stream of that answer gives."""
    s = ToolCallStream(tool_names)
    out: List[Event] = []
    step = piece or max(len(text), 1)
    for i in range(0, len(text), step):
        out += s.feed(text[i : i + step])
    return _merge(out + s.finish())
