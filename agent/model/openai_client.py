"""The OpenAI-compatible client: chat completions through the `openai` SDK.

It speaks to any compatible server (OpenAI, vLLM, SGLang, llama.cpp, Ollama) and meets each where
it is: tools go with `tool_choice: "auto"` (without it llama-cpp-python leaves them out of the
prompt); a server that cannot stream tool calls is asked again without streaming, for the rest of
the session; the conversation goes out in a form every server parses (empty content as "", a
malformed call's arguments as a JSON object); a server that reports no usage gets its tokens
estimated, labelled as such; a server that says its context size (llama.cpp's GET /props) gets no
request longer than that.

There is exactly one retry layer, tenacity, with the SDK's own retries off, so a rate limit is
never retried twice over. An error that says the same thing again is not transient and is not
retried: a 4xx, or a 500 whose body is the one before.

A request costs the same whatever the conversation's length: each message is put in its wire form
once (`WireHistory`), and the conversation goes to the SDK as the plain JSON it already is, not
through the SDK's per-request walk of its typed parameters (see `OpenAIModel._request`).
"""

from __future__ import annotations

import email.utils
import json
import os
import re
import threading
import time
from typing import Any, Callable

import tenacity

from agent.model.protocol import AssistantTurn, ModelError, ToolCall, Usage, estimate_tokens

# The most of a server's error body the transcript keeps.
ERROR_BODY_LIMIT = 64 * 1024
# How long the one look at GET /props may take: a server that does not answer it has no such endpoint.
PROPS_TIMEOUT_S = 3.0
# Per message, what a chat template adds around the text (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 4


def _retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After / retry-after-ms), if it said."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # a header we cannot read: back off as usual
    return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The transport errors of httpx and of the fork the SDK may be built on."""
    import httpx

    errors: list[type[BaseException]] = [httpx.TransportError]
    try:
        import httpx2  # the SDK's own HTTP client in recent releases
    except ImportError:
        pass
    else:
        errors.append(httpx2.TransportError)
    return tuple(errors)


def _is_retryable(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError,
                        openai.APITimeoutError, *_transport_errors())):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


class _RetryUnlessRepeated:
    """Retries transient failures, but not a 500 that says exactly what the one before said: a request
    the server cannot handle (a template that fails on it, arguments it cannot parse) fails the same way
    every time, and five tries of it only cost the operator's time. 502-504 and 429 are waited out."""

    def __init__(self) -> None:
        self.last_500_body: str | None = None
        self.repeated = False

    def __call__(self, exc: BaseException) -> bool:
        if not _is_retryable(exc):
            return False
        if getattr(exc, "status_code", None) == 500:
            body = _body_text(exc)
            if body == self.last_500_body:
                self.repeated = True
                return False
            self.last_500_body = body
        return True


class _WaitRetryAfter(tenacity.wait.wait_base):
    """Honour Retry-After when the server sends it; exponential backoff with jitter otherwise."""

    # A server asking for longer than this is treated as down rather than waited for.
    RETRY_AFTER_CAP_S = 120.0

    def __init__(self, initial: float, maximum: float):
        self.backoff = tenacity.wait_exponential(multiplier=initial, max=maximum) + tenacity.wait_random(0, initial)

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        asked = _retry_after_seconds(exc) if exc else None
        if asked is not None:
            return min(asked, self.RETRY_AFTER_CAP_S)
        return self.backoff(retry_state)


