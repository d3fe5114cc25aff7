"""An OpenAI-compatible server on 127.0.0.1 that behaves the way llama.cpp's servers do.

llama-cpp-python's server and the C++ `llama-server --jinja` differ from OpenAI in ways a client
meets on the first real run. Each is a switch here, so a test turns on the one it is about:

    needs_tool_choice    tools sent without `tool_choice` are left out of the prompt (llama-cpp-python)
    streams_tool_calls   False: a streamed request with tools answers 500 "Automatic streaming tool
                         choice is not supported" (llama-cpp-python)
    rejects_null_content an assistant message whose content is null fails the chat template: 500 with a
                         validation dump of many lines
    reports_usage        False: no `usage` in any answer
    parses_arguments     the arguments of every call in the history are parsed as strict JSON; what does
                         not parse is a 500 "Failed to parse tool call arguments as JSON" (llama-server)
    n_ctx                the context size: GET /props says it (unless `props` is False), and a longer
                         request is a 400 "exceeds the available context size" (llama-server)
    fails_with           every chat request answers this (status, message) instead
    fails_with_body      ... or this (status, body), e.g. FastAPI's 422 {"detail": [...]}

The model's side is a script of `Said` turns, one per request the server accepts (or a function of
the messages). `die()` stops the server mid-run: open connections are dropped without an answer
and new ones are refused.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

# The validation dump llama-cpp-python's chat handler answers for a null content (about 15 lines).
NULL_CONTENT_DUMP = "\n".join([
    "3 validation errors for ChatCompletionRequestAssistantMessage",
    "content",
    "  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]",
    "    For further information visit https://errors.pydantic.dev/2.9/v/string_type",
    "content.list[ChatCompletionRequestMessageContentPartText]",
    "  Input should be a valid list [type=list_type, input_value=None, input_type=NoneType]",
    "    For further information visit https://errors.pydantic.dev/2.9/v/list_type",
    "tool_calls.0.function",
    "  Field required [type=missing, input_value={'id': 'call_0'}, input_type=dict]",
    "    For further information visit https://errors.pydantic.dev/2.9/v/missing",
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    "  File \"llama_cpp/llama_chat_format.py\", line 241, in __call__",
    "TypeError: can only concatenate str (not \"NoneType\") to str",
])


@dataclass
class Said:
    """What the model says in one turn: text, calls (arguments: a dict, or raw text) and how it ended."""

    text: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)
    finish: str | None = None  # "length": the server's token limit cut it off


class LlamaCppServer:
    def __init__(self, script: list[Said] | Callable[[list[dict]], Said], *, needs_tool_choice: bool = True,
                 streams_tool_calls: bool = True, rejects_null_content: bool = True, reports_usage: bool = False,
                 parses_arguments: bool = True, n_ctx: int | None = None, props: bool = True,
                 fails_with: tuple[int, str] | None = None, fails_with_body: tuple[int, dict] | None = None,
                 repeats_tool_name: bool = False):
        self._next = script if callable(script) else self._from_list(list(script))
        self.needs_tool_choice = needs_tool_choice
        self.streams_tool_calls = streams_tool_calls
        self.rejects_null_content = rejects_null_content
        self.reports_usage = reports_usage
        self.parses_arguments = parses_arguments
        self.n_ctx = n_ctx
        self.props = props
        self.fails_with = fails_with
        self.fails_with_body = fails_with_body
        # llama-cpp-python's server names the function again in every chunk of a streamed call.
        self.repeats_tool_name = repeats_tool_name
        self.requests: list[dict] = []  # every chat request's body, accepted or not
        self.answered: list[int] = []  # the status each chat request got
        self.gets: list[str] = []
        self.dead = False
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):  # noqa: N802 - http.server's naming
                outer.gets.append(self.path)
                if outer.dead:
                    return outer._drop(self)
                if self.path == "/props" and outer.props and outer.n_ctx:
                    return outer._json(self, 200, {"default_generation_settings": {"n_ctx": outer.n_ctx},
                                                   "total_slots": 1, "build_info": "b6000-emulated"})
                outer._json(self, 404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if outer.dead:
                    return outer._drop(self)
                with outer._lock:
                    outer.requests.append(body)
                outer._chat(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def _from_list(turns: list[Said]) -> Callable[[list[dict]], Said]:
        def next_turn(messages: list[dict]) -> Said:
            return turns.pop(0) if turns else Said("(the emulated model has nothing more to say)")
        return next_turn

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "LlamaCppServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if not self.dead:
            self.server.shutdown()
        self.server.server_close()

    def die(self) -> None:
        """The server process is gone: kept-alive connections are dropped, new ones refused."""
        self.dead = True
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ one chat request

    def _chat(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        messages = body.get("messages", [])
        tools = body.get("tools") or []
        if self.fails_with_body is not None:
            self.answered.append(self.fails_with_body[0])
            return self._json(h, *self.fails_with_body)
        failure = self._refusal(body, messages, tools)
        if failure is not None:
            status, error = failure
            self.answered.append(status)
            return self._json(h, status, {"error": error})
        said = self._next(messages)
        if self.dead:  # it died while this request waited for its answer
            return self._drop(h)
        if tools and self.needs_tool_choice and body.get("tool_choice") is None:
            # llama-cpp-python renders the prompt without the tools: the model cannot call any.
            said = Said(text=said.text or "I have no tools here, so I cannot look at the host.")
        self.answered.append(200)
        if body.get("stream"):
            self._stream(h, body, said)
        else:
            self._whole(h, body, said)

    def _refusal(self, body: dict, messages: list[dict], tools: list) -> tuple[int, dict] | None:
        """The error this request gets, in the order the servers check, or None."""
        if self.fails_with is not None:
            status, message = self.fails_with
            return status, {"code": status, "message": message, "type": "server_error"}
        for m in messages:
            if m.get("role") == "assistant" and m.get("content") is None and self.rejects_null_content:
                return 500, {"message": NULL_CONTENT_DUMP, "type": "internal_server_error", "param": None,
                             "code": None}
            for call in (m.get("tool_calls") or []) if self.parses_arguments else []:
                problem = _strict_json_problem(call.get("function", {}).get("arguments"))
                if problem:
                    return 500, {"code": 500, "type": "server_error",
                                 "message": f"Failed to parse tool call arguments as JSON: {problem}"}
        if self.n_ctx is not None:
            n_prompt = _server_token_count(messages, tools)
            if n_prompt > self.n_ctx:
                return 400, {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": n_prompt,
                             "n_ctx": self.n_ctx,
                             "message": f"request ({n_prompt} tokens) exceeds the available context size "
                                        f"({self.n_ctx} tokens), try increasing it"}
        if body.get("stream") and tools and body.get("tool_choice") == "auto" and not self.streams_tool_calls:
            return 500, {"message": "Automatic streaming tool choice is not supported",
                         "type": "internal_server_error", "param": None, "code": None}
        return None

    def _usage(self, body: dict, said: Said) -> dict | None:
        if not self.reports_usage:
            return None
        prompt = _server_token_count(body.get("messages", []), body.get("tools") or [])
        return {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}

    def _whole(self, h: BaseHTTPRequestHandler, body: dict, said: Said) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": said.text or None}
        if said.calls:
            message["tool_calls"] = [{"id": f"call_{len(self.requests)}_{i}", "type": "function",
                                      "function": {"name": name, "arguments": _raw(args)}}
                                     for i, (name, args) in enumerate(said.calls)]
        answer: dict[str, Any] = {"id": "chatcmpl-emulated", "object": "chat.completion", "created": 0,
                                  "model": body.get("model", "m"),
                                  "choices": [{"index": 0, "message": message, "finish_reason": _finish(said)}]}
        usage = self._usage(body, said)
        if usage:
            answer["usage"] = usage
        self._json(h, 200, answer)

    def _stream(self, h: BaseHTTPRequestHandler, body: dict, said: Said) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()

        def send(obj: dict | None) -> None:
            data = b"data: [DONE]\n\n" if obj is None else b"data: " + json.dumps(obj).encode() + b"\n\n"
            h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        send(_chunk({"role": "assistant", "content": None}))
        for piece in _halves(said.text):
            send(_chunk({"content": piece}))
        for i, (name, args) in enumerate(said.calls):
            raw = _raw(args)
            first, rest = raw[: len(raw) // 2], raw[len(raw) // 2:]
            send(_chunk({"tool_calls": [{"index": i, "id": f"call_{len(self.requests)}_{i}", "type": "function",
                                         "function": {"name": name, "arguments": first}}]}))
            again = {"name": name} if self.repeats_tool_name else {}
            send(_chunk({"tool_calls": [{"index": i, "function": {**again, "arguments": rest}}]}))
        send(_chunk({}, finish=_finish(said)))
        usage = self._usage(body, said)
        if usage:
            send({"id": "chatcmpl-emulated", "object": "chat.completion.chunk", "created": 0, "model": "m",
                  "choices": [], "usage": usage})
        send(None)
        h.wfile.write(b"0\r\n\r\n")

    # ------------------------------------------------------------------ plumbing

    @staticmethod
    def _json(h: BaseHTTPRequestHandler, status: int, obj: dict) -> None:
        payload = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)

    @staticmethod
    def _drop(h: BaseHTTPRequestHandler) -> None:
        """No answer at all: the connection is reset, as when the server process is killed."""
        h.close_connection = True
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _strict_json_problem(arguments: Any) -> str | None:
    """What a strict JSON parser (nlohmann::json, as llama-server uses) says of the arguments, or None."""
    if not isinstance(arguments, str):
        return "arguments are not a string"

    def reject(name: str) -> Any:
        raise ValueError(f"syntax error while parsing value - invalid literal; last read: '{name}'")

    try:
        value = json.loads(arguments, parse_constant=reject)
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except json.JSONDecodeError as e:
        return (f"[json.exception.parse_error.101] parse error at line {e.lineno}, column {e.colno}: syntax error "
                f"while parsing value - {e.msg}; last read: '{arguments[-20:]}'")
    except (ValueError, UnicodeEncodeError) as e:
        return f"[json.exception.parse_error.101] {e}"
    return None


def _server_token_count(messages: list[dict], tools: list) -> int:
    """The server's own count of a prompt: about three bytes a token, as real tokenizers give for JSON and
    code, so more than a four-bytes-a-token estimate of the same text."""
    return len(json.dumps(messages).encode()) // 3 + len(json.dumps(tools).encode()) // 3


def _raw(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _finish(said: Said) -> str:
    return said.finish or ("tool_calls" if said.calls else "stop")


def _halves(text: str) -> list[str]:
    half = len(text) // 2
    return [piece for piece in (text[:half], text[half:]) if piece]


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-emulated", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
