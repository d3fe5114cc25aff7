"""Rendering session events for people: a rich terminal view, plain lines, and JSON lines for programs.

The loop never prints; these are listeners on its events. Listeners are called from the
loop's thread and from tool threads (live output) at the same time, so every view here is
thread-safe and does little per event: live output only updates a small buffer, which a
refresh thread draws a few times a second.

The two chat views (`TerminalView`, `PlainView`) share one small surface that app/chat.py
uses: the listener itself, `busy()` / `paused()` around work and prompts, `working()` around a
slow start (a simulated host being built), `info`, `warn`, `card`, `table` and `read_line`
(which ends the prompt's line itself on Ctrl-C or Ctrl-D, so what is drawn next starts on a
line of its own). `make_view` picks one of them.

Everything they print is redacted: recorded events by the transcript writer, the rest (live
output, the model's streamed text, progress, the chat's own lines) by the view itself, with the
same redactor (agent/record/redact.py).

The modules: common.py (what both views show: approval rows, progress, output tails),
results.py (a finished call's result as the labelled facts that matter), plain.py (`PlainPrinter`,
`PlainView`, `JsonLines`, `LiveOutput`), terminal.py (`TerminalView`: its state, the Live region and
the locks), format.py (the terminal's styles and pure renderers) and usage.py (a chat's token
totals and their cost).
"""

from __future__ import annotations

import sys
from typing import IO

from rich.console import Console

from agent.record.redact import Redactor
from app.ui.common import (
    VERBOSITIES,
    OutputTail,
    approval_rows,
    progress_label,
    progress_numbers,
    set_default_verbosity,
)
from app.ui.plain import JsonLines, LiveOutput, PlainPrinter, PlainView
from app.ui.terminal import TerminalView

__all__ = ["JsonLines", "LiveOutput", "OutputTail", "PlainPrinter", "PlainView", "TerminalView", "VERBOSITIES",
           "approval_rows", "make_view", "progress_label", "progress_numbers", "set_default_verbosity"]


def make_view(plain: bool = False, out: IO[str] | None = None, inp: IO[str] | None = None,
              use_readline_markers: bool = False, redactor: Redactor | None = None,
              verbosity: str | None = None) -> TerminalView | PlainView:
    """The rich terminal view, or plain lines when output is not a terminal, TERM=dumb, or asked for.

    `redactor` is the session's (its transcript writer's), when the caller has it; otherwise one
    with the same rules and the secrets of this process's environment. `verbosity` is quiet, normal
    or verbose (app/ui/common.py); without it, what --quiet or --verbose set for this process.
    """
    console = Console(file=out) if out is not None else Console()
    redactor = redactor or Redactor()
    if plain or not console.is_terminal or console.is_dumb_terminal:
        return PlainView(out=out or sys.stdout, inp=inp, redactor=redactor, verbosity=verbosity)
    return TerminalView(console, use_readline_markers=use_readline_markers, redactor=redactor, verbosity=verbosity)
