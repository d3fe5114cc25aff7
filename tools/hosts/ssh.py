"""SSH transport of the Host interface, through paramiko.

One connection (paramiko Transport) per host, opened on the first command and reused by
every later one; one channel per command; at most `HostSpec.max_sessions` commands at once
(the rest wait). A connection that died is noticed before the next command and opened
again; a command whose connection died while it ran is reported as such and never re-run.

Where a host is and how to reach it comes from `~/.ssh/config` (HostName, User, Port,
IdentityFile, IdentitiesOnly, ProxyCommand, ProxyJump, HostKeyAlias, UserKnownHostsFile,
ConnectTimeout). ProxyJump hops are SSH connections of their own, and the next hop goes
through a direct-tcpip channel of the previous one, as `ssh -J` does.

Host keys are checked against known_hosts with a reject policy: an unknown key is refused
unless the operator trusted its exact fingerprint; a changed key is always refused.

Killing a command: the remote script first reports its process group (sshd starts every
session as a session leader, so the group is the command and everything it started); a
timeout or cancel then sends TERM, and KILL after a grace period, to that group over a
second channel. Closing our end of a channel alone would leave the process running.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import re
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import paramiko
from paramiko.auth_strategy import AuthFailure, AuthStrategy, InMemoryPrivateKey, OnDiskPrivateKey

from tools.hosts import (
    ChangedHostKeyError,
    CommandResult,
    Host,
    HostError,
    HostSpec,
    OutputListener,
    SSHSettings,
    UnknownHostKeyError,
    acquire_slot,
    check_env_names,
    sudo_hint,
    wrap_command,
)

EventSink = Callable[[str, dict], None]

READ_CHUNK = 65536
KILL_GRACE_S = 2.0  # between TERM and KILL of a timed-out or cancelled command
DRAIN_AFTER_KILL_S = 5.0  # how long to collect the last output of a killed command
MAX_JUMPS = 8

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


# --------------------------------------------------------------------------- where a host is


@dataclass(frozen=True)
class Endpoint:
    """One SSH hop after ~/.ssh/config has been applied."""

    alias: str  # the name it was asked for (config alias or address)
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    identities_only: bool
    proxy_command: str | None
    proxy_jump: tuple[str, ...]  # hops to go through, first one first
    host_key_alias: str | None
    known_hosts_files: tuple[str, ...]  # UserKnownHostsFile from the config
    connect_timeout: float | None

    @property
    def address(self) -> str:
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{self.user}@{host}:{self.port}"

    @property
    def known_hosts_name(self) -> str:
        """The name this host's key is filed under in known_hosts, as OpenSSH files it."""
        host = self.host_key_alias or self.hostname
        return host if self.port == 22 else f"[{host}]:{self.port}"


def parse_target(target: str) -> tuple[str | None, str, int | None]:
    """`user@host:port`, `host`, `[v6addr]:port` -> (user, host, port)."""
    user = None
    if "@" in target:
        user, target = target.rsplit("@", 1)
    port = None
    m = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?", target)
    if m:
        host, port = m.group(1), m.group(2)
    elif target.count(":") == 1:
        host, port = target.split(":")
    else:
        host = target  # a name, or a bare IPv6 address without a port
    if not host:
        raise HostError(f"ssh target {target!r} has no host name; write user@host[:port] or a ~/.ssh/config alias")
    if port is not None and not port.isdigit():
        raise HostError(f"ssh target {target!r}: port {port!r} is not a number")
    return user or None, host, int(port) if port else None


def load_ssh_config(path: Path | None) -> paramiko.SSHConfig:
    if path is None or not Path(path).is_file():
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except Exception as e:  # noqa: BLE001 - paramiko raises several kinds for a bad file
        raise HostError(f"cannot read ssh config {path}: {e}; fix the file or point SSHSettings.config_path elsewhere")


def resolve(target: str, config: paramiko.SSHConfig) -> Endpoint:
    """Apply ~/.ssh/config to a target; what the target spells out (user, port) wins, as with ssh."""
    user, host, port = parse_target(target)
    try:
        found = config.lookup(host)
    except Exception as e:  # noqa: BLE001 - e.g. a Match exec that fails
        raise HostError(f"ssh config lookup for {host!r} failed: {e}")
    jumps = found.get("proxyjump")
    proxy_command = found.get("proxycommand")
    timeout = found.get("connecttimeout")
    return Endpoint(
        alias=host,
        hostname=found.get("hostname", host),
        port=port or int(found.get("port", 22)),
        user=user or found.get("user") or _local_user(),
        identity_files=tuple(os.path.expanduser(p) for p in found.get("identityfile", [])),
        identities_only=found.get("identitiesonly", "no").lower() == "yes",
        proxy_command=None if not proxy_command or proxy_command.lower() == "none" else proxy_command,
        proxy_jump=() if not jumps or jumps.lower() == "none" else tuple(j.strip() for j in jumps.split(",")),
        host_key_alias=found.get("hostkeyalias"),
        known_hosts_files=tuple(os.path.expanduser(p) for p in found.get("userknownhostsfile", "").split()),
        connect_timeout=float(timeout) if timeout else None,
    )


