"""Tests of the tool-call parser and the wire helpers: no llama_cpp, no model.

fixtures/*.json are answers the real model (Qwen2.5-Coder-1.5B-Instruct
Q4_K_M behind server.py --dump-dir) gave to the stack's real prompts:
``raw`` is its text, ``tools`` the offered names, ``expect`` the events.
Each is fed whole and in small pieces: a stream must give the same events
whatever the token boundaries.

Run: python3 -m unittest discover -s scripts/local_llm
"""

import glob
import json
import os
import unittest

from openai_wire import BadRequest, Chunks, read_request, template_messages
from toolcalls import Call, Text, ToolCallStream, parse_all

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = ["create_project", "create_task", "list_projects"]


def expected(items):
    out = []
    for e in items:
        if "text" in e:
            out.append(Text(e["text"]))
        else:
            out.append(Call(e["call"], json.dumps(e["arguments"], ensure_ascii=False)))
    return out


class RealOutputs(unittest.TestCase):
    def test_fixtures_parse_the_same_in_any_pieces(self):
        files = sorted(glob.glob(os.path.join(HERE, "fixtures", "*.json")))
        self.assertGreaterEqual(len(files), 5, "the real-output fixtures are missing")
        for path in files:
            with open(path) as f:
                fx = json.load(f)
            want = expected(fx["expect"])
            for piece in (0, 1, 2, 3, 7, 64):
                with self.subTest(fixture=os.path.basename(path), piece=piece):
                    self.assertEqual(parse_all(fx["raw"], fx["tools"], piece), want)


class Streaming(unittest.TestCase):
    def test_plain_text_is_not_held(self):
        s = ToolCallStream(TOOLS)
        self.assertEqual(s.feed("Hello"), [Text("Hello")])
        self.assertEqual(s.feed(", world. "), [Text(", world. ")])
        # Only the possible start of a tag waits.
        self.assertEqual(s.feed("Next <tool"), [Text("Next ")])
        self.assertEqual(s.feed("box> ok"), [Text("<toolbox> ok")])
        self.assertEqual(s.finish(), [])

    def test_tag_call_after_text(self):
        raw = 'Creating it.\n<tool_call>\n{"name": "create_project", "arguments": {"name": "Launch"}}\n</tool_call>'
        self.assertEqual(parse_all(raw, TOOLS, 1),
                         [Text("Creating it.\n"), Call("create_project", '{"name": "Launch"}')])

    def test_two_calls_and_an_unclosed_last_tag(self):
        raw = ('<tool_call>{"name": "create_task", "arguments": {"title": "A"}}</tool_call>\n'
               '<tool_call>{"name": "create_task", "arguments": {"title": "B"}}')
        self.assertEqual(parse_all(raw, TOOLS, 3), [Call("create_task", '{"title": "A"}'), Text("\n"),
                                                    Call("create_task", '{"title": "B"}')])

    def test_fenced_call_only_for_offered_tools(self):
        call = '```json\n{"name": "create_task", "arguments": {"title": "A"}}\n```'
        self.assertEqual(parse_all(call, TOOLS, 2), [Call("create_task", '{"title": "A"}')])
        other = '```json\n{"name": "deploy", "arguments": {}}\n```'
        self.assertEqual(parse_all(other, TOOLS, 2), [Text(other)])

    def test_ordinary_code_streams_and_ends(self):
        s = ToolCallStream(TOOLS)
        out = s.feed("Try:\n```python\nprint(1)\n")
        self.assertEqual(out, [Text("Try:\n```python\nprint(1)\n")], "a python block is streamed at once")
        out += s.feed("```\nDone ``")
        out += s.feed("` no")
        out += s.finish()
        self.assertEqual("".join(e.text for e in out), "Try:\n```python\nprint(1)\n```\nDone ``` no")

    def test_bare_json_call_and_bare_json_answer(self):
        self.assertEqual(parse_all('{"name": "list_projects", "arguments": {}}', TOOLS, 1),
                         [Call("list_projects", "{}")])
        self.assertEqual(parse_all('{"a": 1} is JSON', TOOLS, 1), [Text('{"a": 1} is JSON')])

    def test_string_arguments_parameters_and_function_nesting(self):
        for body in ('{"name": "create_task", "arguments": "{\\"title\\": \\"A\\"}"}',
                     '{"name": "create_task", "parameters": {"title": "A"}}',
                     '{"function": {"name": "create_task", "arguments": {"title": "A"}}}'):
            with self.subTest(body=body):
                self.assertEqual(parse_all("<tool_call>" + body + "</tool_call>", TOOLS),
                                 [Call("create_task", '{"title": "A"}')])

    def test_unparseable_tag_stays_text(self):
        raw = "<tool_call>not json</tool_call> sorry"
        self.assertEqual(parse_all(raw, TOOLS, 4), [Text(raw)])

    def test_braces_inside_strings_do_not_end_a_bare_call(self):
        raw = '{"name": "create_task", "arguments": {"title": "a } b {"}}'
        self.assertEqual(parse_all(raw, TOOLS, 1), [Call("create_task", '{"title": "a } b {"}')])


class Wire(unittest.TestCase):
    def test_null_content_and_string_arguments_become_template_ready(self):
        msgs = template_messages([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "create_task", "arguments": '{"title": "A"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"id": "t1"}'},
        ])
        self.assertEqual(msgs[1]["content"], "")
        self.assertEqual(msgs[1]["tool_calls"][0]["function"]["arguments"], {"title": "A"})
        self.assertEqual(msgs[2]["tool_call_id"], "c1")

    def test_bad_requests_are_refused_with_a_reason(self):
        for body, words in (([], "JSON object"), ({"messages": []}, "non-empty"),
                            ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
                            ({"messages": [{"role": "user", "content": 5}]}, "content"),
                            ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
                            ({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "x"}]}, "tools")):
            with self.subTest(body=body):
                with self.assertRaises(BadRequest) as cm:
                    read_request(body)
                self.assertIn(words, str(cm.exception))

    def test_usage_chunk_has_no_choices(self):
        p = read_request({"messages": [{"role": "user", "content": "x"}], "stream": True,
                          "stream_options": {"include_usage": True}})
        self.assertTrue(p.stream and p.include_usage)
        u = Chunks("m", 0).usage(10, 3)
        self.assertEqual((u["choices"], u["usage"]["total_tokens"]), ([], 13))
        tc = Chunks("m", 0).tool_call(1, Call("create_task", "{}"))["choices"][0]["delta"]["tool_calls"][0]
        self.assertEqual((tc["index"], tc["function"]["name"], tc["type"]), (1, "create_task", "function"))


if __name__ == "__main__":
    unittest.main()
