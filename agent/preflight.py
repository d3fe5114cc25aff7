"""Reaching every host of a scripted run before the model's first turn.

A host that cannot be reached, or whose key nobody has trusted, would otherwise surface as crashed
tool calls in the middle of the run, and the model would write a final answer over them. Found
here, it ends the run with one line that says what to do, before anything is asked of the model.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tools.hosts import ChangedHostKeyError, HostError, HostPool, UnknownHostKeyError
from tools.sandbox import SandboxedHosts

PREFLIGHT_TIMEOUT_S = 30.0


@dataclass
class Unreached:
    host: str
    problem: str  # one line: what went wrong and what to do
    key: bool = False  # its host key is unknown or changed: the operator's to decide, not the network's fault


def reach_hosts(pool: HostPool, names: list[str], timeout_s: float = PREFLIGHT_TIMEOUT_S) -> list[Unreached]:
    """Run `true` on every host at once; the hosts that could not run it, in the order given."""
    if not names:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(names))) as pool_exec:
        problems = list(pool_exec.map(lambda name: _reach(pool, name, timeout_s), names))
    return [Unreached(name, p[0], key=p[1]) for name, p in zip(names, problems) if p is not None]


def _reach(pool: HostPool, name: str, timeout_s: float) -> tuple[str, bool] | None:
    """None when the host ran `true`; else (why, whether its host key is the reason)."""
    try:
        result = pool.get(name).run("true", timeout=timeout_s)
    except UnknownHostKeyError as e:
        return (f"{name}: unknown host key {e.key_type} {e.fingerprint}. Check it with the host's owner (on the host: "
                f"ssh-keygen -lf /etc/ssh/ssh_host_{_key_file(e.key_type)}_key.pub); to trust it, run again with "
                f"--trust-host-key {e.fingerprint}, or add `trust_host_key: \"{e.fingerprint}\"` to host {name} "
                "in the goal file"), True
    except ChangedHostKeyError as e:
        return str(e), True
    except HostError as e:
        said = str(e)
        return f"cannot reach {name}: {said.removeprefix(name + ': ')}", False
    if result.timed_out:
        return f"cannot reach {name}: `true` did not finish within {timeout_s:g} s", False
    if result.connection_lost:
        return f"cannot reach {name}: the connection was lost while running `true`", False
    if result.exit_code != 0:
        said = (result.stderr.strip().splitlines() or ["no message"])[-1]
        return f"cannot use {name}: `true` exited {result.exit_code} ({said})", False
    # What will guard the host's reads, found now and recorded (the pool's read_sandbox event): a host where
    # no sandbox can be set up is named before the first turn, and its reads then need an approval.
    SandboxedHosts(pool).info(name, pool.get(name))
    return None


def _key_file(key_type: str) -> str:
    """The host key file's middle part for a key type (ssh-ed25519 -> ed25519, ecdsa-sha2-nistp256 -> ecdsa)."""
    for short in ("ed25519", "ecdsa", "rsa", "dsa"):
        if short in key_type:
            return short
    return "*"


def model_server_problem(base_url: str | None, timeout_s: float = 3.0) -> str | None:
    """Why nothing can be asked of the model server at `base_url` (no such name, nothing listening), found in a
    moment before any host is touched or a sim is built; None when a connection opens (what the server then
    answers is the session's business, with its retries). Only an address the operator gave is tried."""
    import socket  # lazy: only a run with an explicit endpoint
    from urllib.parse import urlsplit

    if not base_url:
        return None
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:
        return f"the model server address {base_url!r} is not a URL ({e})"
    if parts.scheme not in ("http", "https") or not host:
        return f"the model server address {base_url!r} is not an http(s) URL"
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.gaierror as e:
        return f"cannot reach model server {base_url}: no address for {host} ({e.strerror})"
    except OSError as e:
        return f"cannot reach model server {base_url}: {e.strerror or e}"
    return None
