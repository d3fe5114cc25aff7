"""The model protocol the loop talks to: a turn in, tool calls and text out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

# Finish reasons of a reply the server cut short at its limit of generated tokens: never a final answer.
CUT_OFF_REASONS = frozenset({"length", "max_tokens"})

# Tokens are counted this way when the server reports none: about four bytes of text a token, which is
# what BPE tokenizers average on English and code. It is an estimate and is always labelled as one.
BYTES_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """An estimate of the tokens in `text`, from its size alone (no tokenizer, no network)."""
    size = len(text.encode("utf-8", "replace"))
    return (size + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; validated by the loop

    def to_message(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # the server reported none: counted from the text's size

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict:
        counts = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                  "total_tokens": self.total_tokens}
        return {**counts, "estimated": True} if self.estimated else counts


@dataclass
class AssistantTurn:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    finish_reason: str | None = None
    attempts: int = 1
    notes: list[str] = field(default_factory=list)  # what the client learned about the server on this turn

    @property
    def cut_off(self) -> bool:
        """The server stopped the reply at its token limit: the text or the last call may be incomplete."""
        return self.finish_reason in CUT_OFF_REASONS

    def to_message(self) -> dict:
        # The session's own form of the turn (the request digests are computed over it); each client
        # sends it in the form its server accepts.
        msg: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_message() for c in self.tool_calls]
        return msg


class ModelError(Exception):
    """The model could not answer. The message is one line that says which setting to fix.

    `kind` says what failed: "config" (no endpoint, a key or model the server refuses), "rejected"
    (the server refused this request), "context" (the request is longer than the server's context),
    "server" (the server kept failing), "unreachable" (no answer at all: connection refused or reset,
    timeouts), "stopped" (the same, from a server that answered earlier in the session).
    `body` is the server's whole answer, for the transcript.
    """

    def __init__(self, message: str, kind: str = "", body: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.body = body


TextListener = Callable[[str], None]


class Model(Protocol):
    name: str

    def complete(self, messages: list[dict], tools: list[dict], on_text: TextListener | None = None) -> AssistantTurn:
        ...
