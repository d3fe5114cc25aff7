"""The local transport: commands on this machine through subprocess."""

from __future__ import annotations

import os
import threading

import pytest

from tools.hosts import DEFAULT_PATH, HostError, HostPool, HostSpec, LocalHost, wrap_command

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def host():
    return LocalHost(HostSpec(name="here", transport="local"))


def test_exit_code_and_both_streams(host):
    r = host.run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not r.ok and not r.timed_out and not r.cancelled and not r.connection_lost


def test_clean_bash_with_explicit_path_and_env(tmp_path):
    spec = HostSpec(name="here", transport="local", path_prefix=[str(tmp_path / "bin")], env={"FROM_SPEC": "s"})
    r = LocalHost(spec).run('echo "$PATH"; echo "$FROM_SPEC $FROM_CALL"; echo "$-"; shopt -q expand_aliases; echo $?',
                            env={"FROM_CALL": "c d"})
    path, values, flags, aliases = r.stdout.splitlines()
    assert path == f"{tmp_path / 'bin'}:{DEFAULT_PATH}"
    assert values == "s c d"
    assert "i" not in flags  # not interactive: no rc files, no aliases
    assert aliases == "1"


def test_cwd_and_a_missing_cwd(host, tmp_path):
    assert host.run("pwd", cwd=str(tmp_path)).stdout == f"{tmp_path}\n"
    r = host.run("echo ran", cwd=str(tmp_path / "missing"))
    assert r.exit_code != 0 and r.stdout == "" and "missing" in r.stderr


def test_output_is_streamed_while_running(host):
    seen: list[tuple[str, bytes]] = []
    r = host.run("echo one; sleep 0.2; echo two >&2", on_output=lambda s, b: seen.append((s, b)))
    assert r.exit_code == 0
    assert b"".join(b for s, b in seen if s == "stdout") == b"one\n"
    assert b"".join(b for s, b in seen if s == "stderr") == b"two\n"


def test_five_mib_on_both_streams(host, behaviour):
    behaviour.big_output_on_both_streams(host)


def test_timeout_kills_the_process_group(host, behaviour):
    behaviour.timeout_kills_process_group(host)


def test_cancel_kills_the_process(host, behaviour):
    behaviour.cancel_kills_process(host)


def test_concurrency_is_capped_at_max_sessions(tmp_path, behaviour):
    host = LocalHost(HostSpec(name="here", transport="local", max_sessions=4))
    seen = behaviour.concurrency_is_capped(host, tmp_path / "conc", commands=12)
    assert max(seen) <= 4
    assert max(seen) >= 2  # they did run side by side


def test_cancel_while_waiting_for_a_slot(tmp_path):
    host = LocalHost(HostSpec(name="here", transport="local", max_sessions=1))
    blocker = threading.Thread(target=host.run, args=("sleep 1",))
    blocker.start()
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    r = host.run(f"touch {tmp_path}/ran", cancel=cancel)
    blocker.join()
    assert r.cancelled and r.exit_code is None
    assert not (tmp_path / "ran").exists()


def test_stdin_and_binary_files(host, tmp_path):
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    target = tmp_path / "blob"
    host.write_file(str(target), data)
    assert target.read_bytes() == data
    assert host.read_file(str(target)) == data
    with pytest.raises(HostError, match="cannot read"):
        host.read_file(str(tmp_path / "absent"))


def test_sudo_wanting_a_password_gets_a_hint(tmp_path):
    # A stand-in sudo that answers like sudo -n does when a password would be needed.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sudo").write_text("#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n")
    (bin_dir / "sudo").chmod(0o755)
    host = LocalHost(HostSpec(name="here", transport="local", path_prefix=[str(bin_dir)]))
    r = host.run("sudo -n true")
    assert r.exit_code == 1
    assert r.hint and "password" in r.hint and "NOPASSWD" in r.hint
    assert host.run("echo fine").hint is None


def test_bad_env_names_are_refused(host):
    with pytest.raises(HostError, match="not valid"):
        host.run("true", env={"A;rm -rf /": "x"})
    with pytest.raises(HostError, match="not valid"):
        wrap_command("true", DEFAULT_PATH, {"X Y": "1"}, None)


def test_pty_is_refused_locally(host):
    with pytest.raises(HostError, match="pty"):
        host.run("true", pty=True)


def test_wrap_command_runs_nothing_when_cwd_is_missing(tmp_path):
    line = wrap_command("echo a; echo b", DEFAULT_PATH, {"K": "v w"}, str(tmp_path / "missing"))
    import subprocess

    r = subprocess.run(["bash", "-c", line], capture_output=True, text=True)
    assert r.returncode != 0 and r.stdout == ""
    ok = subprocess.run(["bash", "-c", wrap_command('echo "$K"; pwd', DEFAULT_PATH, {"K": "v w"}, str(tmp_path))],
                        capture_output=True, text=True)
    assert ok.stdout == f"v w\n{tmp_path}\n"


def test_pool_refuses_hosts_outside_the_session():
    pool = HostPool([HostSpec(name="here", transport="local")])
    assert isinstance(pool.get("here"), LocalHost)
    assert pool.get("here") is pool.get("here")
    with pytest.raises(HostError, match="not in this session's hosts"):
        pool.get("elsewhere")
    pool.close()


def test_process_group_is_separate_from_ours(host):
    r = host.run("ps -o pgid= -p $$")
    assert int(r.stdout) != os.getpgrp()



def test_an_interrupt_while_waiting_kills_the_local_process_group(host, behaviour):
    """A KeyboardInterrupt inside run() (a hard Ctrl-C) must not leave the command running."""
    behaviour.interrupt_kills_process(host)
