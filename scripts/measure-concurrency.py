#!/usr/bin/env python3
"""Peak RSS of the real `stream` bootstrap serving N turns at once.

A minimal Lambda Runtime API (threaded) hands out N function-URL invocations at
once to one `stream` process started with AWS_LAMBDA_MAX_CONCURRENCY=N (the
concurrent runtime, as on Lambda Managed Instances), collects the streamed
responses, and samples the process's VmRSS/VmHWM. `cargo lambda watch` cannot
do this: cargo-lambda 1.9 forces AWS_LAMBDA_MAX_CONCURRENCY=1 and runs one
process per concurrent invocation instead.

Usage (the stack up: scripts/stack.sh --keep </dev/null):
  scripts/measure-concurrency.py --binary target/release/stream --concurrency 1 8
Env for the function comes from .local/stack.env (TABLE_NAME, LLM_*, AWS_*).
"""
import argparse, http.server, json, os, queue, subprocess, sys, threading, time, urllib.request

def load_env(path):
    env = {}
    for line in open(path):
        if "=" in line:
            k, v = line.rstrip("\n").split("=", 1)
            env[k] = v.strip("'")
    return env

def event(token, body):
    return {"version": "2.0", "routeKey": "$default", "rawPath": "/", "rawQueryString": "",
            "headers": {"content-type": "application/json", "authorization": "Bearer " + token},
            "requestContext": {"accountId": "anonymous", "apiId": "local", "domainName": "localhost",
                               "domainPrefix": "local", "http": {"method": "POST", "path": "/", "protocol": "HTTP/1.1",
                               "sourceIp": "127.0.0.1", "userAgent": "measure"}, "requestId": "r", "routeKey": "$default",
                               "stage": "$default", "time": "22/Nov/2026:00:00:00 +0000", "timeEpoch": 0},
            "body": json.dumps(body), "isBase64Encoded": False}

def run(binary, n, env, token, message):
    work = queue.Queue()
    done = {}
    for i in range(n):
        work.put((f"req-{i}", event(token, {"message": f"{message} (#{i})"})))
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *a): pass
        def do_GET(self):
            if self.path.endswith("/invocation/next"):
                try:
                    rid, ev = work.get(timeout=600)
                except queue.Empty:
                    return
                body = json.dumps(ev).encode()
                self.send_response(200)
                self.send_header("lambda-runtime-aws-request-id", rid)
                self.send_header("lambda-runtime-deadline-ms", str(int(time.time() * 1000) + 300000))
                self.send_header("lambda-runtime-invoked-function-arn", "arn:aws:lambda:us-east-1:0:function:stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
        def do_POST(self):
            rid = self.path.split("/")[-2]
            data = b""
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline(); break
                    data += self.rfile.read(size); self.rfile.readline()
            else:
                data = self.rfile.read(int(self.headers.get("content-length", 0)))
            done[rid] = data
            self.send_response(202); self.send_header("content-length", "2"); self.end_headers(); self.wfile.write(b"{}")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    penv = dict(os.environ, **env, AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{srv.server_port}",
                AWS_LAMBDA_FUNCTION_NAME="stream", AWS_LAMBDA_FUNCTION_MEMORY_SIZE="256",
                AWS_LAMBDA_FUNCTION_VERSION="$LATEST", AWS_LAMBDA_MAX_CONCURRENCY=str(n), RUST_LOG="warn")
    proc = subprocess.Popen([binary], env=penv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rss_idle = None
    peak = 0
    while len(done) < n and proc.poll() is None:
        st = dict(l.split(":", 1) for l in open(f"/proc/{proc.pid}/status") if ":" in l)
        rss = int(st["VmRSS"].split()[0]); peak = max(peak, int(st["VmHWM"].split()[0]))
        rss_idle = rss_idle or rss
        time.sleep(0.02)
    ok = sum(1 for d in done.values() if b'"type":"done"' in d)
    proc.kill(); srv.shutdown()
    return peak, ok

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/release/stream")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--env-file", default=".local/stack.env")
    ap.add_argument("--message", default="Name three colors.")
    a = ap.parse_args()
    env = load_env(a.env_file)
    token = subprocess.check_output(["target/debug/agentic-chat", "token", "--sub", "measure"],
                                    env=dict(os.environ, AUTH_JWT_SECRET=env["AUTH_JWT_SECRET"])).decode().strip()
    rows = []
    for n in a.concurrency:
        peak, ok = run(a.binary, n, env, token, a.message)
        rows.append((n, peak, ok))
        print(f"concurrency {n}: peak RSS {peak/1024:.1f} MiB, {ok}/{n} streams ended with done", flush=True)
    if len(rows) >= 2:
        (n1, p1, _), (n2, p2, _) = rows[0], rows[-1]
        print(f"each extra stream: {(p2 - p1) / max(n2 - n1, 1):.0f} KiB")

if __name__ == "__main__":
    main()
