#!/usr/bin/env python3
"""The first tool call of a new project's first turn, cold and warm, with the
prompt in the order the app sends it (rules, tools, then the project's pack
as a second system message) and in the order before issue 31 (the pack at the
end of the one system message, so before the tools in the rendered prompt).

    measure_first_call.py --server http://127.0.0.1:8080 --restart 'CMD' DUMP.json

DUMP.json is a project-scope first-turn request the model server wrote
(LOCAL_LLM_DUMP_DIR): its tools and messages [rules, pack, user]. For each
order: the server is restarted (``--restart``: a shell command that restarts
it and returns once it serves), then project A's request is sent (cold), then
project B's, the same with another project id and names (warm: a new project
while the cache holds another's). Prints seconds to the first ``tool_calls``
delta (or the first text) and the server's own line for each.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import urllib.request
import uuid


def first_event(server: str, body: dict) -> float:
    req = urllib.request.Request(server + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    t0 = time.monotonic()
    first = None
    with urllib.request.urlopen(req, timeout=1800) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            delta = (json.loads(line[5:]).get("choices") or [{}])[0].get("delta", {})
            if first is None and (delta.get("tool_calls") or delta.get("content")):
                first = time.monotonic() - t0
    return round(first if first is not None else time.monotonic() - t0, 1)


def variant(dump: dict, before: bool, other: bool) -> dict:
    msgs = [dict(m) for m in dump["messages"]]
    if other:
        # Another project: every id and the project's name differ in the pack.
        ctx = msgs[1]["content"]
        import re
        for old in set(re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", ctx)):
            ctx = ctx.replace(old, str(uuid.uuid4()))
        msgs[1]["content"] = ctx.replace('"name":"', '"name":"Other ')
    if before:
        msgs = [{"role": "system", "content": msgs[0]["content"] + "\n\n" + msgs[1]["content"]}] + msgs[2:]
    return {"model": "local", "stream": True, "messages": msgs, "tools": dump["tools"], "max_tokens": 200,
            "temperature": 0.2}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--restart", required=True)
    ap.add_argument("dump")
    a = ap.parse_args()
    dump = json.load(open(a.dump))
    assert len(dump["messages"]) >= 3 and dump["messages"][1]["role"] == "system", "a [rules, pack, user] request"
    print("| order | cold: project A | warm: project B after A |")
    print("|---|---|---|")
    for before in (True, False):
        subprocess.run(a.restart, shell=True, check=True)
        cold = first_event(a.server, variant(dump, before, False))
        warm = first_event(a.server, variant(dump, before, True))
        print(f"| {'before (pack in the first system message)' if before else 'after (pack after the tools)'} "
              f"| {cold} s | {warm} s |", flush=True)


if __name__ == "__main__":
    main()
