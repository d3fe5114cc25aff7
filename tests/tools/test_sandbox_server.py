"""The read sandbox's server (tools/sandbox/server.py): one launcher per host and session runs every read.

Its sandbox is the launcher's, checked property by property in test_read_sandbox.py (whose `sandboxed()`
reads go through the server, and whose `around` runs the launcher per command). Here: that reads share
one server, that their output never mixes, that a stop, a time bound and a closed host end what runs,
and that a server lost mid-read costs the read nothing but a second run through the launcher.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
import uuid

import pytest

from tools.hosts import HostSpec, LocalHost
from tools.sandbox import SandboxedHost, probe_host
from tools.sandbox.server import SandboxServer


@pytest.fixture
def local():
    host = LocalHost(HostSpec(name="l", transport="local"))
    yield host
    host.close()


@pytest.fixture
def starts(monkeypatch):
    """How many servers were started, and the last one."""
    seen: list[SandboxServer] = []
    real = SandboxServer.start.__func__

    def counting(cls, *args, **kwargs):
        server = real(cls, *args, **kwargs)
        seen.append(server)
        return server

    monkeypatch.setattr(SandboxServer, "start", classmethod(counting))
    return seen


def sandboxed(host, mechanism=None, ports=None) -> SandboxedHost:
    info = probe_host(host)
    if mechanism:
        info = dataclasses.replace(info, mechanism=mechanism)
    return SandboxedHost(host, info, ports=ports)


def running(command: str, host) -> int:
    """Processes whose whole command line is `command` (not the shell that asks, which holds its text)."""
    return int(host.run(f"pgrep -fcx -- '{command}' || true", timeout=10).stdout.strip() or 0)


@pytest.mark.parametrize("mechanism", ["namespaces", "landlock"])
def test_reads_share_one_server_per_mechanism(local, starts, mechanism):
    sh = sandboxed(local, mechanism)
    results = [sh.run(f"echo {i}; id -u", timeout=10) for i in range(5)]
    assert [r.stdout.split()[0] for r in results] == ["0", "1", "2", "3", "4"]
    assert all(r.exit_code == 0 for r in results)
    assert len(starts) == 1 and starts[0].hello["mechanism"] == mechanism
    uid = results[0].stdout.split()[1]
    assert uid == "1999999999", "the reader uid (root here, in both mechanisms)"
    # each read is its own process, with its own scratch
    r = sh.run('echo mine > "$TMPDIR/f"; cat "$TMPDIR/f"', timeout=10)
    assert r.stdout == "mine\n"
    assert sh.run('ls -A "$TMPDIR"', timeout=10).stdout == ""


def test_parallel_reads_each_get_their_own_output(local, starts):
    sh = sandboxed(local)
    results: dict[int, object] = {}

    def read(i):
        # 200 KB each, on both streams: many frames, which must reach their own read only
        results[i] = sh.run(f"yes {i} | head -c 200000; yes e{i} | head -c 50000 >&2; exit {i}", timeout=30)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(starts) == 1
    for i, r in results.items():
        assert r.exit_code == i, r
        assert len(r.stdout) == 200000 and set(r.stdout.split()) == {str(i)}, i
        assert len(r.stderr) == 50000 and set(r.stderr.split()) == {f"e{i}"}, i


def test_output_streams_to_the_listener_as_it_comes(local):
    sh = sandboxed(local)
    seen: list[tuple[float, str, bytes]] = []
    start = time.monotonic()
    r = sh.run("echo first; sleep 1; echo second >&2", timeout=10,
               on_output=lambda stream, data: seen.append((time.monotonic() - start, stream, data)))
    assert r.exit_code == 0
    assert [(s, d) for _, s, d in seen] == [("stdout", b"first\n"), ("stderr", b"second\n")]
    assert seen[0][0] < seen[1][0] - 0.5, "the first line came before the command ended"


def test_a_stop_a_bound_and_a_closed_host_end_what_the_read_started(starts):
    host = LocalHost(HostSpec(name="l", transport="local"))
    sh = sandboxed(host)
    marker = f"77.{uuid.uuid4().int % 10**6:06d}"
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    r = sh.run(f"sleep {marker} & sleep {marker}", timeout=60, cancel=cancel)
    assert r.cancelled and r.exit_code is None and r.hint is None, r
    assert r.duration_s < 10
    r = sh.run(f"sleep {marker}", timeout=1)
    assert r.timed_out and r.exit_code == 124, r
    time.sleep(0.2)
    assert running(f"sleep {marker}", host) == 0
    # a read still running when the session ends
    outcome = {}
    reader = threading.Thread(target=lambda: outcome.setdefault("r", sh.run(f"sleep {marker}", timeout=60)))
    reader.start()
    time.sleep(0.5)
    server_process = starts[0].stream.proc
    host.close()
    reader.join(30)
    assert not reader.is_alive()
    assert server_process.poll() is not None, "the server ended with the host"
    time.sleep(0.2)
    assert running(f"sleep {marker}", LocalHost(HostSpec(name="x", transport="local"))) == 0


def test_a_server_lost_mid_read_costs_the_read_a_second_run(local, starts):
    sh = sandboxed(local)
    assert sh.run("true", timeout=10).exit_code == 0
    first = starts[0]
    killer = threading.Timer(0.5, lambda: first.stream.proc.send_signal(signal.SIGKILL))
    killer.start()
    r = sh.run("sleep 1.5; echo done", timeout=20)
    assert r.exit_code == 0 and r.stdout == "done\n" and not r.connection_lost, r
    assert not first.usable
    # the next read starts another server
    assert sh.run("echo again", timeout=10).stdout == "again\n"
    assert len(starts) == 2 and starts[1].usable


def test_a_host_whose_server_cannot_start_reads_through_the_launcher(local, monkeypatch, starts):
    sh = sandboxed(local)
    sh.info = dataclasses.replace(sh.info, python="/nonexistent/python3")  # the server cannot start...
    monkeypatch.setattr("tools.sandbox.host.SandboxedHost.launcher_line",
                        lambda self, command, timeout: f"exec bash -c {command!r}")  # ...the launcher is stood in
    r = sh.run("echo through-the-launcher", timeout=10)
    assert r.stdout == "through-the-launcher\n" and starts == []
    assert local._sandbox_servers and all(server is None for server, _ in local._sandbox_servers.values())


def test_env_cwd_and_a_refusal_read_as_with_the_launcher(local):
    sh = sandboxed(local)
    r = sh.run('pwd; echo "$WHO"', timeout=10, cwd="/etc", env={"WHO": "me"})
    assert r.stdout == "/etc\nme\n", r
    r = sh.run("pwd", timeout=10, cwd="/no/such/dir")
    assert r.exit_code == 1 and "No such file or directory" in r.stderr
    r = sh.run("echo x > /etc/upgrade-agent-test", timeout=10)
    assert r.exit_code != 0 and r.hint and r.hint.startswith("this needs a change or a privilege"), r


def test_over_ssh_the_server_holds_one_session_and_ends_with_the_pool(ssh_world, ssh_host_spec, starts):
    pool = ssh_world.pool(ssh_host_spec)
    host = pool.get("box")
    sh = sandboxed(host)
    marker = f"66.{uuid.uuid4().int % 10**6:06d}"
    assert [sh.run(f"echo {i}", timeout=10).stdout for i in range(3)] == ["0\n", "1\n", "2\n"]
    assert len(starts) == 1
    outcome = {}
    reader = threading.Thread(target=lambda: outcome.setdefault("r", sh.run(f"sleep {marker}", timeout=60)))
    reader.start()
    time.sleep(0.5)
    pool.close()
    reader.join(30)
    assert not reader.is_alive()
    time.sleep(0.5)
    assert running(f"sleep {marker}", LocalHost(HostSpec(name="x", transport="local"))) == 0


def test_over_ssh_a_single_session_host_reads_through_the_launcher(ssh_world, sshd, starts):
    ssh_world.add_host_alias("one", sshd)
    pool = ssh_world.pool(HostSpec(name="one", max_sessions=1))
    r = sandboxed(pool.get("one")).run("id -u", timeout=20)
    assert r.exit_code == 0 and r.stdout == "1999999999\n" and starts == []
