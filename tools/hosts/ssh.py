"""SSH transport of the Host interface, through paramiko.

One connection (paramiko Transport) per host, opened on the first command and reused by
every later one; one channel per command; at most `HostSpec.max_sessions` commands at once
(the rest wait). A connection that died is noticed before the next command and opened
again; a command whose connection died while it ran is reported as such and never re-run.

Where a host is comes from `~/.ssh/config` (tools/hosts/ssh_config.py). ProxyJump hops are
SSH connections of their own, and the next hop goes through a direct-tcpip channel of the
previous one, as `ssh -J` does. Authentication is by key only (tools/hosts/ssh_auth.py).

Host keys are checked against known_hosts with a reject policy: an unknown key is refused
unless the operator trusted its exact fingerprint; a changed key is always refused.

Running one command on its channel, and killing it on timeout or cancel, is
tools/hosts/ssh_run.py; the kill itself goes over a second channel (SSHHost._kill_group).
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import re
import shlex
import socket
import threading
import time
from pathlib import Path
from typing import Callable

import paramiko
from paramiko.auth_strategy import AuthFailure

from tools.hosts.base import (
    ChangedHostKeyError,
    CommandResult,
    Host,
    HostError,
    HostSpec,
    HostStream,
    SSHSettings,
    UnknownHostKeyError,
    acquire_slot,
    check_env_names,
    wrap_command,
)
from tools.hosts.ssh_auth import _KeyAuth
from tools.hosts.ssh_config import Endpoint, load_ssh_config, parse_target, resolve
from tools.hosts.ssh_run import _PGID_MARK, _PROLOGUE, KILL_GRACE_S, _RemoteRun, _shutdown_write

# Endpoint, load_ssh_config, parse_target and resolve are also named from here, as before the split.
__all__ = ["Endpoint", "EventSink", "SSHHost", "load_ssh_config", "parse_target", "resolve"]

EventSink = Callable[[str, dict], None]

MAX_JUMPS = 8

# --------------------------------------------------------------------------- host keys


def _fingerprints(text: str | None) -> set[str]:
    """The fingerprints an operator trusted: one, or several separated by commas or spaces.

    Written as OpenSSH prints them (SHA256:base64, no padding); a pasted one without the
    SHA256: prefix means the same key.
    """
    out = set()
    for f in re.split(r"[\s,]+", text or ""):
        if f:
            out.add(f if f.startswith("SHA256:") else f"SHA256:{f.rstrip('=')}")
    return out


class _TrustedOrReject(paramiko.RejectPolicy):
    """paramiko's reject policy, except for a key whose exact fingerprint the operator trusted."""

    def __init__(self, host: "SSHHost", endpoint: Endpoint, label: str):
        self.host = host
        self.endpoint = endpoint
        self.label = label

    def missing_host_key(self, client, hostname, key):
        fp = key.fingerprint
        trusted = _fingerprints(self.host.spec.trust_host_key)
        if fp in trusted:
            self.host._remember_host_key(hostname, key, self.label)
            return
        files = ", ".join(str(p) for p in self.host._known_hosts_files(self.endpoint))
        also = f" (the trusted fingerprint {', '.join(sorted(trusted))} does not match)" if trusted else ""
        raise UnknownHostKeyError(
            f"{self.label}: unknown host key {key.get_name()} {fp} for {hostname}{also}; it is in none of {files}. "
            f"Check the fingerprint with the host's owner (on the host: ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub). "
            f"To trust it, run again with --trust-host-key {fp} or accept it in chat; it is then saved to "
            f"{self.host.settings.project_known_hosts}.",
            host=self.label, fingerprint=fp, key_type=key.get_name(),
        )


# --------------------------------------------------------------------------- the host


