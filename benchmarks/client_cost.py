"""The model client's CPU cost per request, as a function of the conversation's length.

    python benchmarks/client_cost.py [--sizes 10,100,400,2000] [--json]

A session sends its whole conversation on every request. The old way put every message in its wire
form again and handed the list to the SDK's `chat.completions.create(messages=...)`, which walks it
against its typed parameters on each request: the cost per request grew with the conversation, and
a session's with the square of its length. The new way (`OpenAIModel` now) converts each message
once and gives the SDK plain JSON, so what is left growing with the length is the serialisation of
the body (and handing its bytes to the socket).

Both ways run in this one process on the same conversations: assistant turns with tool calls and
tool results of a few KB, with the project's real tool schemas. Measured:

  preparation  what the client and the SDK do to a request before it is serialised: the wire form,
               the prompt estimate, the SDK's transformation of its parameters
  serialise    the JSON encoding of the body by the SDK's own encoder: the same bytes both ways
  request      `OpenAIModel.complete` whole, through the real SDK over HTTP to a loopback
               OpenAI-compatible server in this process that streams a short answer

CPU time is the client thread's own (`time.thread_time`), so the server's thread is not counted;
each figure is the median of several requests. The new way's requests are made as in a session:
its history already holds the conversation but for the last turn's two messages.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openai._utils import maybe_transform  # noqa: E402
from openai.types.chat import completion_create_params  # noqa: E402

from agent.model.openai_client import OpenAIModel, WireHistory, estimate_prompt_tokens, wire_messages  # noqa: E402
from tools import default_tools  # noqa: E402
from tools.base import Registry  # noqa: E402

try:
    from openai._utils._json import openapi_dumps  # the SDK's own body encoder (recent releases)
except ImportError:  # older releases leave it to httpx, with these settings
    def openapi_dumps(obj) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()

SIZES = (10, 100, 400, 2000)
SYSTEM_PROMPT = (Path(__file__).resolve().parents[1] / "prompts" / "system.md").read_text()
TOOLS = Registry(default_tools()).schemas()


# --------------------------------------------------------------------------- the conversation


def _output(n: int, size: int) -> str:
    """A tool result that reads like one: the lines of a command's output, `size` bytes of them."""
    lines = []
    i = 0
    while sum(len(line) + 1 for line in lines) < size:
        lines.append(f"|  {i:>2}  NVIDIA RTX PRO 6000 Blackwell  On | 00000000:{i + n % 7:02X}:00.0 Off |  "
                     f"{30 + (i * 7 + n) % 40}C P0 {100 + (i * 13 + n) % 300}W / 600W | {i * 1024 + n} MiB |")
        i += 1
    return "\n".join(lines)[:size]


def conversation(count: int) -> list[dict]:
    """`count` messages as a session has them: the system prompt, the request, then turns of one or two
    calls (ssh_exec, inspect_host, pip_install) and their results of 1.5 to 6 KB."""
    messages: list[dict] = [{"role": "system", "content": SYSTEM_PROMPT},
                            {"role": "user", "content": "Upgrade gpu1 from CUDA 12.8 to 13.0 and keep PyTorch working."}]
    n = 0
    while len(messages) < count:
        calls = [{"id": f"call_{n}_0", "type": "function", "function": {
            "name": "ssh_exec", "arguments": json.dumps({"host": "gpu1", "command": f"nvidia-smi -q -i {n % 8}",
                                                         "timeout_s": 60})}}]
        if n % 3 == 0:
            calls.append({"id": f"call_{n}_1", "type": "function", "function": {
                "name": "inspect_host", "arguments": json.dumps({"host": "gpu1"})}})
        text = f"Step {n}: checking the GPU state before the next change." if n % 2 else None
        messages.append({"role": "assistant", "content": text, "tool_calls": calls})
        for i, call in enumerate(calls):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": _output(n, 1500 + (n * 977 + i * 3001) % 4500)})
        n += 1
    return messages[:count]


