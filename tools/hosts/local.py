"""The local transport: commands on this machine through subprocess.

stdout and stderr are drained together while the command runs and streamed to an optional
listener. A wall-clock timeout or a cancel kills the command's whole process group, not just
our end of the pipe.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import subprocess
import threading
import time

from tools.hosts.base import (CommandResult, Host, HostError, HostSpec, HostStream, acquire_slot, check_env_names,
                              sudo_hint)


class LocalHost(Host):
    """Commands on this machine through subprocess (the agent running on the GPU box itself, the demo)."""

    def __init__(self, spec: HostSpec):
        if spec.transport == "sim" and type(self) is LocalHost:
            # A sim's paths are real only inside its sandbox: run here, its commands would act on this machine.
            raise HostError(f"{spec.name}: a simulated host runs in its sandbox (SimHost), never on this machine")
        self.spec = spec
        self._slots = threading.BoundedSemaphore(max(1, spec.max_sessions))

    def _run(self, command, *, timeout=None, cwd=None, env=None, on_output=None, cancel=None, stdin=None,
             pty=False) -> tuple[CommandResult, bytes]:
        if pty:
            raise HostError(f"{self.name}: a terminal (pty) is only available over SSH; run without pty")
        check_env_names(env or {})
        full_env = {"PATH": self.spec.path(), "HOME": self._home(), "LANG": "C.UTF-8",
                    **self.spec.env, **(env or {})}
        start = time.monotonic()
        if not acquire_slot(self._slots, cancel):
            return CommandResult(command, None, "", "", time.monotonic() - start, cancelled=True), b""
        try:
            argv, popen_cwd = self._argv(command, cwd)
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=popen_cwd,
                    env=full_env,
                    start_new_session=True,  # its own process group, so a timeout kills all of it
                )
            except OSError as e:
                if e.errno == errno.E2BIG:
                    size = sum(len(a) for a in argv) + sum(len(k) + len(v) for k, v in full_env.items())
                    raise HostError(f"{self.name}: the command and its environment ({size:,} bytes) are over this "
                                    "system's limit for a program's arguments: split the command, or put large "
                                    "values in a file on the host") from None
                if cwd is None:
                    raise
                # The same outcome as over SSH, where `cd DIR || exit` fails in the remote shell.
                return CommandResult(command, 1, "", f"bash: cd: {cwd}: {e.strerror}\n",
                                     time.monotonic() - start), b""
            try:
                if stdin is not None:
                    threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
                # The timeout counts from the start of the command, not from the wait for a slot.
                out, err, timed_out, cancelled = _drain(proc, timeout, on_output, cancel, time.monotonic())
            except BaseException:
                # Ctrl-C (or a signal) between the start and the wait: the command must not outlive us.
                _kill_group(proc)
                raise
        finally:
            self._slots.release()
        stderr = err.decode("utf-8", "replace")
        return CommandResult(
            command=command,
            exit_code=None if (timed_out or cancelled) else proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=stderr,
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            cancelled=cancelled,
            hint=sudo_hint(stderr),
        ), out


    def open_stream(self, command: str) -> HostStream:
        argv, _ = self._argv(command, None)
        env = {"PATH": self.spec.path(), "HOME": self._home(), "LANG": "C.UTF-8", **self.spec.env}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=env, start_new_session=True, bufsize=0)
        except OSError as e:
            raise HostError(f"{self.name}: cannot start {argv[0]}: {e.strerror}") from None
        return _LocalStream(proc)

    def _argv(self, command: str, cwd: str | None) -> tuple[list[str], str | None]:
        """The program line that runs `command`, and the directory to start it in."""
        return ["bash", "--noprofile", "--norc", "-c", command], cwd

    def _home(self) -> str:
        return os.environ.get("HOME", "/")


class _LocalStream(HostStream):
    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.errors = bytearray()
        threading.Thread(target=self._keep_stderr, daemon=True).start()

    def _keep_stderr(self) -> None:
        for chunk in iter(lambda: self.proc.stderr.read(4096), b""):
            self.errors = (self.errors + chunk)[-4096:]

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)  # unbuffered: written whole, or OSError (BrokenPipeError)

    def read(self) -> bytes:
        try:
            return self.proc.stdout.read(65536) or b""
        except (OSError, ValueError):
            return b""

    def stderr_tail(self) -> str:
        return self.errors.decode("utf-8", "replace")

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc)


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _drain(proc, timeout, on_output, cancel, start):
    """Read stdout and stderr together until EOF; kill the process group on timeout or cancel."""
    bufs = {"stdout": bytearray(), "stderr": bytearray()}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    timed_out = cancelled = False
    open_streams = 2
    try:
        while open_streams:
            if timeout is not None and time.monotonic() - start > timeout:
                timed_out = True
                break
            if cancel is not None and cancel.is_set():
                cancelled = True
                break
            for key, _ in sel.select(timeout=0.1):
                chunk = os.read(key.fileobj.fileno(), 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                bufs[key.data] += chunk
                if on_output is not None:
                    on_output(key.data, chunk)
    except BaseException:
        # Ctrl-C (or anything else) while waiting: the command must not outlive us.
        _kill_group(proc)
        raise
    finally:
        sel.close()
    if timed_out or cancelled:
        _kill_group(proc)
    # The command may have closed its output and still run (`exec >/dev/null; sleep 60`): the
    # timeout and cancel still hold while we wait for it to exit.
    while proc.poll() is None and not (timed_out or cancelled):
        try:
            proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            if timeout is not None and time.monotonic() - start > timeout:
                timed_out = True
            elif cancel is not None and cancel.is_set():
                cancelled = True
            else:
                continue
            _kill_group(proc)
        except BaseException:
            _kill_group(proc)
            raise
    proc.wait()
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    return bytes(bufs["stdout"]), bytes(bufs["stderr"]), timed_out, cancelled


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=2)
            return
        except subprocess.TimeoutExpired:
            continue
