"""A Host whose commands run inside the read sandbox of `launcher.py`, on any transport."""

from __future__ import annotations

import ast
import base64
import functools
import json
import os
import re
import shlex
import threading
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

from tools.hosts.base import CommandResult, Host, HostError
from tools.sandbox.server import SandboxServer

SANDBOX_STATUS = "upgrade-agent-sandbox: "  # what the launcher's own lines on stderr start with
NOTHING_LISTENS = "nothing listens on the host's 127.0.0.1 at port"  # launcher.py's line for a closed port
MAX_TIME_S = 600.0  # the longest a read may run in the sandbox, whatever its caller allows
MAX_OUTPUT = 32 << 20  # bytes of stdout and stderr together
SCRATCH_MB = 64
_MARGIN_S = 5.0  # the transport's own timeout comes after the launcher's, which says what happened
# A server per host runs the reads (server.py); UPGRADE_AGENT_SANDBOX_SERVER=0 starts a launcher per read
# instead (slower, the same sandbox). A host whose server failed to start this many times gets no more.
SERVER_ENABLED = os.environ.get("UPGRADE_AGENT_SANDBOX_SERVER", "1") != "0"
MAX_SERVER_STARTS = 2


class ReadSandboxUnavailable(HostError):
    """No read sandbox can be set up on this host."""


@functools.lru_cache(maxsize=1)
def _bootstrap() -> str:
    """The `python3 -c` program of a launcher per command: the launcher itself, compressed, in the line.

    The launcher travels with every command (nothing is written to the host); compiling 30 KB of
    source on each command would cost the host more than setting up the sandbox does."""
    return f"import zlib,base64;exec(zlib.decompress(base64.b64decode('{_packed()}')))"


