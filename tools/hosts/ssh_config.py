"""Where an SSH host is: a target (`user@host:port`, an alias) with ~/.ssh/config applied.

The options read are HostName, User, Port, IdentityFile, IdentitiesOnly, ProxyCommand,
ProxyJump, HostKeyAlias, UserKnownHostsFile and ConnectTimeout; what the target spells out
(user, port) wins over the config, as with ssh.
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass
from pathlib import Path

import paramiko

from tools.hosts.base import HostError


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
    return getpass.getuser()
