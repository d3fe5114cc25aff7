"""A small OpenAI-compatible chat-completions server on 127.0.0.1, scripted per test.

The real `openai` SDK talks to it over HTTP, so retries, streaming and error handling
are exercised for real. Each entry of the script answers one request:

    Reply(text="...", calls=[("ssh_exec", {...})])   a streamed answer
    Status(429, retry_after=0.1) / Status(500)       an HTTP error
    Drop(after_text="par")                           a stream that breaks off mid-answer
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)  # args: dict, or raw string
    usage: tuple[int, int] = (10, 5)


@dataclass
class Status:
    code: int
    message: str = "scripted error"
    retry_after: float | None = None


@dataclass
class Drop:
    after_text: str = ""


class FakeOpenAI:
    def __init__(self, script: list | None = None, repeat_last: bool = False):
        self.script = list(script or [])
        self.repeat_last = repeat_last
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with outer._lock:
                    outer.requests.append(body)
                    outer.headers.append(dict(self.headers))
                    if outer.script:
                        entry = outer.script.pop(0) if (len(outer.script) > 1 or not outer.repeat_last) else outer.script[0]
                    else:
                        entry = Status(500, "fake server: script exhausted")
                outer._answer(self, body, entry)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ answers

    def _answer(self, h: BaseHTTPRequestHandler, body: dict, entry) -> None:
        if isinstance(entry, Status):
            payload = json.dumps({"error": {"message": entry.message, "type": "test", "code": entry.code}}).encode()
            h.send_response(entry.code)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(payload)))
            if entry.retry_after is not None:
                h.send_header("retry-after", str(entry.retry_after))
            h.end_headers()
            h.wfile.write(payload)
            return
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        if isinstance(entry, Drop):
            # Promise more than we send, then close: the client sees a broken stream.
            h.send_header("content-length", "100000")
            h.end_headers()
            h.wfile.write(_sse(_chunk({"role": "assistant", "content": entry.after_text})))
            h.wfile.flush()
            h.close_connection = True
            return
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()

        def send(data: bytes) -> None:
            h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        if entry.text:
            half = len(entry.text) // 2
            for piece in (entry.text[:half], entry.text[half:]):
                if piece:
                    send(_sse(_chunk({"role": "assistant", "content": piece})))
        for i, (name, args) in enumerate(entry.calls):
            raw = args if isinstance(args, str) else json.dumps(args)
            cut = len(raw) // 2
            # Arguments arrive in pieces, as real servers stream them.
            send(_sse(_chunk({"tool_calls": [{"index": i, "id": f"call_{len(self.requests)}_{i}", "type": "function",
                                               "function": {"name": name, "arguments": raw[:cut]}}]})))
            send(_sse(_chunk({"tool_calls": [{"index": i, "function": {"arguments": raw[cut:]}}]})))
        finish = "tool_calls" if entry.calls else "stop"
        send(_sse(_chunk({}, finish=finish)))
        usage = {"prompt_tokens": entry.usage[0], "completion_tokens": entry.usage[1],
                 "total_tokens": sum(entry.usage)}
        send(_sse({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": body.get("model", "m"),
                   "choices": [], "usage": usage}))
        send(b"data: [DONE]\n\n")
        send(b"")


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _sse(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"