# --------------------------------------------------------------------------- the two ways


class FromScratch:
    """The old way's preparation: the whole conversation converted and counted again on every request."""

    tokens = 0

    def update(self, messages: list[dict]) -> list[dict]:
        wire = wire_messages(messages)
        self.tokens = estimate_prompt_tokens(wire, None)
        return wire


class OldWayModel(OpenAIModel):
    """The client as it was: the conversation through create()'s own `messages` and `tools`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.history = FromScratch()

    def _request(self, wire, tools, stream):
        kwargs = {"model": self.name, "messages": wire, "stream": stream}
        if stream:
            kwargs["stream_options"] = {"include_usage": True}
        if tools:
            kwargs.update(tools=tools, tool_choice="auto", parallel_tool_calls=True)
        return kwargs


def prepare_old(model: OldWayModel, messages: list[dict]) -> dict:
    wire = model.history.update(messages)
    estimate_prompt_tokens([], TOOLS)
    return maybe_transform(model._request(wire, TOOLS, stream=True),
                           completion_create_params.CompletionCreateParamsStreaming)


def prepare_new(model: OpenAIModel, messages: list[dict]) -> dict:
    wire = model.history.update(messages)
    model._tools_tokens(TOOLS)
    kwargs = model._request(wire, TOOLS, stream=True)
    extra = kwargs.pop("extra_body")
    return {**maybe_transform(kwargs, completion_create_params.CompletionCreateParamsStreaming), **extra}


def primed(model: OpenAIModel, messages: list[dict]) -> OpenAIModel:
    """The model as a session has it before this request: every message converted but the last turn's two."""
    model.history = WireHistory()
    model.history.update(messages[:-2])
    return model


# --------------------------------------------------------------------------- measuring


def cpu_ms(action, repeats: int, before=None) -> tuple[float, float]:
    """Median CPU and wall milliseconds of `action`, on this thread; `before` runs untimed each time, and
    so does a garbage collection: what the run before left is not collected inside the next one."""
    cpu, wall = [], []
    for _ in range(repeats):
        if before is not None:
            before()
        gc.collect()
        c0, w0 = time.thread_time(), time.perf_counter()
        action()
        cpu.append((time.thread_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    return statistics.median(cpu), statistics.median(wall)


class LoopbackServer:
    """A minimal OpenAI-compatible server on 127.0.0.1: reads the whole body, streams a short answer."""

    ANSWER = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in [
        {"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "m",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}]},
        {"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "m",
         "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [],
         "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}},
    ]) + b"data: [DONE]\n\n"

    def __init__(self) -> None:
        self.body_bytes: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):  # noqa: N802 - http.server's naming
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self):  # noqa: N802
                outer.body_bytes.append(len(self.rfile.read(int(self.headers["content-length"]))))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(outer.ANSWER)))
                self.end_headers()
                self.wfile.write(outer.ANSWER)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def repeats_for(size: int) -> tuple[int, int]:
    """How many requests each figure is the median of: (old way, new way); the old way's are long."""
    return (21 if size <= 100 else 9 if size <= 400 else 5), 21


