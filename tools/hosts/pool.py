"""HostPool: the hosts of a session, opened on first use through the transport their spec names.

The SSH transport is imported only when a session has an SSH host, so a local-only session
never loads paramiko.
"""

from __future__ import annotations

import threading
from typing import Callable

from tools.hosts.base import Host, HostError, HostSpec, SSHSettings
from tools.hosts.local import LocalHost
from tools.hosts.sim import SimHost


class HostPool:
    """The hosts of a session: connected lazily, one connection per host, all closed together."""

    def __init__(self, specs: list[HostSpec] | None = None, on_event: Callable[[str, dict], None] | None = None,
                 settings: SSHSettings | None = None):
        self._specs = {s.name: s for s in (specs or [])}
        self._hosts: dict[str, Host] = {}
        self._lock = threading.Lock()
        # Events for the transcript, e.g. ("host_key_trusted", {host, fingerprint, key_type}).
        self.on_event = on_event or (lambda kind, data: None)
        self.settings = settings or SSHSettings()

    @property
    def names(self) -> list[str]:
        return list(self._specs)

    def spec(self, name: str) -> HostSpec | None:
        return self._specs.get(name)

    def sim_roots(self) -> dict[str, str]:
        """The folder of each simulated host, by name."""
        return {name: str(spec.sim_root) for name, spec in self._specs.items() if spec.sim_root}

    def add(self, spec: HostSpec) -> None:
        with self._lock:
            self._specs[spec.name] = spec

    def trust_host_key(self, name: str, fingerprint: str) -> None:
        """Trust `fingerprint` (SHA256:...) for host `name`, as the operator said in chat.

        The next connection accepts an unknown key with exactly this fingerprint, records
        it (host_key_trusted event) and saves it to the project known_hosts file. It never
        overrides a key that known_hosts already lists differently.
        """
        with self._lock:
            spec = self._specs.get(name)
            if spec is None:
                raise HostError(f"host {name!r} is not in this session's hosts ({', '.join(self._specs) or 'none'})")
            spec.trust_host_key = fingerprint

    def get(self, name: str) -> Host:
        """The host named `name`; connections are opened on its first command, not here."""
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
        if spec.transport == "sim":
            return SimHost(spec)
        from tools.hosts.ssh import SSHHost  # lazy: paramiko is loaded only when a session uses SSH

        return SSHHost(spec, on_event=self.on_event, settings=self.settings)

    def close(self) -> None:
        with self._lock:
            hosts, self._hosts = list(self._hosts.values()), {}
        for h in hosts:
            try:
                h.close()
            except Exception:  # noqa: BLE001 - closing must never stop the others from closing
                pass