class OpenAIModel:
    """Chat completions over the `openai` SDK, streamed where the server can, with parallel tool calls on."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_attempts: int = 5,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 30.0,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
    ):
        import openai

        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None and base_url is None:
            raise ModelError(
                "no model endpoint configured: set OPENAI_API_KEY (for OpenAI) or OPENAI_BASE_URL / --base-url "
                "(for a local server such as vLLM, SGLang, llama.cpp or Ollama)", kind="config"
            )
        self.name = model
        self.base_url = base_url or "https://api.openai.com/v1"
        # Local servers usually need no key, but the SDK insists on one.
        self._client = openai.OpenAI(api_key=api_key or "not-needed", base_url=base_url, max_retries=0,
                                     timeout=timeout_s)
        # The SDK's timeout is per read: a server that keeps a reply open (keep-alive pings, a reply
        # that never ends) never trips it. This one bounds a whole streamed reply.
        self.timeout_s = timeout_s
        self._max_attempts = max_attempts
        self._wait = _WaitRetryAfter(backoff_initial_s, backoff_max_s)
        self._on_retry = on_retry
        # What this server turned out to be, kept for the session.
        self.streams_tool_calls = True
        self.context_size: int | None = None
        self.answered = False  # it has answered a turn in this session: failing now, it stopped
        self._probed = False
        self._told_usage_estimated = False
        self.history = WireHistory()  # the conversation's wire form, kept between requests
        self._tools_estimated: tuple[Any, int] = (None, 0)  # the tools list last seen, and its token estimate

    # ------------------------------------------------------------------ one turn

    def complete(self, messages, tools, on_text=None) -> AssistantTurn:
        notes: list[str] = []
        wire = self.history.update(messages)
        self._probe_context(notes)
        prompt_estimate = self.history.tokens + self._tools_tokens(tools)
        if self.context_size is not None and prompt_estimate > self.context_size:
            raise ModelError(
                f"the conversation (about {prompt_estimate} tokens, estimated from its size) does not fit the "
                f"context of model server {self.base_url} ({self.context_size} tokens, its n_ctx): start the "
                f"server with a larger context (llama.cpp: --ctx-size) or give the goal fewer turns", kind="context")
        attempts = 0

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if self._on_retry and state.outcome is not None:
                self._on_retry(state.attempt_number, state.outcome.exception(), state.upcoming_sleep)

        retry_unless_repeated = _RetryUnlessRepeated()
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._max_attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception(retry_unless_repeated),
            before_sleep=before_sleep,
            reraise=True,
        )
        start = time.monotonic()
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    turn = self._once(wire, tools, on_text, notes)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one readable line
            message, kind = self._explain(exc, attempts, retry_unless_repeated.repeated)
            raise ModelError(message, kind=kind, body=_body_text(exc)) from exc
        self.answered = True
        if turn.usage is None or turn.usage.total_tokens == 0:  # none reported, or zeros: not a count
            turn.usage = self._estimated_usage(prompt_estimate, turn, notes)
        turn.latency_s = time.monotonic() - start
        turn.attempts = attempts
        turn.notes = notes
        return turn

    def _once(self, wire, tools, on_text, notes: list[str]) -> AssistantTurn:
        import openai

        if self.streams_tool_calls or not tools:
            try:
                return self._streamed(wire, tools, on_text)
            except openai.APIError as exc:
                if not (tools and _cannot_stream_tool_calls(exc)):
                    raise
                self.streams_tool_calls = False
                said = _first_line(_server_message(exc))
                notes.append(f"model server {self.base_url} cannot stream tool calls ({said}): asking without "
                             f"streaming for the rest of the session")
        return self._whole(wire, tools, on_text)

    def _request(self, wire: list[dict], tools, stream: bool) -> dict[str, Any]:
        """create()'s arguments. The conversation and the tools are plain JSON already, so they go in
        `extra_body`, which the SDK sends as it is given; as create()'s own `messages` and `tools` the SDK
        would walk every message against its typed parameters again on each request (about 0.4 ms a
        message: a session's cost would grow with the square of its length). The body is the same, key
        for key and in the same order: `messages` keeps the place of the empty list it replaces, and
        `tools`, the last of create()'s keys we use, comes last."""
        kwargs: dict[str, Any] = {"model": self.name, "messages": [], "stream": stream}
        body: dict[str, Any] = {"messages": wire}
        if stream:
            kwargs["stream_options"] = {"include_usage": True}
        if tools:
            # Without tool_choice some servers (llama-cpp-python) leave the tools out of the prompt.
            kwargs.update(tool_choice="auto", parallel_tool_calls=True)
            body["tools"] = tools
        kwargs["extra_body"] = body
        return kwargs

    def _tools_tokens(self, tools) -> int:
        """The tools' share of the prompt estimate, counted again only when the list is another one."""
        seen, estimate = self._tools_estimated
        if tools is not seen:
            estimate = estimate_prompt_tokens([], tools)
            self._tools_estimated = (tools, estimate)
        return estimate

    def _streamed(self, wire, tools, on_text) -> AssistantTurn:
        stream = self._client.chat.completions.create(**self._request(wire, tools, stream=True))
        # A reply held open past the timeout (keep-alive comments yield no chunks) is cut from a timer.
        overdue = threading.Event()

        def cut() -> None:
            overdue.set()
            stream.response.close()

        timer = threading.Timer(self.timeout_s, cut)
        timer.daemon = True
        timer.start()
        try:
            return self._read_stream(stream, on_text)
        except Exception as exc:
            if overdue.is_set():
                raise ModelError(f"model server {self.base_url} kept its reply open past the {self.timeout_s:g} s "
                                 "model timeout without finishing it (a reply that never ends, or keep-alives "
                                 "only): cap its output (llama.cpp: --n-predict) or raise --model-timeout",
                                 kind="server") from exc
            raise
        finally:
            timer.cancel()

    def _read_stream(self, stream, on_text) -> AssistantTurn:
        text: list[str] = []
        calls: dict[int, dict] = {}
        usage: Usage | None = None
        finish = None
        with stream:
            for chunk in stream:
                if getattr(chunk, "usage", None):
                    usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        if on_text:
                            on_text(delta.content)
                    for tc in (delta.tool_calls or []) if delta is not None else []:
                        slot = calls.setdefault(tc.index if tc.index is not None else len(calls),
                                                {"id": "", "name": "", "arguments": ""})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            slot["name"] = _streamed_name(slot["name"], tc.function.name or "")
                            slot["arguments"] += tc.function.arguments or ""
                    if choice.finish_reason:
                        finish = choice.finish_reason
        if finish is None:
            import httpx

            # The stream ended without a finish reason: the connection dropped mid-answer.
            raise httpx.RemoteProtocolError("model stream ended before the answer was complete")
        tool_calls = [ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
                      for i, c in sorted(calls.items())]
        return AssistantTurn(text="".join(text), tool_calls=tool_calls, usage=usage, finish_reason=finish)

    def _whole(self, wire, tools, on_text) -> AssistantTurn:
        """The same request without streaming: the answer arrives at once."""
        response = self._client.chat.completions.create(**self._request(wire, tools, stream=False))
        if not getattr(response, "choices", None):
            import httpx

            raise httpx.RemoteProtocolError("model server answered without a choice")
        choice = response.choices[0]
        message = choice.message
        text = (message.content if message is not None else None) or ""
        if text and on_text:
            on_text(text)
        tool_calls = []
        for i, tc in enumerate((message.tool_calls if message is not None else None) or []):
            function = getattr(tc, "function", None)
            arguments = getattr(function, "arguments", None)
            if not isinstance(arguments, str):  # a server that sends the object itself
                arguments = json.dumps(arguments if arguments is not None else {})
            tool_calls.append(ToolCall(id=getattr(tc, "id", None) or f"call_{i}",
                                       name=getattr(function, "name", None) or "", arguments=arguments))
        reported = getattr(response, "usage", None)
        usage = Usage(reported.prompt_tokens or 0, reported.completion_tokens or 0) if reported else None
        finish = choice.finish_reason or ("tool_calls" if tool_calls else "stop")
        return AssistantTurn(text=text, tool_calls=tool_calls, usage=usage, finish_reason=finish)

    # ------------------------------------------------------------------ what the server is

    def _estimated_usage(self, prompt_estimate: int, turn: AssistantTurn, notes: list[str]) -> Usage:
        """Tokens counted from the text's size, for a server that reports none."""
        if not self._told_usage_estimated:
            self._told_usage_estimated = True
            notes.append(f"model server {self.base_url} reports no token usage: tokens are estimated from the "
                         f"text's size (about 4 bytes a token) and labelled as estimated")
        produced = turn.text + "".join(c.name + c.arguments for c in turn.tool_calls)
        return Usage(prompt_estimate, estimate_tokens(produced), estimated=True)

    def _probe_context(self, notes: list[str]) -> None:
        """Once a session: the server's context size, where it says it (llama.cpp's GET /props)."""
        if self._probed:
            return
        self._probed = True
        if "api.openai.com" in self.base_url:
            return
        root = re.sub(r"/v1/?$", "", self.base_url.rstrip("/"))
        try:  # through the SDK's own client: its key, proxies and TLS settings
            props = self._client.get(f"{root}/props", cast_to=object, options={"timeout": PROPS_TIMEOUT_S})
        except Exception:  # noqa: BLE001 - a server without /props simply does not say
            return
        n_ctx = _context_of(props)
        if n_ctx:
            self.context_size = n_ctx
            notes.append(f"model server {self.base_url} has a context of {n_ctx} tokens (n_ctx at {root}/props)")

    # ------------------------------------------------------------------ one line per failure

    def _explain_no_answer(self, exc: BaseException, attempts: int) -> tuple[str, str]:
        """No answer at all (refused, reset, timed out): a server that answered earlier has stopped."""
        import openai

        where = f"model server {self.base_url}"
        timed_out = isinstance(exc, openai.APITimeoutError)
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) and exc.__cause__ else exc
        how = "did not answer in time" if timed_out else _first_line(str(cause)) or type(cause).__name__
        if self.answered:
            return (f"{where} stopped answering ({how}, {attempts} attempts) after answering earlier in this "
                    f"session: check that it is still running, then run again", "stopped")
        if timed_out:
            return (f"{where} did not answer in time after {attempts} attempts; check the server or raise "
                    f"--model-timeout", "unreachable")
        return (f"cannot reach {where} after {attempts} attempts ({how}): check --base-url / OPENAI_BASE_URL and "
                f"that the server is running", "unreachable")

    def _explain(self, exc: BaseException, attempts: int, repeated: bool) -> tuple[str, str]:
        """The failure as one line that says what to do, and its kind (see ModelError)."""
        import openai

        where = f"model server {self.base_url}"
        if isinstance(exc, openai.AuthenticationError):
            return f"{where} refused the API key (401): set OPENAI_API_KEY to a valid key for this server", "config"
        message = _first_line(_server_message(exc))
        if isinstance(exc, openai.PermissionDeniedError):
            return f"{where} denied access (403): {message}", "config"
        if isinstance(exc, openai.NotFoundError):
            return (f"{where} answered 404 for model {self.name!r}: {message}; check --model and --base-url",
                    "config")
        if isinstance(exc, openai.APIStatusError):
            context = _context_overflow(exc)
            if context:
                return f"{where} {context}", "context"
            if exc.status_code < 500 and exc.status_code != 429:
                hint = ""
                if "tool" in message.lower():
                    hint = (" (the server may not support tool calls for this model: enable them, e.g. vLLM's "
                            "--enable-auto-tool-choice)")
                return f"{where} rejected the request ({exc.status_code}): {message}{hint}", "rejected"
            if repeated:
                return (f"{where} answered {exc.status_code} twice with the same error, so it was not retried further:"
                        f" {message} (its whole answer is in the transcript)", "server")
            return (f"{where} kept failing ({exc.status_code}: {message}) after {attempts} attempts; try again later",
                    "server")
        if isinstance(exc, (openai.APIConnectionError, *_transport_errors())):
            return self._explain_no_answer(exc, attempts)
        if isinstance(exc, openai.APIError):  # an error the server sent inside its stream
            return f"{where} answered with an error: {message}", "server"
        return f"{where} failed after {attempts} attempts: {type(exc).__name__}: {_first_line(str(exc))}", "server"


