"""What every host transport shares: the errors, HostSpec and SSHSettings, CommandResult, the
command helpers (the exact command line, the subject the safety gate sees, the sudo hint, the
command slots) and the Host interface.

Every command runs as `bash --noprofile --norc -c COMMAND` with PATH set explicitly, so
aliases and profile scripts cannot change what runs. Nothing here needs paramiko: callers
name SSHSettings and the host-key errors without loading the SSH transport.
"""

from __future__ import annotations

import os
import re
import shlex
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Callable, Literal

from pydantic import AfterValidator

# PATH every command starts from; a host's `path_prefix` goes in front of it.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

OutputListener = Callable[[str, bytes], None]  # (stream name "stdout"/"stderr", chunk)


class HostError(Exception):
    """A host could not be reached or used; the message says what to do."""


class UnknownHostKeyError(HostError):
    """The host presented a key that no known_hosts file lists; the operator may trust it."""

    def __init__(self, message: str, *, host: str, fingerprint: str, key_type: str):
        super().__init__(message)
        self.host = host
        self.fingerprint = fingerprint
        self.key_type = key_type


class ChangedHostKeyError(HostError):
    """The host presented a key other than the one known_hosts lists. Always refused."""

    def __init__(self, message: str, *, host: str, fingerprint: str, known_fingerprint: str):
        super().__init__(message)
        self.host = host
        self.fingerprint = fingerprint
        self.known_fingerprint = known_fingerprint


