"""Errors every floor above may catch without importing what raises them."""

import signal


class SessionConfigError(Exception):
    """Configuration that cannot work: a one-line message; the command exits 2."""


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