# --------------------------------------------------------------------------- the wire form


def _parses_everywhere(arguments: Any) -> bool:
    """Arguments any server's parser takes: a JSON object, strict JSON (no NaN), valid Unicode."""
    if not isinstance(arguments, str):
        return False

    def no_constants(name: str) -> Any:
        raise ValueError(name)

    try:
        value = json.loads(arguments, parse_constant=no_constants)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate escape fails here
    except (ValueError, UnicodeEncodeError, RecursionError):
        return False
    return isinstance(value, dict)


def _shown_as_empty(raw: Any) -> str:
    """What a malformed call's result adds: the history shows its arguments as {}, and what was sent."""
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    # Valid Unicode only: a lone surrogate would make the whole request unparseable to a strict server.
    shown = text[:200].encode("utf-8", "replace").decode("utf-8") + ("..." if len(text) > 200 else "")
    return (f"\n(this call's arguments do not parse as a JSON object, so the conversation shows them as {{}}; you sent "
            f"{len(text)} characters: {json.dumps(shown, ensure_ascii=False)})")


def wire_messages(messages: list[dict]) -> list[dict]:
    """The session's messages in the form every OpenAI-compatible server accepts.

    An assistant message's missing content goes as "" (llama.cpp's servers fail on null; OpenAI
    takes both). A call's arguments that are not a JSON object go as {} (llama-server parses them,
    and answers 500 to what it cannot parse, again on every request); the call's result says so
    and what was sent. The session's own list is left as it is: its digests stay those of the
    record, which keeps the model's raw text.
    """
    out: list[dict] = []
    unparsed: dict[Any, Any] = {}
    for message in messages:
        wire, added = _wire_form(message, unparsed)
        unparsed.update(added)
        out.append(wire)
    return out


