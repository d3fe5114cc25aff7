"""What the `agent` command's exit status means, in words: the enum lives in agent/exit_codes.py."""

from __future__ import annotations

import sys

from agent.exit_codes import ExitCode  # noqa: F401  (the one enum, defined where the core can use it)

# What each code means, in the words the end of a run prints.
MEANINGS = {ExitCode.OK: "goal met", ExitCode.FAILED: "goal not met or a step failed",
            ExitCode.USAGE: "usage or configuration error", ExitCode.REFUSED: "a needed step was refused by the safety layer",
            ExitCode.BUDGET: "budget exhausted",
            ExitCode.MODEL: "the model server failed or stopped answering",
            ExitCode.RECORD: "the transcript could not be written", ExitCode.INTERRUPTED: "interrupted",
            ExitCode.HANGUP: "stopped by SIGHUP", ExitCode.TERMINATED: "stopped by SIGTERM"}

EXIT_CODES_HELP = """exit codes:
  0    goal met, or every step ran with no checks to prove it (run); identical (replay); intact (show --verify)
  1    goal not met: a check or a step failed, nothing ran, a reply was cut off; replay differs; damaged
  2    usage or configuration error (bad goal file, no model endpoint, a host unreachable or its key unknown)
  3    a needed step was refused by the safety layer
  4    budget exhausted (turns, tokens or minutes)
  5    the model server failed or stopped answering (its error is in the transcript)
  6    the transcript could not be written (disk full, not writable): nothing more was run
  129  stopped by SIGHUP (the terminal or SSH session went away)
  130  interrupted (Ctrl-C)
  143  stopped by SIGTERM (timeout, systemd, a cancelled CI job)
  After a signal, running commands are stopped on their hosts and the transcript is closed, naming it.
"""

# A chat has no goal to meet: it ends when the operator leaves, and its status says only whether that went well.
CHAT_EXIT_CODES_HELP = """exit codes:
  0    the operator left (/quit, Ctrl-D, Ctrl-C at the prompt): the session's end and report are written
  2    usage or configuration error (no model endpoint, a bad --host or settings file); an unreachable host is
       said at the start and the chat goes on
  6    the transcript or its report could not be written (disk full, not writable)
  129  stopped by SIGHUP (the terminal or SSH session went away)
  130  interrupted (Ctrl-C) before the session started
  143  stopped by SIGTERM
  However it ends, running commands are stopped on their hosts and the transcript is closed; `agent resume`
  goes on with it.
"""

# `agent classify` answers with its status, as grep and test do, so that a script can branch on it.
# The numbers keep their meaning above: 1 "not the good outcome", 3 "refused by the safety layer".
CLASSIFY_EXIT_CODES = {"read-only": ExitCode.OK, "mutating": ExitCode.FAILED, "destructive": ExitCode.FAILED,
                       "forbidden": ExitCode.REFUSED}

CLASSIFY_EXIT_CODES_HELP = """exit codes:
  0    read-only: runs at once, without a backup or an approval
  1    mutating or destructive: a change; it needs a verified backup and an approval (or a goal file rule)
  2    usage error
  3    forbidden: the safety layer refuses it, whatever is approved
  With commands on stdin, the status is the riskiest command's.
"""


def fail(message: str, code: int = ExitCode.USAGE) -> int:
    """A command that cannot go on: one line on stderr, and its exit code."""
    print(f"agent: {message}", file=sys.stderr)
    return code
