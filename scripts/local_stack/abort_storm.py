"""Clients that hang up, under `cargo lambda watch` itself (run by
scripts/schemathesis.sh, which has the emulator up): a storm of requests to
the `stream` function — turns (`POST /`), the AI SDK's turns (`POST /chat`),
resumes and session lists — each cut by the client at a phase of its own:

  connect   the request half sent, then closed (no headers read)
  headers   closed as soon as the status line arrives
  mid       closed after the first bytes of the body
  done      closed as soon as the `done` frame arrives (the rest unread)
  random    closed after 0-400 ms, wherever that falls

Then the function must still answer: a session list, and a whole turn to its
`done`, each within a hang guard. (Issue 43: the runtime API's error for one
invocation whose client was gone — `non-200 response 500`, `Broken pipe` —
ended the function's process, and the watch does not start it again: every
later request hung.) Counts are printed; nothing here is timed against a
budget, the guards only stop a hung run.

    python3 abort_storm.py STREAM_URL TOKEN [N]
"""

import http.client
import json
import random
import socket
import sys
import time
import urllib.parse
import uuid

STREAM, TOKEN = sys.argv[1].rstrip("/"), sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 240
URL = urllib.parse.urlsplit(STREAM)
HEADERS = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
PHASES = ["connect", "headers", "mid", "done", "random"]
GUARD = 120  # seconds: a hang guard, not a budget
STORM_GUARD = 30  # a cut request's own hang guard; 3 in a row end the storm (the function is gone)


def send(path, body=None, guard=GUARD):
    conn = http.client.HTTPConnection(URL.hostname, URL.port, timeout=guard)
    data = None if body is None else json.dumps(body).encode()
    conn.request("POST" if data else "GET", URL.path + path, body=data, headers=HEADERS)
    return conn


def cut_at_connect(path, body):
    """Sends the headers and half the body, then closes the socket."""
    data = json.dumps(body or {}).encode()
    sock = socket.create_connection((URL.hostname, URL.port), timeout=STORM_GUARD)
    head = f"{'POST' if body else 'GET'} {URL.path + path} HTTP/1.1\r\nhost: {URL.netloc}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
    head += f"content-length: {len(data)}\r\n\r\n"
    sock.sendall(head.encode() + data[: len(data) // 2])
    sock.close()


def cut(phase, path, body):
    if phase == "connect":
        return cut_at_connect(path, body)
    conn = send(path, body, STORM_GUARD)
    try:
        if phase == "random":
            conn.sock.settimeout(random.uniform(0, 0.4))
            try:
                conn.getresponse().read()
            except (socket.timeout, TimeoutError):
                pass
            return
        resp = conn.getresponse()
        if phase == "mid":
            resp.read1(64) if hasattr(resp, "read1") else resp.read(64)
        elif phase == "done":
            for line in resp:
                if b'"type":"done"' in line.replace(b" ", b"") or line.strip() == b"data: [DONE]":
                    break
    finally:
        conn.sock and conn.sock.close()
        conn.close()


def targets(sid):
    chat_id = uuid.uuid4().hex[:16]
    user_message = {"id": uuid.uuid4().hex[:16], "role": "user", "parts": [{"type": "text", "text": "count"}]}
    return [
        ("/", {"message": "count"}),
        ("/", {"message": "count", "session_id": sid}),
        ("/chat", {"id": chat_id, "messages": [user_message], "trigger": "submit-message"}),
        (f"/sessions/{sid}/stream?after=0", None),
        ("/sessions", None),
    ]


def whole_turn():
    """A turn read to its end; returns its events. A spent budget (the storm
    is many turns a minute) is waited out as its `Retry-After` says."""
    for _ in range(3):
        conn = send("/", {"message": "count"})
        resp = conn.getresponse()
        if resp.status != 429:
            break
        wait = int(resp.getheader("retry-after") or "60")
        print(f"  429 (a spent budget): waiting {wait}s as Retry-After says", file=sys.stderr)
        conn.close()
        time.sleep(wait)
    if resp.status != 200:
        sys.exit(f"FAIL: a turn after the storm answered {resp.status}: {resp.read()[:300]!r}")
    out = []
    for line in resp:
        line = line.decode().strip()
        if line.startswith("data:"):
            out.append(json.loads(line[5:]))
    conn.close()
    return out


def main():
    random.seed(43)
    first = whole_turn()
    sid = next(ev["session"]["id"] for ev in first if ev["type"] == "session")
    counts, errors, hung = {}, 0, 0
    started = time.monotonic()
    for i in range(N):
        phase = PHASES[i % len(PHASES)]
        path, body = random.choice(targets(sid))
        try:
            cut(phase, path, body)
            hung = 0
        except (socket.timeout, TimeoutError) as e:
            hung += 1
            print(f"  {phase} {path}: no answer in {STORM_GUARD}s ({e})", file=sys.stderr)
            if hung == 3:
                sys.exit(f"FAIL: after {i + 1} cut requests the stream function answers no more")
        except OSError as e:  # a reset by the emulator is the client's to see, not a failure
            errors += 1
            print(f"  {phase} {path}: {type(e).__name__}: {e}", file=sys.stderr)
        counts[phase] = counts.get(phase, 0) + 1
    storm = time.monotonic() - started
    with send("/sessions").getresponse() as r:
        if r.status != 200:
            sys.exit(f"FAIL: the session list after the storm answered {r.status}")
    last = whole_turn()
    if not last or last[-1]["type"] != "done":
        sys.exit(f"FAIL: the turn after the storm ended without done: {last[-1:]}")
    text = "".join(ev.get("content", "") for ev in last if ev["type"] == "text_delta")
    print(f"ok: {N} requests cut by the client ({counts}; {errors} reset) in {storm:.1f}s; "
          f"then the session list answered 200 and a turn ended with done ({len(last)} events, text {text[-12:]!r})")


main()
