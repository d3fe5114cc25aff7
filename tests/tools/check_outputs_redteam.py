"""Runs the check_outputs red team's cases, inside a network namespace of its own (`unshare -rn`, run by
tests/tools/test_check_outputs_redteam.py), and prints one JSON line per case: what became of the call, which
paths the server on 127.0.0.1:30000 was asked for, which canary ports saw a connection, and how long it took.

Each case's call goes the way a session's read goes: its arguments are validated by the tool, the read sandbox
relays the loopback ports the batch gives it, and the tool runs on a local host. The server plays what the case
says (a redirect, a delay, a body of the case's own); canaries listen on the other loopback ports a red team
might aim at and record any connection. Nothing here reaches past this namespace's loopback.

Shell lines (SHELL_LINES.jsonl) go as ssh_exec's would: the classifier reads each, and one it calls a read runs in
the read sandbox with the loopback ports its text names; the others are not run (a change waits for an approval).

usage: python3 check_outputs_redteam.py CASES.jsonl[.gz] WORKDIR [SHELL_LINES.jsonl]
"""

from __future__ import annotations

import gzip
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agent.batch import read_ports
from agent.safety.classifier import classify
from tools.base import ArgumentError, ArtifactStore, RiskClass, ToolContext, ToolError
from tools.check_outputs import CheckOutputs
from tools.hosts import HostPool, HostSpec
from tools.sandbox import SandboxedHosts, loopback_ports

CANARY_PORTS = (2375, 6379, 8000, 8080, 8265, 10250, 30001, 11434, 9090)
SERVED = {("GET", "/v1/models"), ("POST", "/v1/completions")}
CASE_BOUND_S = 15.0  # the harness stops a call past this (a case whose own bound is longer is not a finding)
MAX_DELAY_S = 60.0  # a server's delay longer than this is played as this: the call's own bound decides first

spec: dict = {}
asked: list[tuple[str, str]] = []
canary_hits: list[int] = []
completions = [0]
lock = threading.Lock()