class SSHHost(Host):
    """A host reached over SSH: one pooled connection, one channel per command."""

    def __init__(self, spec: HostSpec, on_event: EventSink | None = None, settings: SSHSettings | None = None):
        self.spec = spec
        self.on_event = on_event or (lambda kind, data: None)
        self.settings = settings or SSHSettings()
        self._config = load_ssh_config(self.settings.config_path)
        self.endpoint = resolve(spec.target or spec.name, self._config)
        if spec.identity_file:  # offered first, as `ssh -i` does
            self.endpoint = dataclasses.replace(self.endpoint, identity_files=(
                spec.identity_file, *(f for f in self.endpoint.identity_files if f != spec.identity_file)))
        self._slots = threading.BoundedSemaphore(max(1, spec.max_sessions))
        self._lock = threading.Lock()  # guards connecting and the connection fields below
        self._clients: list[paramiko.SSHClient] = []  # jump hops first, the host itself last
        self._transport: paramiko.Transport | None = None
        self._kill_lock = threading.Lock()  # one kill channel at a time keeps us under MaxSessions
        self._closed = False
        self.connections_opened = 0  # how many times a connection was (re)opened

    # -- connection

    @property
    def transport(self) -> paramiko.Transport | None:
        return self._transport

    def _known_hosts_files(self, endpoint: Endpoint) -> list[Path]:
        return [*self.settings.known_hosts_paths, *(Path(p) for p in endpoint.known_hosts_files),
                self.settings.project_known_hosts]

    def _ensure_transport(self) -> paramiko.Transport:
        with self._lock:
            if self._closed:
                raise HostError(f"{self.name}: the connection was closed with the session; start a new session")
            t = self._transport
            if t is not None and t.is_active():
                return t
            self._close_clients()
            self._connect()
            return self._transport

    def _connect(self) -> None:
        """Open the chain of connections (jump hops, then the host); the caller holds the lock."""
        chain: list[tuple[Endpoint, str]] = []
        seen = set()
        self._plan_hops(self.endpoint, chain, seen, label=self.name)
        clients: list[paramiko.SSHClient] = []
        try:
            via = None
            for endpoint, label in chain:
                client = self._connect_one(endpoint, label, via)
                clients.append(client)
                via = client.get_transport()
        except BaseException:
            for c in reversed(clients):
                c.close()
            raise
        self._clients = clients
        self._transport = clients[-1].get_transport()
        self.connections_opened += 1

    def _plan_hops(self, endpoint: Endpoint, chain: list, seen: set, label: str) -> None:
        """The hops to `endpoint` in connection order; a hop's own ProxyJump comes before it."""
        if endpoint.alias in seen or len(seen) > MAX_JUMPS:
            raise HostError(f"{self.name}: ProxyJump of {endpoint.alias!r} loops or is longer than {MAX_JUMPS} hops; "
                            f"check the ssh config")
        seen.add(endpoint.alias)
        for jump in endpoint.proxy_jump:
            self._plan_hops(resolve(jump, self._config), chain, seen, label=f"{self.name} (jump host {jump})")
        chain.append((endpoint, label))

    def _timeout(self, endpoint: Endpoint) -> float:
        return endpoint.connect_timeout or self.settings.connect_timeout

    def _connect_one(self, ep: Endpoint, label: str, via: paramiko.Transport | None) -> paramiko.SSHClient:
        timeout = self._timeout(ep)
        where = f"{ep.address}" + (" through the jump host" if via is not None else "")
        sock = self._open_socket(ep, label, via, timeout)
        client = paramiko.SSHClient()
        for path in self._known_hosts_files(ep):
            if path.is_file():
                try:
                    client.load_system_host_keys(str(path))
                except (OSError, paramiko.SSHException) as e:
                    sock.close()
                    raise HostError(f"cannot read known_hosts file {path}: {e}; fix or move it") from None
        client.set_missing_host_key_policy(_TrustedOrReject(self, ep, label))
        auth = _KeyAuth(ep, self.settings.use_agent)
        try:
            client.connect(
                ep.host_key_alias or ep.hostname, ep.port, username=ep.user, sock=sock,
                timeout=timeout, banner_timeout=timeout, auth_timeout=timeout, channel_timeout=timeout,
                auth_strategy=auth,
            )
            transport = client.get_transport()
            if not transport.is_authenticated():
                raise HostError(f"{label}: {where} asks for a second authentication factor after the key; "
                                f"upgrade-agent supports key authentication only")
        except HostError:
            client.close()
            raise
        except paramiko.BadHostKeyException as e:
            client.close()
            raise self._changed_key_error(ep, label, e) from None
        except AuthFailure:
            client.close()
            raise HostError(auth.failure_message(label)) from None
        except paramiko.AuthenticationException as e:
            client.close()
            raise HostError(f"{label}: authentication at {where} failed: {e}; check the key and User in the ssh config")
        except (paramiko.SSHException, EOFError, OSError) as e:
            client.close()
            raise HostError(_handshake_message(label, where, e, timeout)) from None
        finally:
            auth.close()
        transport.set_keepalive(max(1, int(self.settings.keepalive_s)))
        return client

    def _open_socket(self, ep: Endpoint, label: str, via: paramiko.Transport | None, timeout: float):
        if via is not None:
            try:
                return via.open_channel("direct-tcpip", (ep.hostname, ep.port), ("127.0.0.1", 0), timeout=timeout)
            except paramiko.ChannelException as e:
                raise HostError(f"{label}: the jump host could not connect on to {ep.hostname}:{ep.port} "
                                f"({e.text or e.code}); check the address and that the jump host allows "
                                f"TCP forwarding (AllowTcpForwarding)") from None
            except (paramiko.SSHException, EOFError, OSError) as e:
                raise HostError(f"{label}: the jump host connection failed while opening the way to "
                                f"{ep.hostname}:{ep.port}: {e}") from None
        if ep.proxy_command:
            try:
                return paramiko.ProxyCommand(ep.proxy_command)
            except (paramiko.SSHException, OSError) as e:
                raise HostError(f"{label}: ProxyCommand {ep.proxy_command!r} could not start: {e}") from None
        try:
            sock = socket.create_connection((ep.hostname, ep.port), timeout=timeout)
        except socket.gaierror as e:
            raise HostError(f"{label}: cannot resolve host name {ep.hostname!r} ({e.strerror}); check the name, "
                            f"HostName in the ssh config, and DNS") from None
        except ConnectionRefusedError:
            raise HostError(f"{label}: connection to {ep.hostname} port {ep.port} refused; check that sshd runs "
                            f"there and that the port is right") from None
        except (socket.timeout, TimeoutError):
            raise HostError(f"{label}: no answer from {ep.hostname} port {ep.port} within {timeout:g}s; check that "
                            f"the host is up and the address, port and firewall") from None
        except OSError as e:
            raise HostError(f"{label}: cannot connect to {ep.hostname} port {ep.port}: {e.strerror or e}; check "
                            f"the network path to the host") from None
        _tune_socket(sock, self.settings.keepalive_s)
        return sock

    def _remember_host_key(self, known_name: str, key: paramiko.PKey, label: str) -> None:
        """Save a key the operator trusted, and put the decision on the record."""
        path = self.settings.project_known_hosts
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = paramiko.hostkeys.HostKeyEntry([known_name], key).to_line()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # two sessions trusting at once must not interleave lines
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        self.on_event("host_key_trusted", {"host": label, "fingerprint": key.fingerprint, "key_type": key.get_name()})

    def _changed_key_error(self, ep: Endpoint, label: str, e: paramiko.BadHostKeyException) -> ChangedHostKeyError:
        name = ep.known_hosts_name
        files = [str(p) for p in self._known_hosts_files(ep) if p.is_file() and _lists_host(p, name)]
        where = ", ".join(files) or "known_hosts"
        fix = "; ".join(f"ssh-keygen -R {shlex.quote(name)} -f {shlex.quote(f)}" for f in files) or \
            f"ssh-keygen -R {shlex.quote(name)}"
        return ChangedHostKeyError(
            f"{label}: REFUSED: the host key of {name} has changed: it now presents {e.key.get_name()} "
            f"{e.key.fingerprint}, but {where} lists {e.expected_key.get_name()} {e.expected_key.fingerprint}. "
            f"Someone may be intercepting the connection, or the host was reinstalled. A changed key is never "
            f"accepted, whatever fingerprint was trusted. If the owner confirms the new key, remove the old entry "
            f"({fix}) and trust the new fingerprint.",
            host=label, fingerprint=e.key.fingerprint, known_fingerprint=e.expected_key.fingerprint,
        )

    def _drop(self, transport: paramiko.Transport) -> None:
        """Forget a connection that stopped working, so the next command opens a new one."""
        with self._lock:
            if self._transport is transport:
                self._close_clients()

    def _close_clients(self) -> None:
        for c in reversed(self._clients):
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing must go on for the others
                pass
        self._clients = []
        self._transport = None

    def close(self) -> None:
        super().close()  # what lives on the connection first (a process kept open ends with its stdin)
        with self._lock:
            self._closed = True
            self._close_clients()

    # -- channels

    def _open_channel(self) -> tuple[paramiko.Transport, paramiko.Channel]:
        """A new session channel. Reconnects once if the pooled connection turns out dead.

        Retrying here is safe: no channel means nothing ran on the host.
        """
        refused_until = None
        reconnects = 0
        while True:
            transport = self._ensure_transport()
            try:
                return transport, transport.open_session(timeout=self._timeout(self.endpoint))
            except paramiko.ChannelException as e:
                # The server refused another session (its MaxSessions is below ours): wait for one to end.
                refused_until = refused_until or time.monotonic() + self._timeout(self.endpoint)
                if time.monotonic() > refused_until:
                    raise HostError(f"{self.name}: the server refuses more sessions ({e.text or e.code}); its "
                                    f"MaxSessions may be below max_sessions={self.spec.max_sessions}: lower "
                                    f"max_sessions for this host") from None
                time.sleep(0.05)
            except (paramiko.SSHException, EOFError, OSError) as e:
                # The connection died (server restarted, network cut) or stopped answering.
                self._drop(transport)
                reconnects += 1
                if reconnects > 1:
                    raise HostError(f"{self.name}: the connection to {self.endpoint.address} fails as soon as it "
                                    f"is opened ({e or type(e).__name__}); check the host and its sshd") from None

    # -- running commands

    def remote_command_line(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                            pty: bool = False) -> str:
        """The exact line sent to sshd for `command`."""
        merged = {**({"TERM": "dumb"} if pty else {}), **self.spec.env, **(env or {})}
        check_env_names(merged)
        script = command if cwd is None else f"cd -- {shlex.quote(cwd)} || exit\n{command}"
        return wrap_command(_PROLOGUE + script, self.spec.path(), merged, None)

    def _run(self, command, *, timeout=None, cwd=None, env=None, on_output=None, cancel=None, stdin=None,
             pty=False) -> tuple[CommandResult, bytes]:
        line = self.remote_command_line(command, cwd, env, pty)
        start = time.monotonic()
        if not acquire_slot(self._slots, cancel):
            return CommandResult(command, None, "", "", time.monotonic() - start, cancelled=True), b""
        try:
            transport, chan = self._open_channel()
            run = _RemoteRun(self, transport, chan, on_output, pty)
            return run.execute(line, command, timeout=timeout, cancel=cancel, stdin=stdin, pty=pty, start=start)
        finally:
            self._slots.release()

    def open_stream(self, command: str) -> HostStream:
        # It holds one of the host's sessions for as long as it lives: with a single one there is none to spare.
        if self.spec.max_sessions <= 1 or not self._slots.acquire(blocking=False):
            raise HostError(f"{self.name}: no SSH session to spare for a process kept open (max_sessions="
                            f"{self.spec.max_sessions})")
        try:
            _, chan = self._open_channel()
            chan.exec_command(self.remote_command_line(command))
        except BaseException as e:
            self._slots.release()
            if isinstance(e, (paramiko.SSHException, EOFError, OSError)):
                raise HostError(f"{self.name}: cannot start a process kept open: {e}") from None
            raise
        return _SSHStream(chan, self._slots)

    def _kill_group(self, transport: paramiko.Transport, pgid: int) -> bool:
        """TERM the remote process group, KILL it after a grace period; True if the kill ran."""
        # `kill -0` would count zombies, which linger in the group until their new parent
        # reaps them; ps tells the living from the dead.
        script = (
            f"g={pgid}\n"
            "alive() {\n"
            "  command -v ps >/dev/null || { kill -0 -- -$g 2>/dev/null; return; }\n"
            "  ps -e -o pgid= -o stat= | awk -v g=$g '$1 == g && $2 !~ /^Z/ {f = 1} END {exit !f}'\n"
            "}\n"
            "kill -TERM -- -$g 2>/dev/null || exit 0\n"
            f"for _ in $(seq {int(KILL_GRACE_S * 10)}); do sleep 0.1; alive || exit 0; done\n"
            "kill -KILL -- -$g 2>/dev/null; exit 0\n"
        )
        line = wrap_command(script, self.spec.path(), {}, None)
        with self._kill_lock:
            deadline = time.monotonic() + self._timeout(self.endpoint)
            while time.monotonic() < deadline and transport.is_active():
                try:
                    chan = transport.open_session(timeout=self._timeout(self.endpoint))
                except paramiko.ChannelException:
                    time.sleep(0.05)  # every session in use: one of them ends soon
                    continue
                except (paramiko.SSHException, EOFError, OSError):
                    return False
                try:
                    chan.exec_command(line)
                    chan.shutdown_write()
                    chan.status_event.wait(KILL_GRACE_S + self._timeout(self.endpoint))
                    return chan.exit_status_ready()
                except (paramiko.SSHException, EOFError, OSError):
                    return False
                finally:
                    chan.close()
        return False



