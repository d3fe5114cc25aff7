"""Which handler judges which program: families register here, the analysis looks up here."""

from __future__ import annotations

import re
from typing import Callable

from agent.safety.classifier.command import Analysis, _Cmd
from tools.base import RiskClass

# --------------------------------------------------------------------------- handlers

_Handler = Callable[[Analysis, _Cmd], None]
_HANDLERS: dict[str, _Handler] = {}


def _handles(*names: str) -> Callable[[_Handler], _Handler]:
    def register(function: _Handler) -> _Handler:
        for name in names:
            _HANDLERS[name] = function
        return function

    return register


def _checked(check: Callable[[_Cmd], tuple[RiskClass, str, str] | None]) -> _Handler:
    """A handler from a check that returns None (read-only) or (class, rule, reason)."""

    def handler(an: Analysis, cmd: _Cmd) -> None:
        problem = check(cmd)
        if problem is None:
            an.allow(cmd)
        else:
            an.add(*problem)

    return handler


def _simple(cls: RiskClass, reason: str) -> _Handler:
    def handler(an: Analysis, cmd: _Cmd) -> None:
        an.add(cls, f"{cls.value}:{cmd.prog}", reason.format(prog=cmd.prog))

    return handler


def _handles_matching(pattern: str) -> Callable[[_Handler], _Handler]:
    """Registers a handler for every program name the pattern matches in full (`python3.12`, `pip3`),
    consulted when no handler is registered for the exact name."""

    def register(function: _Handler) -> _Handler:
        _PATTERNS.append((re.compile(pattern), function))
        return function

    return register


_PATTERNS: list[tuple[re.Pattern[str], _Handler]] = []


def _handler_for(prog: str) -> _Handler | None:
    handler = _HANDLERS.get(prog)
    if handler is not None:
        return handler
    return next((function for pattern, function in _PATTERNS if pattern.fullmatch(prog)), None)
