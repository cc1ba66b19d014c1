#!/usr/bin/env python3
"""Prompt size per request, in the model's tokens: the system prompt, the
tool definitions, and the rest (conversation), from the requests the local
model server wrote with ``--dump-dir`` (LOCAL_LLM_DUMP_DIR in stack.sh).

    measure_prompt.py --model FILE.gguf DUMP.json...

Prints one Markdown row per dump. Loads only the model's vocabulary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jinja2.sandbox  # noqa: E402
from llama_cpp import Llama  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("dumps", nargs="+")
    a = ap.parse_args()
    llm = Llama(model_path=a.model, vocab_only=True, verbose=False)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
    template = env.from_string(llm.metadata["tokenizer.chat_template"])

    def count(messages, tools) -> int:
        text = template.render(messages=messages, tools=tools or None, add_generation_prompt=True)
        return len(llm.tokenize(text.encode(), add_bos=False, special=True))

    print("| dump | tools | system prompt | tool definitions | conversation | total |")
    print("|---|---|---|---|---|---|")
    for path in a.dumps:
        with open(path) as f:
            d = json.load(f)
        msgs, tools = d["messages"], d["tools"]
        if tools and isinstance(tools[0], str):
            continue  # an old dump with tool names only
        system = [m for m in msgs[:1] if m["role"] == "system"]
        base = count(system + [{"role": "user", "content": ""}], [])
        with_tools = count(system + [{"role": "user", "content": ""}], tools)
        total = count(msgs, tools)
        print(f"| {os.path.basename(path)} | {len(tools)} | {base} | {with_tools - base} | {total - with_tools} "
              f"| {total} |")


if __name__ == "__main__":
    main()