class _SSHStream(HostStream):
    """A process on its own channel; closing the channel's write side ends it (its stdin sees EOF)."""

    def __init__(self, chan: paramiko.Channel, slots: threading.BoundedSemaphore):
        self.chan = chan
        self.slots: threading.BoundedSemaphore | None = slots
        self.errors = bytearray()
        threading.Thread(target=self._keep_stderr, daemon=True).start()

    def _keep_stderr(self) -> None:
        try:
            for chunk in iter(lambda: self.chan.recv_stderr(4096), b""):
                self.errors = (self.errors + chunk)[-4096:]
        except (paramiko.SSHException, EOFError, OSError):
            pass

    def write(self, data: bytes) -> None:
        try:
            self.chan.sendall(data)
        except (paramiko.SSHException, EOFError) as e:
            raise OSError(str(e) or "the channel is closed") from None

    def read(self) -> bytes:
        try:
            return self.chan.recv(65536)
        except (paramiko.SSHException, EOFError, OSError):
            return b""

    def stderr_tail(self) -> str:
        return _PGID_MARK.sub(b"", bytes(self.errors)).decode("utf-8", "replace")

    def close(self) -> None:
        _shutdown_write(self.chan)
        self.chan.status_event.wait(5)
        self.chan.close()
        slots, self.slots = self.slots, None
        if slots is not None:
            slots.release()