def _wire_form(message: dict, unparsed: dict[Any, Any]) -> tuple[dict, dict[Any, Any]]:
    """One message's wire form (see wire_messages), given the malformed calls of the messages before it
    (call id -> the arguments sent), and the malformed calls this message adds. The form is a copy,
    so what is sent does not change with the session's own dicts."""
    role = message.get("role")
    added: dict[Any, Any] = {}
    if role == "assistant":
        message = {**message, "content": message.get("content") or ""}
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                arguments = call.get("function", {}).get("arguments")
                if isinstance(arguments, dict):  # a session built in code: the object itself
                    arguments = json.dumps(arguments, ensure_ascii=False, default=str)
                if not _parses_everywhere(arguments):
                    added[call.get("id")] = arguments
                    arguments = "{}"
                calls.append({**call, "function": {**call.get("function", {}), "arguments": arguments}})
            message["tool_calls"] = calls
        return message, added
    if role == "tool" and message.get("tool_call_id") in unparsed:
        raw = unparsed[message["tool_call_id"]]
        return {**message, "content": f"{message.get('content') or ''}{_shown_as_empty(raw)}"}, added
    return dict(message), added


class WireHistory:
    """The conversation in its wire form (see wire_messages), each message converted once and kept.

    The loop only appends to its message list, so a request converts only the messages that the one
    before it had not sent, and the client's cost per request stays the same however long the session
    grows. Each converted message is kept beside the message it came from; a list that no longer
    begins with those same messages (another list, or an older message replaced by a rewritten one,
    as a compaction of the history would do) is converted again from the first message that differs.
    A message is a value once it is in the list: one changed in place after it was sent is not seen
    (the loop's request digests, computed when a message is added, assume the same).
    """

    def __init__(self) -> None:
        self._sources: list[dict] = []  # the messages converted, in order
        self._wire: list[dict] = []  # their wire forms
        self._tokens: list[int] = []  # each one's share of the prompt estimate
        self._added: list[dict[Any, Any]] = []  # the malformed calls each one added
        self._unparsed: dict[Any, Any] = {}  # the malformed calls of all of them, for the results that follow
        self.tokens = 0  # the prompt estimate of the messages (estimate_prompt_tokens, without tools)
        self.converted = 0  # messages converted since the start, counted again when converted again

    def update(self, messages: list[dict]) -> list[dict]:
        """The wire form of `messages`, converting only those not converted before."""
        messages = messages if isinstance(messages, list) else list(messages)
        kept = self._common_prefix(messages)
        if kept < len(self._sources):
            self._forget_from(kept)
        for message in messages[kept:]:
            wire, added = _wire_form(message, self._unparsed)
            self._unparsed.update(added)
            tokens = _message_tokens(wire)
            self._sources.append(message)
            self._wire.append(wire)
            self._tokens.append(tokens)
            self._added.append(added)
            self.tokens += tokens
            self.converted += 1
        return list(self._wire)  # the caller's own list: the next update does not change a request in flight

    def _common_prefix(self, messages: list[dict]) -> int:
        """How many of the converted messages `messages` still begins with."""
        n = min(len(messages), len(self._sources))
        # List equality compares identity first, element by element, in C: the usual case (the same
        # messages, one more turn appended) costs a few nanoseconds a message. A message equal to the
        # one converted has the same wire form, so equality is enough.
        if messages[:n] == self._sources[:n]:
            return n
        return next((i for i in range(n) if messages[i] != self._sources[i]), n)

    def _forget_from(self, index: int) -> None:
        """Drop the messages from `index` on, and the malformed calls they added."""
        for kept in (self._sources, self._wire, self._tokens, self._added):
            del kept[index:]
        self.tokens = sum(self._tokens)
        self._unparsed = {}
        for added in self._added:
            self._unparsed.update(added)