def _bytes(body) -> bytes:
    text = body if isinstance(body, str) else json.dumps(body)
    return text.encode("utf-8", "surrogatepass")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _answer(self, method: str) -> None:
        with lock:
            asked.append((method, self.path))
            s = dict(spec)
        if method == "POST":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if s.get("close_without_answer"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if s.get("redirect"):
            self._send(302, b"", {"Location": s["redirect"]})
            return
        if (method, self.path.split("?")[0]) == ("GET", "/v1/models"):
            part = s.get("models") or {}
            default = {"object": "list", "data": [{"id": "m", "object": "model"}]}
        elif (method, self.path.split("?")[0]) == ("POST", "/v1/completions"):
            part = s.get("completions") or {}
            with lock:
                n = completions[0]
                completions[0] += 1
            default = {"object": "text_completion", "choices": [{"index": 0, "text": " 42", "finish_reason": "stop"}]}
            if part.get("per_prompt"):
                prompts = part["per_prompt"]
                part = {**part, "body": prompts[n] if n < len(prompts) else prompts[-1]}
        else:
            self._send(404, b'{"detail": "Not Found"}', {})
            return
        time.sleep(min(float(part.get("delay_s") or 0), MAX_DELAY_S))
        body = _bytes(part["body"]) if "body" in part else _bytes(default)
        body *= int(part.get("body_repeat") or 1)
        if s.get("slow_drip_bytes_per_s"):
            self._drip(body, float(s["slow_drip_bytes_per_s"]))
            return
        self._send(int(part.get("status") or 200), body, part.get("headers") or {})

    def _send(self, status: int, body: bytes, headers: dict) -> None:
        try:
            self.send_response(status)
            given = {k.lower() for k in headers}
            if "content-type" not in given:
                self.send_header("Content-Type", "application/json")
            if "content-length" not in given:
                self.send_header("Content-Length", str(len(body)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    def _drip(self, body: bytes, rate: float) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for i in range(len(body)):
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                time.sleep(1 / rate)
        except OSError:
            pass

    def do_GET(self):
        self._answer("GET")

    def do_POST(self):
        self._answer("POST")

    def do_PUT(self):
        self._answer("PUT")

    def do_DELETE(self):
        self._answer("DELETE")


def _canary(port: int) -> None:
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((address, port))
            s.listen(16)
        except OSError:
            continue

        def accept(s=s):
            while True:
                conn, _ = s.accept()
                with lock:
                    canary_hits.append(port)
                conn.close()
        threading.Thread(target=accept, daemon=True).start()


def _cases(path: Path) -> list[dict]:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def run_case(case: dict, tool: CheckOutputs, pool: HostPool, store: dict) -> dict:
    global spec
    with lock:
        spec = case.get("server") or {}
        asked.clear()
        canary_hits.clear()
        completions[0] = 0
    out: dict = {"id": case["id"]}
    began = time.monotonic()
    try:
        args = tool.parse_args(case["args"])
    except ArgumentError as e:
        return {**out, "outcome": "refused", "said": str(e)[:400], "s": round(time.monotonic() - began, 2)}
    cancel = threading.Event()
    ctx = ToolContext(hosts=SandboxedHosts(pool, read_ports(tool, args, json.dumps(case["args"]))),
                      artifacts=ArtifactStore(None), store=store, cancel=cancel)
    done: dict = {}

    def call():
        try:
            done["result"] = tool.run(ctx, args)
        except ToolError as e:
            done["error"] = str(e)
        except BaseException as e:  # noqa: BLE001 - a crash is a finding, said as one
            done["crash"] = f"{type(e).__name__}: {e}"[:400]

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(CASE_BOUND_S)
    if worker.is_alive():
        cancel.set()
        worker.join(30)
        out["stopped_by_harness"] = True
    out["s"] = round(time.monotonic() - began, 2)
    if "result" in done:
        r = done["result"]
        out.update(outcome="result", correct=r.correct, model=r.model, outputs=[o[:60] for o in r.outputs[:3]],
                   rendered=tool.render(r)[:600],
                   comparison=r.comparison.model_dump() if r.comparison else None)
    elif "error" in done:
        out.update(outcome="error", said=done["error"][:600])
    elif "crash" in done:
        out.update(outcome="crash", said=done["crash"])
    else:
        out.update(outcome="unfinished")
    time.sleep(0.2)  # a connection the call made as it ended reaches its canary
    with lock:
        out["paths"] = sorted({f"{m} {p}"[:120] for m, p in asked if (m, p) not in SERVED})
        out["canaries"] = sorted(set(canary_hits))
    out["args_timeout"] = args.timeout
    return out


def run_line(line: dict, pool: HostPool) -> dict:
    global spec
    with lock:
        spec = {}
        asked.clear()
        canary_hits.clear()
    risk = classify(line["command"])
    out = {"id": line["id"], "risk": risk.cls.value}
    if risk.cls is RiskClass.READ_ONLY:
        r = SandboxedHosts(pool, loopback_ports(line["command"])).get("box").run(line["command"], timeout=20)
        out.update(exit_code=r.exit_code, said=(r.stdout + r.stderr)[-300:])
        time.sleep(0.2)
    with lock:
        out["paths"] = sorted({f"{m} {p}"[:120] for m, p in asked if (m, p) not in SERVED})
        out["canaries"] = sorted(set(canary_hits))
    return out


def main(argv: list[str]) -> int:
    cases, work = _cases(Path(argv[0])), Path(argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", 30000), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for port in CANARY_PORTS:
        _canary(port)
    pool = HostPool([HostSpec(name="box", transport="local")])
    tool, store = CheckOutputs(), {}
    try:
        for case in cases:
            if case["id"] == "cmp_benchmark_label":  # a "before" that run_bench took: in its own store
                result = run_case(case, tool, pool, {"run_bench": {"before": {"median": 1.0}}})
            else:
                result = run_case(case, tool, pool, store)
            result["pwned"] = sorted(str(p) for p in Path("/tmp").glob("rt31_*")) + \
                sorted(str(p) for p in work.glob("**/rt31_*"))
            print(json.dumps(result), flush=True)
        for line in _cases(Path(argv[2])) if len(argv) > 2 else []:
            print(json.dumps(run_line(line, pool)), flush=True)
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