def _local_user() -> str:
    import getpass  # noqa: PLC0415

    return getpass.getuser()


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


# --------------------------------------------------------------------------- authentication


class _KeyAuth(AuthStrategy):
    """Public keys only: the agent's first, then key files. Never a password or a passphrase prompt."""

    def __init__(self, endpoint: Endpoint, use_agent: bool):
        super().__init__(ssh_config=None)
        self.endpoint = endpoint
        self.use_agent = use_agent and bool(os.environ.get("SSH_AUTH_SOCK"))
        self.agent: paramiko.Agent | None = None
        self.agent_keys = 0
        self.encrypted: list[str] = []  # key files that need a passphrase we will not ask for
        self.unreadable: list[str] = []
        self.tried_files: list[str] = []

    def _key_files(self) -> list[tuple[str, str]]:
        if self.endpoint.identity_files:
            return [(p, "ssh-config") for p in self.endpoint.identity_files]
        home = os.path.expanduser("~/.ssh")
        return [(os.path.join(home, n), "implicit-home") for n in ("id_ed25519", "id_ecdsa", "id_rsa")]

    def get_sources(self):
        user = self.endpoint.user
        offered: set[str] = set()
        if self.use_agent:
            try:
                self.agent = paramiko.Agent()
            except paramiko.SSHException:
                self.agent = None  # a stale SSH_AUTH_SOCK: go on with key files, as ssh does
                self.use_agent = False
        if self.agent is not None:
            wanted = self._configured_public_fingerprints() if self.endpoint.identities_only else None
            for key in self.agent.get_keys():
                if wanted is not None and key.fingerprint not in wanted:
                    continue
                self.agent_keys += 1
                offered.add(key.fingerprint)
                yield InMemoryPrivateKey(user, key)
        for path, source in self._key_files():
            if not os.path.isfile(path):
                continue
            try:
                pkey = paramiko.PKey.from_path(path)
            except paramiko.PasswordRequiredException:
                self.encrypted.append(path)
                continue
            except TypeError as e:
                # PKey.from_path lets cryptography's "Key is password-protected" TypeError through.
                (self.encrypted if "password" in str(e).lower() else self.unreadable).append(path)
                continue
            except (paramiko.SSHException, ValueError, OSError):
                self.unreadable.append(path)
                continue
            if pkey.fingerprint in offered:
                continue
            self.tried_files.append(path)
            yield OnDiskPrivateKey(user, source, Path(path), pkey)

    def _configured_public_fingerprints(self) -> set[str]:
        out = set()
        for path, _ in self._key_files():
            try:
                blob = paramiko.PublicBlob.from_file(path + ".pub")
            except (OSError, ValueError):
                continue  # no readable .pub: that key cannot be picked out of the agent's
            out.add("SHA256:" + base64.b64encode(hashlib.sha256(blob.key_blob).digest()).decode().rstrip("="))
        return out

    def close(self) -> None:
        if self.agent is not None:
            self.agent.close()

    def failure_message(self, label: str) -> str:
        ep = self.endpoint
        if self.encrypted and not self.agent_keys:
            files = ", ".join(self.encrypted)
            agent = "no ssh-agent is running (SSH_AUTH_SOCK is not set)" if not self.use_agent else \
                "the ssh-agent offers no key for it"
            return (f"{label}: cannot log in: key {files} is protected by a passphrase and {agent}. "
                    f"upgrade-agent never asks for passphrases: load the key into an agent first "
                    f"(eval $(ssh-agent); ssh-add {self.encrypted[0]}) and run again.")
        tried = []
        if self.agent_keys:
            tried.append(f"{self.agent_keys} agent key(s)")
        tried += self.tried_files
        tried += [f"{p} (passphrase-protected, skipped)" for p in self.encrypted]
        tried += [f"{p} (not a readable private key)" for p in self.unreadable]
        what = ", ".join(tried) if tried else "no keys at all (no agent, no IdentityFile, no ~/.ssh/id_*)"
        return (f"{label}: authentication as {ep.user!r} failed; tried {what}. Check that the public key is "
                f"in ~{ep.user}/.ssh/authorized_keys on the host, and User/IdentityFile in the ssh config.")


# --------------------------------------------------------------------------- the host


class SSHHost(Host):
    """A host reached over SSH: one pooled connection, one channel per command."""

    def __init__(self, spec: HostSpec, on_event: EventSink | None = None, settings: SSHSettings | None = None):
        self.spec = spec
        self.on_event = on_event or (lambda kind, data: None)
        self.settings = settings or SSHSettings()
        self._config = load_ssh_config(self.settings.config_path)
        self.endpoint = resolve(spec.target or spec.name, self._config)
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


class _RemoteRun:
    """One command on one channel: drain both streams, enforce timeout and cancel, collect the outcome."""

    def __init__(self, host: SSHHost, transport: paramiko.Transport, chan: paramiko.Channel,
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
