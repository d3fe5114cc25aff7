"""Models that play turns written beforehand: for tests, benchmarks and replays."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from agent.model.protocol import AssistantTurn, ModelError, ToolCall, Usage


def turn(text: str = "", calls: Iterable[tuple[str, Any]] = (), usage: tuple[int, int] = (0, 0),
         finish: str | None = None) -> AssistantTurn:
    """Build an assistant turn: `turn("done")`, `turn(calls=[("ssh_exec", {...}), ...])`.

    Arguments may be a dict (encoded as JSON) or a raw string (sent as is, e.g. malformed JSON).
    `finish` is the server's finish reason ("length": cut off at its token limit); by default the
    one a complete turn has.
    """
    tool_calls = [
        ToolCall(id=f"call_{i}", name=name, arguments=args if isinstance(args, str) else json.dumps(args))
        for i, (name, args) in enumerate(calls)
    ]
    return AssistantTurn(text=text, tool_calls=tool_calls, usage=Usage(*usage),
                         finish_reason=finish or ("tool_calls" if tool_calls else "stop"))


class ScriptedModel:
    """A model that plays a list of turns, or asks a function of the messages for each turn.

    `ScriptedModel([turn(calls=[...]), turn("done")])` or `ScriptedModel(lambda messages: turn(...))`.
    Running out of turns is a ModelError, so a test notices a loop that asks too often.
    """

    def __init__(self, script: list[AssistantTurn] | Callable[[list[dict]], AssistantTurn], name: str = "scripted",
                 description: str | None = None):
        self.name = name
        self.description = description
        self._fn = script if callable(script) else None
        self._turns = list(script) if not callable(script) else []
        self._i = 0
        self.requests: list[list[dict]] = []

    def complete(self, messages, tools, on_text=None) -> AssistantTurn:
        self.requests.append(messages)
        if self._fn is not None:
            t = self._fn(messages)
        else:
            if self._i >= len(self._turns):
                raise ModelError(f"scripted model has no turn {self._i + 1} (script has {len(self._turns)})")
            t = self._turns[self._i]
            self._i += 1
        if on_text and t.text:
            on_text(t.text)
        return t