def _message_tokens(message: dict) -> int:
    """A wire message's share of the prompt estimate: its text and calls, and what a template adds."""
    content = message.get("content")
    parts = [content or ""] if isinstance(content, str) else [json.dumps(content, ensure_ascii=False, default=str)]
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        parts.append(f"{function.get('name', '')}{function.get('arguments', '')}")
    return estimate_tokens("".join(str(p) for p in parts)) + MESSAGE_OVERHEAD_TOKENS


def estimate_prompt_tokens(wire: list[dict], tools: list[dict] | None) -> int:
    """An estimate of a request's prompt: every message's text and calls, and the tools' schemas."""
    total = estimate_tokens(json.dumps(tools, ensure_ascii=False)) if tools else 0
    return total + sum(_message_tokens(message) for message in wire)


# --------------------------------------------------------------------------- reading servers' answers


def _context_of(props: Any) -> int | None:
    """n_ctx from llama.cpp's /props (under default_generation_settings, or at the top in older builds)."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    for where in (settings, props):
        if isinstance(where, dict) and isinstance(where.get("n_ctx"), int) and where["n_ctx"] > 0:
            return where["n_ctx"]
    return None


_CONTEXT_WORDS = re.compile(r"exceeds? the available context size|maximum context length|context length exceeded"
                            r"|context window|too many tokens", re.I)


def _context_overflow(exc: Any) -> str | None:
    """For an answer that says the request is longer than the server's context: what to say about it."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else {}
    error = error if isinstance(error, dict) else {}
    message = _server_message(exc)
    if error.get("type") != "exceed_context_size_error" and not _CONTEXT_WORDS.search(message):
        return None
    asked, holds = error.get("n_prompt_tokens"), error.get("n_ctx")
    sizes = f" ({asked} tokens; its context holds {holds})" if isinstance(asked, int) and isinstance(holds, int) else ""
    return (f"refused the request ({exc.status_code}) as longer than its context{sizes}: {_first_line(message)}; "
            f"start the server with a larger context (llama.cpp: --ctx-size) or give the goal fewer turns")