# --------------------------------------------------------------------------- helpers


def _tune_socket(sock: socket.socket, keepalive_s: float) -> None:
    # Small request/reply packets (channel open, exec, exit status) must not wait for
    # delayed ACKs (Nagle): that costs ~40 ms per command.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # TCP keepalive notices a peer that vanished without closing (power loss, network cut)
    # while the connection sits idle; SSH keepalives alone expect no answer.
    idle = max(1, int(keepalive_s))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for opt, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", idle), ("TCP_KEEPCNT", 3),
                       ("TCP_USER_TIMEOUT", idle * 4 * 1000)):
        if hasattr(socket, opt):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), value)
    sock.settimeout(None)


def _lists_host(path: Path, name: str) -> bool:
    try:
        return paramiko.HostKeys(str(path)).lookup(name) is not None
    except Exception:  # noqa: BLE001
        return False


def _handshake_message(label: str, where: str, e: BaseException, timeout: float) -> str:
    text = str(e) or type(e).__name__
    # paramiko's handshake wait ends quietly at the timeout; the next call then finds "No existing session".
    if "banner" in text.lower() or "no existing session" in text.lower():
        return (f"{label}: {where} did not answer as an SSH server within {timeout:g}s ({text}); check the port "
                f"and that sshd (not another service) listens there")
    if isinstance(e, (socket.timeout, TimeoutError)) or "timeout" in text.lower():
        return f"{label}: {where} stopped answering during the SSH handshake (timeout {timeout:g}s); check the host"
    return f"{label}: SSH handshake with {where} failed: {text}; check the host and the ssh config"
