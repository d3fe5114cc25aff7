"""The OpenAI-compatible client: chat completions through the `openai` SDK.

It speaks to any compatible server (OpenAI, vLLM, SGLang, llama.cpp, Ollama). There is exactly
one retry layer, tenacity, with the SDK's own retries off, so a rate limit is never retried twice over.
"""

from __future__ import annotations

import email.utils
import os
import time
from typing import Any, Callable

import tenacity

from agent.model.protocol import AssistantTurn, ModelError, ToolCall, Usage


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


def _is_retryable(exc: BaseException) -> bool:
    import httpx
    import openai

    if isinstance(exc, (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError,
                        openai.APITimeoutError, httpx.TransportError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


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
    """Chat completions over the `openai` SDK, streamed, with parallel tool calls on."""

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
                "(for a local server such as vLLM, SGLang, llama.cpp or Ollama)"
            )
        self.name = model
        self.base_url = base_url or "https://api.openai.com/v1"
        # Local servers usually need no key, but the SDK insists on one.
        self._client = openai.OpenAI(api_key=api_key or "not-needed", base_url=base_url, max_retries=0,
                                     timeout=timeout_s)
        self._max_attempts = max_attempts
        self._wait = _WaitRetryAfter(backoff_initial_s, backoff_max_s)
        self._on_retry = on_retry

    def complete(self, messages, tools, on_text=None) -> AssistantTurn:
        attempts = 0

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if self._on_retry and state.outcome is not None:
                self._on_retry(state.attempt_number, state.outcome.exception(), state.upcoming_sleep)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._max_attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception(_is_retryable),
            before_sleep=before_sleep,
            reraise=True,
        )
        start = time.monotonic()
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    turn = self._once(messages, tools, on_text)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one readable line
            raise ModelError(self._explain(exc, attempts)) from exc
        turn.latency_s = time.monotonic() - start
        turn.attempts = attempts
        return turn

    def _once(self, messages, tools, on_text) -> AssistantTurn:
        kwargs: dict[str, Any] = {"model": self.name, "messages": messages, "stream": True,
                                  "stream_options": {"include_usage": True}}
        if tools:
            kwargs["tools"] = tools
            kwargs["parallel_tool_calls"] = True
        stream = self._client.chat.completions.create(**kwargs)
        text: list[str] = []
        calls: dict[int, dict] = {}
        usage = Usage()
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
                            slot["name"] += tc.function.name or ""
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

    def _explain(self, exc: BaseException, attempts: int) -> str:
        import openai

        where = f"model server {self.base_url}"
        if isinstance(exc, openai.AuthenticationError):
            return f"{where} refused the API key (401): set OPENAI_API_KEY to a valid key for this server"
        if isinstance(exc, openai.PermissionDeniedError):
            return f"{where} denied access (403): {_server_message(exc)}"
        if isinstance(exc, openai.NotFoundError):
            return f"{where} answered 404 for model {self.name!r}: {_server_message(exc)}; check --model and --base-url"
        if isinstance(exc, openai.APIStatusError):
            msg = _server_message(exc)
            if exc.status_code < 500 and exc.status_code != 429:
                hint = ""
                if "tool" in msg.lower():
                    hint = " (the server may not support tool calls for this model: enable them, e.g. vLLM's --enable-auto-tool-choice)"
                return f"{where} rejected the request ({exc.status_code}): {msg}{hint}"
            return f"{where} kept failing ({exc.status_code}: {msg}) after {attempts} attempts; try again later"
        if isinstance(exc, openai.APITimeoutError):
            return f"{where} did not answer in time after {attempts} attempts; check the server or raise --model-timeout"
        if isinstance(exc, openai.APIConnectionError):
            return f"cannot reach {where} after {attempts} attempts: check --base-url / OPENAI_BASE_URL and that the server is running"
        return f"{where} failed after {attempts} attempts: {type(exc).__name__}: {exc}"


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", exc))


# --------------------------------------------------------------------------- test models
