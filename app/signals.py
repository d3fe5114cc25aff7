"""Signals: SIGTERM and SIGHUP stop a command as Ctrl-C does, and no signal lands where it would leave a thing
half made.

The first SIGTERM or SIGHUP raises Signalled (a KeyboardInterrupt), so that every session closes its
transcript as on Ctrl-C; the process's exit code then says which signal stopped it.
"""

from __future__ import annotations

import os
import signal
import threading

from agent.errors import Signalled
from app.exit_codes import ExitCode


def install() -> None:
    """This process's handlers: SIGTERM and SIGHUP as Ctrl-C; Ctrl-C put off where it would leave a thing half
    made (an ignored SIGINT stays ignored)."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_termination)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_interrupt)


# The first SIGTERM or SIGHUP stops the command the way Ctrl-C does (Signalled is a KeyboardInterrupt);
# later ones are only counted, so that stopping the running commands and closing the transcript
# is not cut short by the same signal sent again (a SIGKILL after a grace period still ends it).
_SIGNALLED: list[int] = []


def _on_termination(signum: int, frame) -> None:
    if _SIGNALLED:
        _SIGNALLED.append(signum)
        return
    if _deferred(signum, frame):
        return
    _SIGNALLED.append(signum)
    raise Signalled(signum)


# Where raising an interrupt would leave something half made: an import (an extension module half
# initialised: pydantic_core panics instead of stopping), pydantic building a schema lazily (the SDK's types on
# first use: a SchemaError, not an interrupt), subprocess.Popen after its fork (a started command that no one
# holds and no cancel reaches).
_PYDANTIC_DIRS = tuple(f"{os.sep}{name}{os.sep}" for name in ("pydantic", "pydantic_core"))


def _half_made(filename: str) -> bool:
    return (filename.startswith("<frozen importlib") or any(d in filename for d in _PYDANTIC_DIRS)
            or filename.endswith(f"{os.sep}subprocess.py"))


def _in_half_made(frame) -> bool:
    while frame is not None:
        if _half_made(frame.f_code.co_filename):
            return True
        frame = frame.f_back
    return False


def _deferred(signum: int, frame) -> bool:
    """Whether the signal is put off: in one of those places it comes again 20 ms later, once that is over."""
    if not _in_half_made(frame):
        return False
    again = threading.Timer(0.02, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()
    return True


def exit_code_after_signal(code: int) -> int:
    """The command's exit code, or the code of the signal that stopped it."""
    if not _SIGNALLED:
        return code
    return ExitCode.TERMINATED if _SIGNALLED[0] == signal.SIGTERM else ExitCode.HANGUP


def _on_interrupt(signum: int, frame) -> None:
    """Ctrl-C as Python's own handler takes it (KeyboardInterrupt), except where it is put off (_deferred)."""
    if not _deferred(signum, frame):
        raise KeyboardInterrupt
