"""Which handler judges which program: families register here, the analysis looks up here."""

from __future__ import annotations

import re
import sys
from typing import Callable

from agent.safety.classifier.command import MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import REMOTE, RUN_TIME_WORD, Parsed, Spec
from agent.safety.classifier.paths import normalize, pattern_read_risk, read_risk
from tools.base import RiskClass

# --------------------------------------------------------------------------- handlers

_Handler = Callable[[Analysis, _Cmd], None]
class _Handlers(dict):
    """Program name -> handler. A name is registered by one family only: which family judges a
    program must not depend on the order the families happen to be imported in. (The same family
    registering it again is a module imported a second time, after an interrupt cut the first short.)"""

    def __init__(self) -> None:
        super().__init__()
        self.families: dict[str, str] = {}

    def __setitem__(self, name: str, handler: _Handler) -> None:
        family = _registering_module()
        if name in self and self.families[name] != family:
            raise ValueError(f"two families register `{name}`: {self.families[name]} and {family}")
        self.families[name] = family
        super().__setitem__(name, handler)


def _registering_module() -> str:
    """The module that registers a handler: the first caller outside this one."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame.f_globals.get("__name__", "?") if frame is not None else "?"


_HANDLERS: dict[str, _Handler] = _Handlers()


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


# --------------------------------------------------------------------------- programs judged by their specs

OperandCheck = Callable[[Analysis, _Cmd, Parsed], bool]


def judge_by_spec(an: Analysis, cmd: _Cmd, spec: Spec, operands: OperandCheck | None = None,
                  label: str | None = None) -> Parsed | None:
    """Read cmd's options with spec; record what is not read-only, or allow the command.

    operands may look at what the options left (a subcommand, the files named) and record its own
    findings, returning False when the command is not read-only. Returns the parse when the
    options were read-only, for callers that go on from there."""
    parsed = spec.parse(cmd.args)
    shown = label or cmd.prog
    if parsed.unknown and all(u == RUN_TIME_WORD for u in parsed.unknown):
        return None  # a word known only at run time: the analysis has already said why (an expansion)
    parsed.unknown[:] = [u for u in parsed.unknown if u != RUN_TIME_WORD]
    if parsed.unknown:
        an.add(MUTATING, f"{cmd.prog}:unknown-option",
               f"`{shown}` with `{parsed.unknown[0]}`: an option the classifier's spec of `{cmd.prog}` does not list "
               f"(or a prefix of more than one), so what it does cannot be told")
        return None
    worst = None
    for used in parsed.effects:
        effect = spec.effects[used.option.effect or ""]
        if worst is None or effect.cls.rank > worst[0].cls.rank:
            worst = (effect, used)
    if worst is not None:
        effect, used = worst
        meaning = "" if used.written == used.option.shown else f" (`{used.option.shown}`)"
        # An effect named "remote" makes the program act on another host: the gate keeps it out of scope.
        reaches = (used.value.text or used.option.shown) if used.value is not None else used.option.shown
        an.add(effect.cls, f"{cmd.prog}:{used.option.shown}", f"`{shown} {used.written}`{meaning} {effect.what}",
               reaches=reaches if used.option.effect == REMOTE else None)
        return None
    if spec.files and not files_read_ok(an, cmd.prog, parsed.operands, shown):
        return None
    if spec.files and not _bounded_reads(an, cmd, parsed, shown):
        return None
    if operands is not None and not operands(an, cmd, parsed):
        # the check said why, as a rule of its own; this one only makes sure something is said
        an.add(MUTATING, f"{cmd.prog}:operands", f"`{shown}` with these operands is not read-only", structural=True)
        return None
    an.allow(cmd, label, check_globs=not spec.read_only_options)
    return parsed


# Devices that never reach the end of the file: a reader that reads to the end runs forever.
_ENDLESS = frozenset({"/dev/zero", "/dev/urandom", "/dev/random", "/dev/full"})
# The options that bound how much a reader takes (`head -c 64 /dev/urandom`, `od -N 16`).
_BOUNDING = {"head": ("--bytes",), "od": ("--read-bytes",)}


def _bounded_reads(an: Analysis, cmd: _Cmd, parsed: Parsed, shown: str) -> bool:
    if any(parsed.values(name) for name in _BOUNDING.get(cmd.prog, ())):
        return True
    endless = next((a.text for a in parsed.operands if not a.pattern and normalize(a.text or "", an.cwd) in _ENDLESS),
                   None)
    if endless is None:
        return True
    an.add(MUTATING, f"{cmd.prog}:unbounded", f"`{shown}` reads `{endless}` to its end, which it never reaches; "
                                              f"read a bounded amount with `head -c N {endless}`")
    return False


def files_read_ok(an: Analysis, prog: str, files: list[Arg], shown: str | None = None) -> bool:
    """Files a command opens for reading (its operands, an option's value): none whose reading has an
    effect (/dev/watchdog, /proc/kmsg, a glob that may name them). Records why when one does."""
    for arg in files:
        problem = pattern_read_risk(arg.text, an.cwd) if arg.pattern else read_risk(arg.text, an.cwd)
        if problem is not None:
            an.add(problem[0], f"{prog}:{problem[1]}", f"`{shown or prog}` opens what it should not: {problem[2]}")
            return False
    return True


def specified(spec: Spec, operands: OperandCheck | None = None, label: str | None = None) -> _Handler:
    """A handler that judges its program by spec (and operands)."""

    def handler(an: Analysis, cmd: _Cmd) -> None:
        judge_by_spec(an, cmd, spec, operands, label)

    return handler


def _register_specs(*specs: Spec, operands: OperandCheck | None = None) -> None:
    for spec in specs:
        for name in spec.aliases:
            _HANDLERS[name] = specified(spec, operands)
