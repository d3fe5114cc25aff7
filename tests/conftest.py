"""Shared fixtures: a real OpenSSH server on 127.0.0.1 and host pools pointed at it.

One sshd serves the whole test session; tests that restart, kill or re-key a server
start their own with `sshd_factory`. Every pool points at its own ssh config and
known_hosts files, never at ~/.ssh.
"""

from __future__ import annotations

import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools.hosts import HostPool, HostSpec, SSHSettings  # noqa: E402

import system_packages  # noqa: E402
import tiers  # noqa: E402
from sshd import SSHD, SSHD_BINARY, keygen, unique_marker  # noqa: E402


@pytest.hookimpl(tryfirst=True)  # before -m selects: the slow tier's marks must be on the items by then
def pytest_collection_modifyitems(config, items):
    tiers.mark_and_select(config, items)


def pytest_configure(config):
    """What the tests need of the system, installed before the first test where this user can (root, or sudo -n),
    else one line that says what to install (tests/system_packages.py). Not for the GPU tests, which run on a
    machine of their own (docs/gpu.md), nor for a collection that runs nothing."""
    if "gpu" in (config.option.markexpr or "") or config.option.collectonly:
        return
    need = system_packages.missing()
    if need:
        print(f"installing the system packages the tests need: {' '.join(need)}", file=sys.stderr, flush=True)
        problem = system_packages.install(need)
        if problem:
            pytest.exit(problem, returncode=4)


def pytest_terminal_summary(terminalreporter, config):
    tiers.summary(terminalreporter)


# Started in the background by a shell without job control, the suite inherits SIGINT ignored, and so would
# every `agent` it starts (an ignored signal stays ignored across exec): each Ctrl-C test would then send a
# signal nobody gets. Python's own handler, as under a terminal; the processes the tests start get the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _need_sshd() -> None:
    if not (Path(SSHD_BINARY).exists() and shutil.which("ssh-keygen")):
        pytest.fail(f"the SSH tests need OpenSSH's server ({SSHD_BINARY}) and ssh-keygen: "
                    f"install openssh-server and openssh-client")


@pytest.fixture(scope="session")
def ssh_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ssh")


@pytest.fixture(scope="session")
def client_key(ssh_root) -> Path:
    """An unencrypted ed25519 key that every test sshd accepts."""
    _need_sshd()
    return keygen(ssh_root / "client" / "id_ed25519")


@pytest.fixture(scope="session")
def sshd(ssh_root, client_key):
    """The shared server. Tests must not stop, restart or re-key it."""
    server = SSHD(ssh_root / "sshd", authorized_keys=[client_key]).start()
    yield server
    server.stop()


@pytest.fixture
def sshd_factory(tmp_path, client_key):
    """Start servers of a test's own (to restart, kill or re-key); all are stopped afterwards."""
    started: list[SSHD] = []

    def make(name: str = "sshd", **kwargs) -> SSHD:
        kwargs.setdefault("authorized_keys", [client_key])
        server = SSHD(tmp_path / name, **kwargs).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@dataclass
class SSHWorld:
    """Files a pool reads (ssh config, known_hosts) and the pools made from them."""

    root: Path
    client_key: Path
    config_path: Path = field(init=False)
    known_hosts: Path = field(init=False)
    project_known_hosts: Path = field(init=False)
    pools: list[HostPool] = field(default_factory=list)
    events: list[tuple[str, dict]] = field(default_factory=list)

    def __post_init__(self):
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_path = self.root / "ssh_config"
        self.known_hosts = self.root / "known_hosts"
        self.project_known_hosts = self.root / "data" / "known_hosts"
        self.config_path.write_text("")
        self.known_hosts.write_text("")

    def add_host_alias(self, alias: str, server: SSHD, *, key: Path | None = None, extra: str = "") -> None:
        """A ~/.ssh/config entry for `server`, and its key in known_hosts."""
        with self.config_path.open("a") as f:
            f.write(f"Host {alias}\n  HostName 127.0.0.1\n  Port {server.port}\n  User {server.user}\n"
                    f"  IdentityFile {key or self.client_key}\n  IdentitiesOnly yes\n{extra}\n")
        self.know(server)

    def know(self, server: SSHD) -> None:
        with self.known_hosts.open("a") as f:
            f.write(server.known_hosts_line())

    def settings(self, **overrides) -> SSHSettings:
        values = dict(config_path=self.config_path, known_hosts_paths=[self.known_hosts],
                      project_known_hosts=self.project_known_hosts, connect_timeout=5.0)
        values.update(overrides)
        return SSHSettings(**values)

    def pool(self, *specs: HostSpec, settings: SSHSettings | None = None) -> HostPool:
        pool = HostPool(list(specs), on_event=lambda kind, data: self.events.append((kind, data)),
                        settings=settings or self.settings())
        self.pools.append(pool)
        return pool