def _cannot_stream_tool_calls(exc: BaseException) -> bool:
    """The server's way of saying it can answer with tool calls, but not streamed
    (llama-cpp-python: "Automatic streaming tool choice is not supported")."""
    message = _server_message(exc).lower()
    return "stream" in message and "tool" in message and bool(
        re.search(r"not supported|unsupported|not implemented|cannot|can't|not available", message))


def _server_message(exc: Any) -> str:
    """The server's own words: its error's message, a validation error's first item, or the body."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        detail = body.get("detail")
        if isinstance(detail, str):
            return detail
        if isinstance(detail, list) and detail and isinstance(detail[0], dict):  # FastAPI's validation errors
            first = detail[0]
            where = ".".join(str(p) for p in first.get("loc") or [])
            more = f" (and {len(detail) - 1} more)" if len(detail) > 1 else ""
            return f"{where}: {first.get('msg', '')}{more}"
    if isinstance(body, str) and body.strip():
        return body
    return str(getattr(exc, "message", exc))


def _first_line(text: str, limit: int = 300) -> str:
    """A message's first line that says something, bounded: what the terminal shows."""
    line = next((line.strip() for line in str(text).splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[:limit] + "..."


def _body_text(exc: Any) -> str | None:
    """A failed answer's whole body, bounded, for the transcript."""
    response = getattr(exc, "response", None)
    text = None
    if response is not None:
        try:
            text = response.text
        except Exception:  # noqa: BLE001 - a body already closed: the parsed one below
            text = None
    if not text:
        body = getattr(exc, "body", None)
        if body is None:
            return None
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
    return text[:ERROR_BODY_LIMIT]


def _streamed_name(so_far: str, piece: str) -> str:
    """A streamed call's function name: OpenAI sends it once, in pieces appended here; llama-cpp-python's
    server sends the whole name again in every chunk, which must not be appended to itself."""
    if not piece or piece == so_far:
        return so_far
    if so_far and piece.startswith(so_far):  # the whole name so far, repeated and extended
        return piece
    return so_far + piece
