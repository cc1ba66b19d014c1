"""A paced OpenAI-compatible model for the local stack's own checks
(scripts/local_stack/check.py): every chat completion streams N words, one
every GAP seconds, then [DONE]. No tools, no model: the stack is what is
checked, not the answer.

`PUT /pace?words=N&gap=G` changes N and GAP for the completions after it
(scripts/schemathesis.sh: the stack check needs a turn that lasts, the
schemathesis run many turns that end at once).

    python3 paced_model.py PORT [WORDS] [GAP]
"""

import json
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chunk(delta, finish=None):
    return {"id": "paced", "object": "chat.completion.chunk", "model": "paced",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    words = 40
    gap = 0.25

    def log_message(self, *args):
        pass

    def do_PUT(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path != "/pace":
            self.send_error(404)
            return
        Handler.words = int(query.get("words", [Handler.words])[0])
        Handler.gap = float(query.get("gap", [Handler.gap])[0])
        self.send_response(204)
        self.end_headers()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        try:
            self.send(chunk({"role": "assistant", "content": ""}))
            for i in range(self.words):
                time.sleep(self.gap)
                self.send(chunk({"content": f"w{i} "}))
            self.send(chunk({}, "stop"))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the turn was stopped: fine

    def send(self, obj):
        self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
        self.wfile.flush()


if __name__ == "__main__":
    Handler.words = int(sys.argv[2]) if len(sys.argv) > 2 else Handler.words
    Handler.gap = float(sys.argv[3]) if len(sys.argv) > 3 else Handler.gap
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
