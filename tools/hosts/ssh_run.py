"""One command on one SSH channel: drain both streams, enforce timeout and cancel, collect the outcome.

Killing a command: the remote script first reports its process group (sshd starts every
session as a session leader, so the group is the command and everything it started); a
timeout or cancel then has the host (SSHHost._kill_group) send TERM, and KILL after a grace
period, to that group over a second channel. Closing our end of a channel alone would leave
the process running.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Protocol

import paramiko

from tools.hosts.base import CommandResult, HostError, OutputListener, sudo_hint

READ_CHUNK = 65536
KILL_GRACE_S = 2.0  # between TERM and KILL of a timed-out or cancelled command
DRAIN_AFTER_KILL_S = 5.0  # how long to collect the last output of a killed command

# Runs first in the remote bash: report the process group on stderr (stripped again by us),
# and make a bare `sudo` non-interactive so it fails instead of waiting for a password.
# The group is reported only when it is the session's own (group id = session id, as sshd's
# setsid leaves it), so a kill can never reach a group shared with anything outside the command.
_PGID_MARK = re.compile(rb"\x1eupgrade-agent pgid (\d+)\x1e\r?\n")
_PROLOGUE = (
    "read -r _ _ _ _ __ua_pg __ua_sid _ </proc/$$/stat 2>/dev/null && [ \"$__ua_pg\" = \"$__ua_sid\" ]"
    " && printf '\\036upgrade-agent pgid %s\\036\\n' \"$__ua_pg\" >&2; unset __ua_pg __ua_sid\n"
    'sudo() { command sudo -n "$@"; }\n'
)


class _RunHost(Protocol):
    """What a run needs of its host (SSHHost): its name, forgetting a dead connection, the kill."""

    name: str

    def _drop(self, transport: paramiko.Transport) -> None: ...

    def _kill_group(self, transport: paramiko.Transport, pgid: int) -> bool: ...


class _RemoteRun:
    """One command on one channel: drain both streams, enforce timeout and cancel, collect the outcome."""

    def __init__(self, host: _RunHost, transport: paramiko.Transport, chan: paramiko.Channel,
                 on_output: OutputListener | None, pty: bool):
        self.host = host
        self.transport = transport
        self.chan = chan
        self.on_output = on_output
        self.data = {"stdout": bytearray(), "stderr": bytearray()}
        # The stream that carries the process-group line (with a pty, stderr is merged into stdout);
        # its output is held back until the line is found, so the line never reaches anyone.
        self.mark_stream = "stdout" if pty else "stderr"
        self.pending: bytearray | None = bytearray()
        self.pgid: int | None = None
        self.kill_thread: threading.Thread | None = None
        self.kill_confirmed = False
        # Set by paramiko when either stream gets data or closes. We are its only reader and look
        # at both streams before every wait, so one stream clearing it on a read loses nothing.
        # (Channel.fileno() would do the same through an OS pipe, at a syscall per packet.)
        self.ready = threading.Event()
        chan.in_buffer.set_event(self.ready)
        chan.in_stderr_buffer.set_event(self.ready)

    def execute(self, line, command, *, timeout, cancel, stdin, pty, start) -> tuple[CommandResult, bytes]:
        chan = self.chan
        try:
            if pty:
                chan.get_pty(term="dumb", width=200, height=50)
            chan.exec_command(line)
        except (paramiko.SSHException, EOFError, OSError) as e:
            chan.close()
            if _settled_dead(self.transport):
                self.host._drop(self.transport)
                return self._lost(command, start), b""
            raise HostError(f"{self.host.name}: the server refused to run the command: {e}") from None
        if stdin is None:
            _shutdown_write(chan)  # like </dev/null: a command that reads stdin sees EOF at once
        else:
            threading.Thread(target=_send_stdin, args=(chan, stdin), daemon=True).start()

        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = cancelled = False
        give_up_at = None
        try:
            while True:
                if self._read_available():
                    continue
                if chan.closed or (chan.eof_received and chan.exit_status_ready()):
                    if not self._read_available():
                        break
                    continue
                now = time.monotonic()
                if give_up_at is None:
                    if deadline is not None and now >= deadline:
                        timed_out = True
                    elif cancel is not None and cancel.is_set():
                        cancelled = True
                    if timed_out or cancelled:
                        self._start_kill()
                        give_up_at = now + KILL_GRACE_S + DRAIN_AFTER_KILL_S
                elif now >= give_up_at:
                    break
                wait = 0.1 if deadline is None or give_up_at is not None else max(0.0, min(0.1, deadline - now))
                if chan.eof_received:
                    chan.status_event.wait(wait)  # no more output to wait for; wait for the exit status
                else:
                    self.ready.wait(wait)
        except BaseException:
            # Ctrl-C (or anything else) while waiting: the remote command must not outlive us.
            self.on_output = None
            give_up = time.monotonic() + 2
            while self.pgid is None and self.pending is not None and time.monotonic() < give_up:
                if not self._read_available():  # its process group is announced first thing on stderr
                    self.ready.wait(0.05)
            if self.pgid is not None:
                self.host._kill_group(self.transport, self.pgid)
            chan.close()
            raise
        self._flush_pending()
        chan.close()
        if self.kill_thread is not None:
            self.kill_thread.join(KILL_GRACE_S + 1)

        killed = timed_out or cancelled
        got_status = chan.status_event.is_set() and chan.exit_status != -1
        lost = not got_status and not killed and _settled_dead(self.transport)
        if lost:
            self.host._drop(self.transport)
        stdout = self.data["stdout"].decode("utf-8", "replace")
        stderr = self.data["stderr"].decode("utf-8", "replace")
        if lost:
            hint = _LOST_HINT
        elif killed and not self.kill_confirmed:
            hint = ("the remote process could not be confirmed killed (it reported no process group, or the kill "
                    "found no channel); it may still be running on the host: check with ps before running it again")
        elif not got_status and not killed:
            hint = "the command ended without an exit status (was its shell killed by a signal?)"
        else:
            hint = sudo_hint(stderr)
        return CommandResult(
            command=command,
            exit_code=chan.exit_status if got_status and not killed else None,
            stdout=stdout,
            stderr=stderr,
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            connection_lost=lost,
            cancelled=cancelled,
            hint=hint,
        ), bytes(self.data["stdout"])

    def _start_kill(self) -> None:
        """Kill the remote process group over a second channel, while this one keeps draining."""
        if self.pgid is None:
            return

        def kill():
            self.kill_confirmed = self.host._kill_group(self.transport, self.pgid)

        self.kill_thread = threading.Thread(target=kill, daemon=True, name=f"kill-{self.host.name}-{self.pgid}")
        self.kill_thread.start()

    def _read_available(self) -> bool:
        chan, got = self.chan, False
        if chan.recv_ready():
            data = chan.recv(READ_CHUNK)
            if data:
                self._received("stdout", data)
                got = True
        if chan.recv_stderr_ready():
            data = chan.recv_stderr(READ_CHUNK)
            if data:
                self._received("stderr", data)
                got = True
        return got

    def _received(self, stream: str, data: bytes) -> None:
        if stream != self.mark_stream or self.pending is None:
            self._emit(stream, data)
            return
        self.pending += data
        m = _PGID_MARK.search(self.pending)
        if m:
            pgid = int(m.group(1))
            self.pgid = pgid if pgid > 1 else None  # `kill -- -1` would mean every process we may signal
            rest = bytes(self.pending[: m.start()] + self.pending[m.end():])
            self.pending = None
            if rest:
                self._emit(stream, rest)
        elif len(self.pending) > 65536:
            self._flush_pending()  # no line in sight: the remote shell is not one we can kill by group

    def _flush_pending(self) -> None:
        data, self.pending = self.pending, None
        if data:
            self._emit(self.mark_stream, bytes(data))

    def _emit(self, stream: str, data: bytes) -> None:
        self.data[stream] += data
        if self.on_output is not None:
            self.on_output(stream, data)

    def _lost(self, command: str, start: float) -> CommandResult:
        return CommandResult(command, None, "", "", time.monotonic() - start, connection_lost=True, hint=_LOST_HINT)


def _settled_dead(transport: paramiko.Transport) -> bool:
    """Whether the connection is gone. Its channels are closed a moment before the
    transport says so, so a channel that closed without an exit status waits for that."""
    for _ in range(50):
        if not transport.is_active():
            return True
        time.sleep(0.01)
    return False


_LOST_HINT = (
    "the connection to the host was lost while the command ran; it was not run again. It may have finished, "
    "failed or still be running there: check its effects before running it again."
)


def _shutdown_write(chan: paramiko.Channel) -> None:
    try:
        chan.shutdown_write()
    except (paramiko.SSHException, EOFError, OSError):
        pass


def _send_stdin(chan: paramiko.Channel, data: bytes) -> None:
    try:
        chan.sendall(data)
    except (paramiko.SSHException, EOFError, OSError):
        return
    _shutdown_write(chan)