@pytest.fixture
def ssh_world(tmp_path, client_key, monkeypatch):
    """A clean client side: no agent, own config and known_hosts; every pool closed afterwards."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    world = SSHWorld(tmp_path / "client", client_key)
    yield world
    for pool in world.pools:
        pool.close()


@pytest.fixture
def ssh_host_spec(sshd, ssh_world) -> HostSpec:
    """A spec for the shared server, reachable through the alias `box` in the world's config."""
    ssh_world.add_host_alias("box", sshd)
    return HostSpec(name="box")



# --------------------------------------------------------------------------- behaviour both transports share


class HostBehaviour:
    """Checks every transport must pass; each takes a Host and asserts on what really happened."""

    MiB = 1024 * 1024

    def big_output_on_both_streams(self, host) -> None:
        n = 5 * self.MiB
        # Both streams written at once: a reader that drains one stream at a time deadlocks here.
        r = host.run(f"(yes out | head -c {n}) & (yes err | head -c {n} >&2); wait", timeout=60)
        assert r.exit_code == 0, r.stderr[-500:]
        assert len(r.stdout) == n and len(r.stderr) == n
        assert set(r.stdout.splitlines()[:-1]) == {"out"}
        assert set(r.stderr.splitlines()[:-1]) == {"err"}

    def timeout_kills_process_group(self, host) -> None:
        parent, child = unique_marker(), unique_marker()
        # A background child and a foreground sleep: the whole group must go, not just the shell.
        r = host.run(f"sleep 1000 {child} & sleep 1000 {parent}", timeout=1)
        assert r.timed_out and r.exit_code is None
        assert r.duration_s < 6, r.duration_s
        self.assert_gone(parent, child)

    def cancel_kills_process(self, host) -> None:
        import threading

        marker = unique_marker()
        cancel = threading.Event()
        threading.Timer(0.5, cancel.set).start()
        r = host.run(f"echo started; sleep 1000 {marker}", cancel=cancel, timeout=60)
        assert r.cancelled and r.exit_code is None and not r.timed_out
        assert r.stdout == "started\n"
        assert r.duration_s < 6, r.duration_s
        self.assert_gone(marker)

    def interrupt_kills_process(self, host) -> None:
        """A KeyboardInterrupt inside run() (a hard Ctrl-C) must not leave the command running."""
        marker = unique_marker()

        def interrupt(stream, chunk):
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            host.run(f"echo started; sleep 1000 {marker}", on_output=interrupt)
        self.assert_gone(marker, within=10)

    def concurrency_is_capped(self, host, workdir: Path, commands: int = 20) -> list[int]:
        """Run `commands` at once; each records, under a lock, how many were running with it."""
        import concurrent.futures

        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "running").write_text("0\n")
        d = str(workdir)
        script = (
            f"( flock 9; n=$(( $(cat {d}/running) + 1 )); echo $n > {d}/running; echo $n >> {d}/seen ) 9>{d}/lock; "
            f"sleep 0.4; "
            f"( flock 9; echo $(( $(cat {d}/running) - 1 )) > {d}/running ) 9>{d}/lock"
        )
        with concurrent.futures.ThreadPoolExecutor(commands) as pool:
            results = list(pool.map(lambda _: host.run(script, timeout=60), range(commands)))
        assert all(r.exit_code == 0 for r in results), [r.stderr for r in results if r.exit_code]
        seen = [int(x) for x in (workdir / "seen").read_text().split()]
        assert len(seen) == commands
        return seen

    @staticmethod
    def assert_gone(*markers: str, within: float = 5.0) -> None:
        import time

        from sshd import pids_matching

        deadline = time.monotonic() + within
        while True:
            alive = {m: pids_matching(f"sleep 1000 {m}") for m in markers}
            if not any(alive.values()):
                return
            if time.monotonic() > deadline:
                from sshd import kill_pids

                for pids in alive.values():
                    kill_pids(pids)
                raise AssertionError(f"processes still running after the kill: {alive}")
            time.sleep(0.05)


@pytest.fixture(scope="session")
def behaviour() -> HostBehaviour:
    return HostBehaviour()


@pytest.fixture
def sigint_raises():
    """Ctrl-C as at a terminal: SIGINT raises KeyboardInterrupt in this process. A test run started
    in the background by a shell without job control inherits SIGINT ignored, and a test that
    sends itself SIGINT would then see nothing happen."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
