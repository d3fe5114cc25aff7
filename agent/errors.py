"""Errors every floor above may catch without importing what raises them."""

import signal


class SessionConfigError(Exception):
    """Configuration that cannot work: a one-line message; the command exits 2."""


class RecordWriteError(Exception):
    """The transcript (or an artifact beside it) could not be written: a one-line message that says
    what to do; the command exits 6 and runs nothing more, since a step it cannot record must not run."""


class Signalled(KeyboardInterrupt):
    """A termination signal (SIGTERM, SIGHUP) taken the way Ctrl-C is: the running commands are
    stopped on their hosts and the transcript is closed, naming the signal."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(self.reason)

    @property
    def reason(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


def interruption_reason(error: BaseException) -> str:
    """What ended the session, for its end event: the signal's name, or Ctrl-C."""
    return error.reason if isinstance(error, Signalled) else "interrupted by the operator"