@functools.lru_cache(maxsize=1)
def _packed() -> str:
    """The launcher without its docstrings and comments, compressed, in base64 (one line)."""
    tree = ast.parse(Path(__file__).with_name("launcher.py").read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return base64.b64encode(zlib.compress(ast.unparse(tree).encode(), 9)).decode()


# The server's program line: the launcher itself comes first on its stdin, so that `ps` on the host shows
# this short line for the session's lifetime, not 20 KB of base64 (read byte by byte: a buffered read would
# take the first request's bytes too).
SERVER_BOOT = "import sys,zlib,base64;exec(zlib.decompress(base64.b64decode(sys.stdin.buffer.raw.readline())))"


@dataclass(frozen=True)
class SandboxInfo:
    """What guards the reads on one host, as its probe found it."""

    mechanism: str  # "namespaces", "landlock", "none", or "off" (the operator opted out)
    python: str | None = None  # the interpreter the launcher runs on
    landlock_abi: int = 0
    uid: int | None = None
    kernel: str | None = None
    arch: str | None = None
    why: str | None = None  # for "none": what is missing

    def as_event(self, host: str) -> dict:
        event = {"host": host, **{k: v for k, v in asdict(self).items() if v not in (None, "")}}
        if self.mechanism == "none":
            event["note"] = (f"no read sandbox on {host} ({self.why}): its reads run only with the operator's "
                             "approval; `read_sandbox: off` in the goal file's host entry runs them without it")
        elif self.mechanism == "off":
            event["note"] = f"the operator turned the read sandbox off for {host}: the gate's judgement alone guards its reads"
        return event


_PROBE = ('P=$(command -v python3 2>/dev/null || command -v /usr/libexec/platform-python 2>/dev/null) '
          '|| { echo "no python3 on PATH or at /usr/libexec/platform-python"; exit 3; }; echo "$P"; '
          'exec "$P" -I -S -c {boot} --probe')


def probe_host(host: Host) -> SandboxInfo:
    """Ask the host what it allows (one short command); never raises for the host's answer."""
    r = host.run(_PROBE.replace("{boot}", shlex.quote(_bootstrap())), timeout=30)
    lines = r.stdout.strip().splitlines()
    if r.exit_code != 0 or len(lines) < 2:
        said = (r.stdout.strip() or r.stderr.strip() or f"exit {r.exit_code}").splitlines()[-1][:200]
        return SandboxInfo(mechanism="none", why=f"the probe failed: {said}")
    try:
        found = json.loads(lines[-1])
    except ValueError:
        return SandboxInfo(mechanism="none", why=f"the probe answered {lines[-1][:200]!r}")
    mechanism = found.get("mechanism", "none")
    why = None
    if mechanism == "none":
        why = "not root, and the kernel has no Landlock" if found.get("seccomp") else \
            f"no seccomp table for {found.get('arch')}"
    return SandboxInfo(mechanism=mechanism, python=lines[0], landlock_abi=int(found.get("landlock_abi") or 0),
                       uid=found.get("uid"), kernel=found.get("kernel"), arch=found.get("arch"), why=why)


_LOOPBACK_URL = re.compile(r"\b(https?|wss?)://(?:[^/@\s'\"]*@)?(localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::(\d{1,5}))?",
                           re.IGNORECASE)
_PORT_OPTION = re.compile(r"--port[= ](\d{1,5})\b")
MAX_PORTS = 16


def loopback_ports(*texts: str) -> list[int]:
    """The loopback ports a read names (URLs on 127.0.0.1, localhost or [::1]; --port N): the sandbox
    relays these, and only these, to the host's 127.0.0.1."""
    ports: set[int] = set()
    for text in texts:
        for scheme, _host, port in _LOOPBACK_URL.findall(text):
            ports.add(int(port) if port else (443 if scheme.lower() in ("https", "wss") else 80))
        ports.update(int(p) for p in _PORT_OPTION.findall(text))
    return sorted(p for p in ports if 0 < p < 65536)[:MAX_PORTS]


# What a command stopped by the sandbox says, and the operation it names.
_REFUSALS = [
    (re.compile(r"Read-only file system"), "a write (every file system is read-only in the read sandbox)"),
    (re.compile(r"(Network is unreachable|Address family not supported|Could not resolve host|"
                r"Temporary failure in name resolution|Name or service not known|Couldn't connect to server|"
                r"Connection refused)"), "a network connection (only the loopback ports the command names are "
                                         "reachable)"),
    (re.compile(r"(Failed to connect to bus|Cannot connect to the Docker daemon|docker\.sock|containerd\.sock|"
                r"Failed to connect to system scope bus)"), "a connection to a local daemon"),
    (re.compile(r"/dev/\S*: No such file or directory"), "opening a device (only null, zero, full, random, urandom, "
                                                         "tty and the GPU's nodes are there)"),
    (re.compile(r"(Operation not permitted|Permission denied|must be root|Insufficient Permissions|"
                r"requires root|not permitted|Bad system call|Function not implemented)", re.IGNORECASE),
     "a privileged operation (the sandboxed command has no privileges and owns no process or file)"),
]


def sandbox_refusal(result: CommandResult, ports: list[int] | None = None) -> str | None:
    """The hint for the model when the sandbox, not the command, is why it failed; None otherwise.
    `ports`: the loopback ports relayed for it, where a refused connection is the host's own answer."""
    if result.exit_code == 0 or result.cancelled:
        return None
    err = result.stderr
    closed = next((ln for ln in err.splitlines() if ln.startswith(SANDBOX_STATUS + NOTHING_LISTENS)), None)
    host_refused = None if closed is None else (
        f"the host itself refused the connection: {closed[len(SANDBOX_STATUS):]}. The read sandbox relays the "
        "loopback ports a read names to the host's 127.0.0.1; nothing was listening there.")
    for line in err.splitlines():
        if line.startswith(SANDBOX_STATUS + NOTHING_LISTENS):
            continue
        if line.startswith(SANDBOX_STATUS):
            said = line[len(SANDBOX_STATUS):]
            if said.startswith("stopped after"):
                return f"the read sandbox {said}. Rerun it bounded; do not retry it as it is."
            return (f"the read sandbox could not run this: {said}. A read on this host then needs the operator's "
                    f"approval: {_OUTSIDE}")
    if _NOT_THE_SANDBOX.search(err):
        return None
    for pattern, operation in _REFUSALS:
        m = pattern.search(err)
        if m:
            line = next((ln for ln in err.splitlines() if m.group(0) in ln), m.group(0)).strip()[:200]
            named = _PORT_IN_MESSAGE.search(line)
            if operation.startswith("a network") and (host_refused or named and int(next(filter(None, named.groups())))
                                                      in (ports or [])):
                return host_refused  # a relayed port nothing listens on: the host refused it, as it would outside
            return (f"this needs a change or a privilege: the read sandbox blocked {operation} ({line!r}). In the "
                    "read sandbox nothing outside $TMPDIR can be written, the command has no privileges, and no host "
                    "but the loopback ports it names can be reached. If it is a read, write it so that it fits "
                    "(`ps -p PID` or `test -d /proc/PID` rather than `kill -0`, a file under $TMPDIR); if it needs "
                    f"what was blocked, {_OUTSIDE} Do not retry it as it is.")
    # `curl -s` says nothing of its own; a command that failed saying something else (a traceback) failed for that
    said = "\n".join(ln for ln in err.splitlines() if not ln.startswith(SANDBOX_STATUS)).strip()
    return host_refused if not said else None


# What running a command outside the read sandbox asks of the gate (agent/safety/policy.py UNGUARDED_READ).
_OUTSIDE = ("run it with outside_sandbox: true: a command the gate judges a read then needs the operator's approval "
            "(in a scripted run, a goal-file rule with its exact text), and no backup; any other needs a verified "
            "backup too, as every change does.")
# How curl, wget and bash name the port a refused connection was for
_PORT_IN_MESSAGE = re.compile(r"\bport (\d{1,5})\b|:(\d{1,5})\.\.\. failed|/dev/tcp/[^/\s]+/(\d{1,5})")
# A host without systemd answers every systemctl with this, and then "Failed to connect to bus": nothing the
# sandbox took away, and nothing outside_sandbox would give.
_NOT_THE_SANDBOX = re.compile(r"System has not been booted with systemd")


class SandboxedHost(Host):
    """`inner`, with every command run inside the read sandbox (see launcher.py)."""

    def __init__(self, inner: Host, info: SandboxInfo, ports: list[int] | None = None):
        self.inner = inner
        self.spec = inner.spec
        self.info = info
        self.ports = list(ports or [])

    def launcher_line(self, command: str, timeout: float | None) -> str:
        bound = min(float(timeout), MAX_TIME_S) if timeout else MAX_TIME_S
        policy = f"timeout_s={bound:g};max_output={MAX_OUTPUT};scratch_mb={SCRATCH_MB};mechanism={self.info.mechanism}"
        if self.ports:
            policy += ";ports=" + ",".join(map(str, self.ports))
        return (f"exec {shlex.quote(self.info.python or 'python3')} -I -S -c {shlex.quote(_bootstrap())} "
                f"{shlex.quote(policy)} -- bash --noprofile --norc -c {shlex.quote(command)}")

    def _run(self, command, *, timeout=None, cwd=None, env=None, on_output=None, cancel=None, stdin=None,
             pty=False) -> tuple[CommandResult, bytes]:
        if self.info.mechanism not in ("namespaces", "landlock"):
            message = (f"{SANDBOX_STATUS}no read sandbox can be set up on {self.name} ({self.info.why or 'unknown'}); "
                       "the command did not run\n")
            result = CommandResult(command=command, exit_code=126, stdout="", stderr=message, duration_s=0.0)
            result.hint = sandbox_refusal(result)
            return result, b""
        bound = min(float(timeout), MAX_TIME_S) if timeout else MAX_TIME_S
        server = self._server() if stdin is None and not pty else None
        result = None
        if server is not None:
            script = command if cwd is None else f"cd -- {shlex.quote(cwd)} || exit\n{command}"
            result, raw = server.run(script, timeout=bound, env=env, ports=self.ports, on_output=on_output,
                                     cancel=cancel)
            if result.connection_lost:  # it ran in the sandbox, so it changed nothing: run it the other way
                result = None
        if result is None:
            result, raw = self.inner._run(self.launcher_line(command, timeout), timeout=bound + _MARGIN_S, cwd=cwd,
                                          env=env, on_output=on_output, cancel=cancel, stdin=stdin, pty=pty)
        result.command = command
        if result.exit_code == 124 and SANDBOX_STATUS + "stopped after" in result.stderr:
            result.timed_out = True
        hint = sandbox_refusal(result, self.ports)
        if hint is not None:
            result.hint = hint if result.hint is None else f"{result.hint} {hint}"
        return result, raw

    def _server(self) -> SandboxServer | None:
        """The host's server, started on its first read; None where it cannot run (the launcher per read then)."""
        if not SERVER_ENABLED:
            return None
        inner, policy = self.inner, f"max_output={MAX_OUTPUT};scratch_mb={SCRATCH_MB};mechanism={self.info.mechanism}"
        with inner.__dict__.setdefault("_sandbox_server_lock", threading.Lock()):
            servers = inner.__dict__.setdefault("_sandbox_servers", {})  # policy -> [server or None, starts]
            server, starts = servers.get(policy, (None, 0))
            if server is not None and server.usable:
                return server
            if starts >= MAX_SERVER_STARTS:
                return None
            try:
                server = SandboxServer.start(inner, self.info.python or "python3", SERVER_BOOT, policy,
                                             first=_packed().encode() + b"\n")
            except HostError:
                server = None
            servers[policy] = (server, starts + 1)
            if server is not None:
                inner.on_close(server.close)
            return server

    def close(self) -> None:  # the inner host belongs to its pool
        pass


_probe_lock = threading.Lock()


def outside_the_sandbox(hosts, name: str) -> Host:
    """The host as the session reaches it, without the read sandbox: only for the product's own fixed reads that
    need what the sandbox withholds (a scheduler's client asks its controller over the network), never for a
    command a model wrote."""
    return (hosts.provider if isinstance(hosts, SandboxedHosts) else hosts).get(name)


class SandboxedHosts:
    """A read's view of the session's hosts: each one wrapped in the read sandbox.

    `provider` is the session's HostPool (or anything with get(name)); its `on_event`, when it has one,
    records each host's mechanism once, when it is first probed."""

    def __init__(self, provider, ports: list[int] | None = None):
        self.provider = provider
        self.ports = ports or []

    def get(self, name: str) -> Host:
        inner = self.provider.get(name)
        if isinstance(inner, SandboxedHost):
            return inner
        info = self.info(name, inner)
        if info.mechanism == "off":  # the operator's opt-out, recorded when it was first used
            return inner
        return SandboxedHost(inner, info, self.ports)

    def info(self, name: str, inner: Host) -> SandboxInfo:
        with _probe_lock:
            found = getattr(inner, "_read_sandbox", None)
        if found is not None:
            return found
        if getattr(inner.spec, "read_sandbox", "auto") == "off":
            found = SandboxInfo(mechanism="off", why="the operator turned the read sandbox off for this host")
        else:
            found = probe_host(inner)
        with _probe_lock:
            if getattr(inner, "_read_sandbox", None) is not None:
                return inner._read_sandbox
            inner._read_sandbox = found
        on_event = getattr(self.provider, "on_event", None)
        if on_event is not None:
            on_event("read_sandbox", found.as_event(name))
        return found
