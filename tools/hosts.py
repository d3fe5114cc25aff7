"""Hosts: one interface, two transports (local subprocess, SSH through paramiko).

Every command runs as `bash --noprofile --norc -c COMMAND` with PATH set explicitly, so
aliases and profile scripts cannot change what runs. stdout and stderr are drained
together while the command runs and streamed to an optional listener. A wall-clock
timeout kills the whole process group, not just our end of the pipe.
"""

from __future__ import annotations

import os
import selectors
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Literal

# PATH every command starts from; a host's `path_prefix` goes in front of it.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

OutputListener = Callable[[str, bytes], None]  # (stream name "stdout"/"stderr", chunk)


class HostError(Exception):
    """A host could not be reached or used; the message says what to do."""


@dataclass
class HostSpec:
    """How to reach one host and what is particular about it."""

    name: str  # how the operator and the model name it ("sim", "gpu1", "root@10.0.0.5")
    transport: Literal["local", "ssh"] = "ssh"
    target: str | None = None  # ssh: user@host[:port] or a ~/.ssh/config alias; default: name
    path_prefix: list[str] = field(default_factory=list)  # directories put in front of PATH
    env: dict[str, str] = field(default_factory=dict)  # extra environment for every command
    # Filesystem root for the system paths tools use (/usr/local/cuda-X.Y, /var/log, /tmp):
    # "/" on a real host; a directory of its own for the simulated GPU host or a mounted image.
    sysroot: str = "/"
    python: str | None = None  # the interpreter of interest (a venv's python); default python3 on PATH
    max_sessions: int = 8  # commands at once; below OpenSSH's MaxSessions of 10
    trust_host_key: str | None = None  # a fingerprint the operator trusts explicitly (SHA256:...)

    def path(self) -> str:
        return ":".join([*self.path_prefix, DEFAULT_PATH])

    def sys_path(self, path: str) -> str:
        """A system path ("/usr/local/cuda") as it lies on this host, under its sysroot."""
        if self.sysroot in ("", "/") or not path.startswith("/"):
            return path
        return self.sysroot.rstrip("/") + path


@dataclass
class CommandResult:
    command: str
    exit_code: int | None  # None when the command never finished (timeout, lost connection, cancel)
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    connection_lost: bool = False
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def wrap_command(command: str, path: str, env: dict[str, str], cwd: str | None) -> str:
    """The exact remote command line: a clean bash with an explicit PATH and environment."""
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in {"PATH": path, **env}.items())
    script = command if cwd is None else f"cd {shlex.quote(cwd)} && {command}"
    return f"env {assigns} bash --noprofile --norc -c {shlex.quote(script)}"


class Host:
    """The interface every transport implements."""

    spec: HostSpec

    @property
    def name(self) -> str:
        return self.spec.name

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        on_output: OutputListener | None = None,
        cancel: threading.Event | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        raise NotImplementedError

    def read_file(self, path: str) -> bytes:
        r = self.run(f"cat -- {shlex.quote(path)}")
        if not r.ok:
            raise HostError(f"{self.name}: cannot read {path}: {r.stderr.strip() or 'exit ' + str(r.exit_code)}")
        return r.stdout.encode("utf-8", "surrogateescape")

    def write_file(self, path: str, data: bytes) -> None:
        r = self.run(f"cat > {shlex.quote(path)}", stdin=data)
        if not r.ok:
            raise HostError(f"{self.name}: cannot write {path}: {r.stderr.strip() or 'exit ' + str(r.exit_code)}")

    def close(self) -> None:
        pass


class LocalHost(Host):
    """Commands on this machine through subprocess (the agent running on the GPU box itself, the demo)."""

    def __init__(self, spec: HostSpec):
        self.spec = spec
        self._slots = threading.BoundedSemaphore(max(1, spec.max_sessions))

    def run(self, command, *, timeout=None, cwd=None, env=None, on_output=None, cancel=None, stdin=None):
        full_env = {"PATH": self.spec.path(), "HOME": os.environ.get("HOME", "/"), "LANG": "C.UTF-8",
                    **self.spec.env, **(env or {})}
        start = time.monotonic()
        with self._slots:
            proc = subprocess.Popen(
                ["bash", "--noprofile", "--norc", "-c", command],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=full_env,
                start_new_session=True,  # its own process group, so a timeout kills all of it
            )
            if stdin is not None:
                threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
            out, err, timed_out, cancelled = _drain(proc, timeout, on_output, cancel, start)
        return CommandResult(
            command=command,
            exit_code=None if (timed_out or cancelled) else proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            cancelled=cancelled,
        )


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
    sel.close()
    if timed_out or cancelled:
        _kill_group(proc)
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


class HostPool:
    """The hosts of a session: connected lazily, one connection per host, all closed together."""

    def __init__(self, specs: list[HostSpec] | None = None, on_event: Callable[[str, dict], None] | None = None):
        self._specs = {s.name: s for s in (specs or [])}
        self._hosts: dict[str, Host] = {}
        self._lock = threading.Lock()
        self.on_event = on_event or (lambda kind, data: None)

    @property
    def names(self) -> list[str]:
        return list(self._specs)

    def spec(self, name: str) -> HostSpec | None:
        return self._specs.get(name)

    def add(self, spec: HostSpec) -> None:
        with self._lock:
            self._specs[spec.name] = spec

    def get(self, name: str) -> Host:
        with self._lock:
            host = self._hosts.get(name)
            if host is None:
                spec = self._specs.get(name)
                if spec is None:
                    raise HostError(f"host {name!r} is not in this session's hosts ({', '.join(self._specs) or 'none'})")
                host = self._open(spec)
                self._hosts[name] = host
            return host

    def _open(self, spec: HostSpec) -> Host:
        if spec.transport == "local":
            return LocalHost(spec)
        from tools.hosts_ssh import SSHHost  # noqa: PLC0415 - paramiko is only loaded when a session uses SSH

        return SSHHost(spec, on_event=self.on_event)

    def close(self) -> None:
        with self._lock:
            hosts, self._hosts = list(self._hosts.values()), {}
        for h in hosts:
            try:
                h.close()
            except Exception:  # noqa: BLE001 - closing must never stop the others from closing
                pass
