"""The local stack's promises under `cargo lambda watch` itself (run by
scripts/schemathesis.sh, which has the emulator up): while a turn streams
from the paced model (40 words, 0.25 s apart), other requests reach the same
`stream` function and are served at once — the session list, a resume of the
running turn, a Stop — as on AWS, where each concurrent invocation gets its
own instance. The Stop must end the running turn (`done`, reason `stopped`,
before the last word), and the turn and its resume both end with `done`.
(Issue 25: on the local model, turns were once seen cut off without `done`
while other requests reached the function; this guards the promise.)

Also, when REPO is given: git writes refs in REPO's .git while the turn runs
(a commit, a fetch or another worktree do the same). The watch restarted the
functions on them and cut the turn off; the repository's `.ignore` keeps it
out of what the watch reacts to.

    python3 check.py STREAM_URL TOKEN [REPO]
"""

import json
import subprocess
import sys
import threading
import time
import urllib.request

STREAM, TOKEN = sys.argv[1].rstrip("/"), sys.argv[2]
REPO = sys.argv[3] if len(sys.argv) > 3 else None
PROBE_REF = "refs/agentic-chat/stack-check"
HEADERS = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}


def request(path, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(STREAM + path, data=data, headers=HEADERS, method="POST" if body else "GET")
    return urllib.request.urlopen(req, timeout=timeout)


def events(resp):
    for line in resp:
        line = line.decode().strip()
        if line.startswith("data:"):
            yield json.loads(line[5:])


def follow(path, body, out, texts=None):
    for ev in events(request(path, body, timeout=300)):
        out.append(ev)
        if ev["type"] == "text_delta" and texts is not None:
            texts.set()


def git_churn(seconds):
    """Writes and deletes a ref in REPO for `seconds` (past the watch's 3 s
    throttle); returns how many times."""
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        subprocess.run(["git", "-C", REPO, "update-ref", PROBE_REF, "HEAD"], check=True)
        subprocess.run(["git", "-C", REPO, "update-ref", "-d", PROBE_REF], check=True)
        n += 1
        time.sleep(0.2)
    return n


def main():
    live, resumed = [], []
    streaming = threading.Event()
    turn = threading.Thread(target=follow, args=("/", {"message": "count", "stream_run_id": "stack-check"}, live, streaming))
    turn.start()
    if not streaming.wait(180):
        sys.exit("FAIL: the turn streamed no text")
    sid = next(ev["session"]["id"] for ev in live if ev["type"] == "session")
    churned = git_churn(4.0) if REPO else 0
    resume = threading.Thread(target=follow, args=(f"/sessions/{sid}/stream?after=1", None, resumed))
    resume.start()
    with request("/sessions") as r:
        listed = r.status
    with request(f"/sessions/{sid}/stop", {"stream_run_id": "stack-check"}) as r:
        stop = json.loads(r.read())
    turn.join(300)
    resume.join(300)
    text = "".join(ev.get("content", "") for ev in live if ev["type"] == "text_delta")
    last = live[-1] if live else {}
    print(f"turn: {len(live)} events, last {last.get('type')} ({last.get('reason')}), text {text[-12:]!r}; "
          f"git ref writes meanwhile {churned}; list {listed}; stop {stop}; resume: {len(resumed)} events, last {resumed[-1:] and resumed[-1]['type']}")
    if last.get("type") != "done" or not resumed or resumed[-1]["type"] != "done":
        sys.exit("FAIL: a turn or its resume ended without done")
    if listed != 200 or not stop.get("stopped") or last.get("reason") != "stopped" or "w39" in text:
        sys.exit("FAIL: the requests made during the turn were not served while it ran (Stop did not stop it)")
    print("ok: served during the turn; Stop stopped it; the turn and its resume ended with done")


main()
