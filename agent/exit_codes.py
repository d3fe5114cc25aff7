"""What a session's end means as an exit status: one enum, used by the core and by every command."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0  # goal met / replay identical / transcript intact
    FAILED = 1  # goal not met, a step failed, or replay differs
    USAGE = 2  # usage or configuration error
    REFUSED = 3  # a needed step was refused by the safety layer
    BUDGET = 4  # budget exhausted
    MODEL = 5  # the model server failed or stopped answering
    RECORD = 6  # the transcript could not be written (disk full, not writable)
    HANGUP = 129  # SIGHUP: the terminal or the SSH session went away
    INTERRUPTED = 130  # Ctrl-C
    TERMINATED = 143  # SIGTERM: timeout, systemd or a cancelled CI job stopped it