def user_data_dir() -> Path:
    """Per-user data directory of upgrade-agent ($XDG_DATA_HOME/upgrade-agent)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "upgrade-agent"


def _default_ssh_config() -> Path:
    return Path(os.path.expanduser("~/.ssh/config"))


def _default_known_hosts() -> list[Path]:
    return [Path(os.path.expanduser("~/.ssh/known_hosts")), Path("/etc/ssh/ssh_known_hosts")]


def _default_project_known_hosts() -> Path:
    return user_data_dir() / "known_hosts"


@dataclass
class SSHSettings:
    """Where the SSH transport finds its configuration, and its time limits.

    Defaults are the operator's own: ~/.ssh/config, ~/.ssh/known_hosts (and the system
    one), and a known_hosts file of upgrade-agent's own where keys the operator trusted
    through upgrade-agent are kept. Tests point all of these at files of their own.
    """

    config_path: Path | None = field(default_factory=_default_ssh_config)  # None: no ssh config
    known_hosts_paths: list[Path] = field(default_factory=_default_known_hosts)  # read only
    project_known_hosts: Path = field(default_factory=_default_project_known_hosts)  # read, and trusted keys appended
    connect_timeout: float = 10.0  # TCP connect, SSH banner, key exchange, auth, channel open: each
    keepalive_s: float = 15.0  # SSH keepalive and TCP keepalive probes on an idle connection
    use_agent: bool = True  # offer the keys of the ssh-agent at $SSH_AUTH_SOCK


@dataclass
class HostSpec:
    """How to reach one host and what is particular about it."""

    name: str  # how the operator and the model name it ("sim", "gpu1", "root@10.0.0.5")
    transport: Literal["local", "ssh", "sim"] = "ssh"
    target: str | None = None  # ssh: user@host[:port] or a ~/.ssh/config alias; default: name
    path_prefix: list[str] = field(default_factory=list)  # directories put in front of PATH
    env: dict[str, str] = field(default_factory=dict)  # extra environment for every command
    # sim: where the simulated machine's trees lie on this machine; its commands see them at real paths.
    sim_root: str | None = None
    python: str | None = None  # the interpreter of interest (a venv's python); default python3 on PATH
    max_sessions: int = 8  # commands at once; below OpenSSH's MaxSessions of 10
    trust_host_key: str | None = None  # a fingerprint the operator trusts explicitly (SHA256:...)
    identity_file: str | None = None  # a private key offered before those of ~/.ssh/config and the agent
    # "auto": the gate's auto-run reads run inside the read sandbox (tools/sandbox); "off": the operator
    # opted out for this host, and the transcript says so.
    read_sandbox: Literal["auto", "off"] = "auto"

    def path(self) -> str:
        return ":".join([*self.path_prefix, DEFAULT_PATH])


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
    hint: str | None = None  # what the operator or the model should know to act on the result

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_env_names(env: dict[str, str]) -> None:
    """Environment names go into a command line unquoted: only plain identifiers are allowed."""
    for name in env:
        if not _ENV_NAME.match(name):
            raise HostError(f"environment variable name {name!r} is not valid: use letters, digits and _")


# Linux takes at most 128 KiB in one argument (MAX_ARG_STRLEN), and a command goes to bash as one,
# wrapped with its PATH and environment. A command near that is data, not a command line.
MAX_COMMAND_BYTES = 100_000


def _command_not_blank(command: str) -> str:
    if not command.strip():
        raise ValueError("command is empty")
    size = len(command.encode("utf-8", "surrogatepass"))
    if size > MAX_COMMAND_BYTES:
        raise ValueError(f"command is {size:,} bytes; a command may have at most {MAX_COMMAND_BYTES:,} (the "
                         "operating system's limit for one argument is 128 KiB): split it into smaller commands, "
                         "or have the host fetch large content from a file or URL instead of inlining it")
    return command


def _env_names_valid(env: dict[str, str]) -> dict[str, str]:
    try:
        check_env_names(env)
    except HostError as e:
        raise ValueError(str(e)) from None
    return env


# Argument types of the tools that run a command on a host (ssh_exec, run_bench): checked once, here.
CommandText = Annotated[str, AfterValidator(_command_not_blank)]
EnvVars = Annotated[dict[str, str], AfterValidator(_env_names_valid)]


def command_subject(command: str, env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    """A command with its environment and directory, as the safety gate classifies it and an
    approval binds to: so an approval of one command never covers it with a different
    environment or in another directory.

    The short forms `K=V cmd` and `cd DIR && cmd` mean what `wrap_command` runs only for one
    simple command: for `a; b`, K would reach `a` alone and a failed cd would still run `b`. A
    command of several parts gets the exact forms: `export K=V; a; b`, and `cd -- DIR || exit`
    on a line of its own. A model that writes `K=V a; b` itself therefore never shares a subject
    (nor an approval) with env K and `a; b`.
    """
    # Without these characters bash sees one simple command; with them, the exact forms are used.
    one_command = not any(c in command for c in ";&|()<>`$\n\r")
    subject = command
    if env:
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        subject = f"{assigns} {subject}" if one_command else f"export {assigns}; {subject}"
    if cwd is not None:
        subject = f"cd {shlex.quote(cwd)} && {subject}" if one_command else f"cd -- {shlex.quote(cwd)} || exit\n{subject}"
    return subject


def wrap_command(command: str, path: str, env: dict[str, str], cwd: str | None) -> str:
    """The exact remote command line: a clean bash with an explicit PATH and environment.

    `env -i` starts from an empty environment, as the local transport does: whatever the
    login shell's rc files exported (BASH_ENV, exported functions such as BASH_FUNC_ls%%,
    SHELLOPTS) would otherwise reach the inner bash and change what runs. Only the user's
    identity is carried over; the rest is PATH, the host's env and the call's env.

    No locale is set, so commands run in the C locale: it exists on every host (C.UTF-8 is
    missing on older ones, where perl and friends then warn on every call), messages come
    in English, and it spares each command the locale loading. A host that needs another
    locale sets LANG in its HostSpec.env.
    """
    check_env_names(env)
    identity = 'HOME="$HOME" USER="$USER" LOGNAME="$LOGNAME"'
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in {"PATH": path, **env}.items())
    # `cd DIR || exit` on a line of its own: with `cd DIR && COMMAND`, a COMMAND of several
    # statements (`a; b`) would run `b` in the wrong directory when the cd fails.
    script = command if cwd is None else f"cd -- {shlex.quote(cwd)} || exit\n{command}"
    return f"env -i {identity} {assigns} bash --noprofile --norc -c {shlex.quote(script)}"


_SUDO_PASSWORD = re.compile(r"sudo: (a password is required|a terminal is required|no tty present)")


def sudo_hint(stderr: str) -> str | None:
    """A hint when sudo stopped because it wanted a password (we never type one)."""
    if _SUDO_PASSWORD.search(stderr):
        return (
            "sudo asked for a password; upgrade-agent never types or stores passwords and runs "
            "sudo non-interactively. Ask the operator to allow this command without a password "
            "(a NOPASSWD rule in sudoers) or to run it themselves."
        )
    return None


def acquire_slot(slots: threading.Semaphore, cancel: threading.Event | None) -> bool:
    """Wait for one of a host's command slots; False when cancelled before it got one."""
    if cancel is not None and cancel.is_set():
        return False
    while not slots.acquire(timeout=0.1):
        if cancel is not None and cancel.is_set():
            return False
    return True


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
        pty: bool = False,
    ) -> CommandResult:
        """Run `command` under a clean bash; never raises for the command's own failure.

        timeout: wall-clock seconds, then the command's whole process group is killed.
        cancel: set it (from any thread) to kill the command the same way.
        on_output: called with ("stdout" | "stderr", bytes) as output arrives.
        pty: allocate a terminal (SSH only); stderr then arrives merged into stdout.
        Raises HostError only when the host itself cannot be used (unreachable, auth).
        """
        result, _ = self._run(command, timeout=timeout, cwd=cwd, env=env, on_output=on_output, cancel=cancel,
                              stdin=stdin, pty=pty)
        return result

    def _run(self, command, *, timeout=None, cwd=None, env=None, on_output=None, cancel=None, stdin=None,
             pty=False) -> tuple[CommandResult, bytes]:
        """What a transport implements: the result, and stdout's raw bytes."""
        raise NotImplementedError

    def read_file(self, path: str) -> bytes:
        # The raw bytes: the decoded text of a CommandResult would mangle a binary file.
        r, raw = self._run(f"cat -- {shlex.quote(path)}")
        if not r.ok:
            raise HostError(f"{self.name}: cannot read {path}: {r.stderr.strip() or 'exit ' + str(r.exit_code)}")
        return raw

    def write_file(self, path: str, data: bytes) -> None:
        r = self.run(f"cat > {shlex.quote(path)}", stdin=data)
        if not r.ok:
            raise HostError(f"{self.name}: cannot write {path}: {r.stderr.strip() or 'exit ' + str(r.exit_code)}")

    def open_stream(self, command: str) -> "HostStream":
        """Start `command` as `run` would, and keep talking to it: its stdin and stdout, for as long as the
        host is open (a process that serves requests, such as the read sandbox's server). Its stderr is
        kept, the last 4 KiB, for the message of one that fails to start. Raises HostError if it cannot."""
        raise HostError(f"{self.name}: this transport cannot keep a process open")

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the host is closed (what lives as long as its connection)."""
        self.__dict__.setdefault("_on_close", []).append(callback)

    def close(self) -> None:
        for callback in self.__dict__.pop("_on_close", []):
            try:
                callback()
            except Exception:  # noqa: BLE001 - closing must never stop the rest from closing
                pass


class HostStream:
    """A process kept open on a host (Host.open_stream): write to its stdin, read its stdout."""

    def write(self, data: bytes) -> None:
        """All of `data`; raises OSError once the process or its connection is gone."""
        raise NotImplementedError

    def read(self) -> bytes:
        """What stdout has next, blocking; b"" at its end."""
        raise NotImplementedError

    def stderr_tail(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        """Close stdin (the process ends when it sees that) and let go of the process."""
        raise NotImplementedError