def measure(size: int, server: LoopbackServer, old: OldWayModel, new: OpenAIModel) -> dict:
    messages = conversation(size)
    repeats_old, repeats = repeats_for(size)
    prep_old, _ = cpu_ms(lambda: prepare_old(old, messages), repeats_old)
    prep_new, _ = cpu_ms(lambda: prepare_new(new, messages), repeats, before=lambda: primed(new, messages))
    body = prepare_new(primed(new, messages), messages)
    assert body == prepare_old(old, messages), "the two ways would send different bodies"
    encoded = openapi_dumps(body)  # the SDK's own encoder, the same bytes both ways
    ser, _ = cpu_ms(lambda: openapi_dumps(body), repeats)
    req_old, wall_old = cpu_ms(lambda: old.complete(messages, TOOLS), repeats_old)
    req_new, wall_new = cpu_ms(lambda: new.complete(messages, TOOLS), repeats, before=lambda: primed(new, messages))
    assert server.body_bytes[-1] == len(encoded), "the server got another body than the one measured"
    return {
        "messages": size, "body_kib": round(len(encoded) / 1024, 1),
        "prompt_tokens_estimate": new.history.tokens + new._tools_tokens(TOOLS),
        "prepare_ms": {"old": round(prep_old, 3), "new": round(prep_new, 3), "ratio": round(prep_old / prep_new, 1)},
        "serialise_ms": round(ser, 3),
        "request_cpu_ms": {"old": round(req_old, 3), "new": round(req_new, 3), "ratio": round(req_old / req_new, 1)},
        "request_wall_ms": {"old": round(wall_old, 3), "new": round(wall_new, 3)},
        "new_request_beyond_serialise_ms": round(req_new - ser, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES),
                    help="message counts, comma-separated (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = ap.parse_args()
    try:
        sizes = [int(s) for s in a.sizes.split(",")]
        if any(s < 3 for s in sizes):
            raise ValueError
    except ValueError:
        ap.error(f"--sizes takes message counts of at least 3, comma-separated (e.g. 10,100,400), not {a.sizes!r}")
    server = LoopbackServer()
    try:
        old = OldWayModel("bench-model", base_url=server.base_url, api_key="sk-bench")
        new = OpenAIModel("bench-model", base_url=server.base_url, api_key="sk-bench")
        for model in (old, new):  # the SDK's first request (imports, the connection, GET /props) is not counted
            model.complete(conversation(4), TOOLS)
        rows = [measure(size, server, old, new) for size in sizes]
    finally:
        server.close()
    first, last = rows[0], rows[-1]
    figures = {
        "rows": rows,
        "growth_first_to_last": {
            "from_messages": first["messages"], "to_messages": last["messages"],
            "prepare_old": round(last["prepare_ms"]["old"] / first["prepare_ms"]["old"], 1),
            "prepare_new": round(last["prepare_ms"]["new"] / first["prepare_ms"]["new"], 1),
            "request_cpu_old": round(last["request_cpu_ms"]["old"] / first["request_cpu_ms"]["old"], 1),
            "request_cpu_new": round(last["request_cpu_ms"]["new"] / first["request_cpu_ms"]["new"], 1),
        },
        "old_prepare_ms_per_message": round(
            (last["prepare_ms"]["old"] - first["prepare_ms"]["old"]) / (last["messages"] - first["messages"]), 4)
        if len(rows) > 1 else None,
    }
    if a.json:
        print(json.dumps(figures))
        return 0
    print(f"{'messages':>8} {'body KiB':>9} | {'prepare old':>11} {'new':>7} {'x':>6} | {'serialise':>9} | "
          f"{'request old':>11} {'new':>7} {'x':>6} | {'new - serialise':>15}   (CPU ms per request)")
    for r in rows:
        p, q = r["prepare_ms"], r["request_cpu_ms"]
        print(f"{r['messages']:>8} {r['body_kib']:>9} | {p['old']:>11.3f} {p['new']:>7.3f} {p['ratio']:>6} | "
              f"{r['serialise_ms']:>9.3f} | {q['old']:>11.3f} {q['new']:>7.3f} {q['ratio']:>6} | "
              f"{r['new_request_beyond_serialise_ms']:>15.3f}")
    g = figures["growth_first_to_last"]
    print(f"from {g['from_messages']} to {g['to_messages']} messages: preparation x{g['prepare_old']} old, "
          f"x{g['prepare_new']} new; whole request x{g['request_cpu_old']} old, x{g['request_cpu_new']} new")
    if figures["old_prepare_ms_per_message"] is not None:
        print(f"old preparation: {figures['old_prepare_ms_per_message']} ms per message per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
