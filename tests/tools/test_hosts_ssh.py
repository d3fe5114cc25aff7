"""The SSH transport against a real OpenSSH server on 127.0.0.1."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import paramiko
import pytest

from tools.hosts import DEFAULT_PATH, ChangedHostKeyError, HostError, HostSpec, UnknownHostKeyError
from tools.hosts.ssh import SSHHost, parse_target

from sshd import closed_port, fingerprint, keygen, kill_pids, pids_matching, unique_marker

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def host(ssh_world, ssh_host_spec) -> SSHHost:
    return ssh_world.pool(ssh_host_spec).get("box")


# --------------------------------------------------------------------------- running commands


def test_exit_code_and_both_streams(host):
    r = host.run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not (r.timed_out or r.cancelled or r.connection_lost)


def test_clean_bash_with_explicit_path_env_and_cwd(ssh_world, sshd, tmp_path):
    ssh_world.add_host_alias("box", sshd)
    spec = HostSpec(name="box", path_prefix=["/opt/tool/bin"], env={"FROM_SPEC": "s"})
    host = ssh_world.pool(spec).get("box")
    r = host.run('echo "$PATH"; echo "$FROM_SPEC $FROM_CALL"; echo "$-"; shopt -q expand_aliases; echo $?; pwd',
                 env={"FROM_CALL": "c 'd'"}, cwd=str(tmp_path))
    path, values, flags, aliases, cwd = r.stdout.splitlines()
    assert path == f"/opt/tool/bin:{DEFAULT_PATH}"
    assert values == "s c 'd'"
    assert "i" not in flags and aliases == "1"
    assert cwd == str(tmp_path)
    assert r.stderr == ""  # the process-group line never reaches the caller


def test_login_environment_does_not_leak_into_the_command(ssh_world, sshd_factory, tmp_path):
    # What rc files of the login shell could export: a BASH_ENV script and an exported function.
    # The login shell itself reads BASH_ENV (it runs before our command line; nothing to do about
    # that); the script says so only when it finds itself in our clean bash, with our PATH.
    evil = tmp_path / "bash_env"
    evil.write_text('case "$PATH" in /opt/marker/bin:*) echo sourced-in-clean-bash;; esac\n')
    server = sshd_factory(extra_config=f'SetEnv BASH_ENV={evil} "BASH_FUNC_ls%%=() {{ echo hijacked; }}" LEAK=1\n')
    ssh_world.add_host_alias("box", server)
    host = ssh_world.pool(HostSpec(name="box", path_prefix=["/opt/marker/bin"])).get("box")
    r = host.run(f"ls -d {tmp_path}; echo \"[$LEAK]\"; echo \"$HOME\"; echo \"[$LANG]\"")
    # HOME is the login user's home as sshd sets it from passwd, whatever HOME this test runs with.
    assert r.stdout.splitlines() == [str(tmp_path), "[]", pwd.getpwuid(os.getuid()).pw_dir, "[]"]
    assert "sourced-in-clean-bash" not in r.stdout + r.stderr


def test_missing_cwd_runs_nothing(host, tmp_path):
    r = host.run(f"echo a; touch {tmp_path}/b", cwd=str(tmp_path / "missing"))
    assert r.exit_code != 0 and r.stdout == "" and "missing" in r.stderr
    assert not (tmp_path / "b").exists()


def test_output_is_streamed_while_running(host):
    seen: list[tuple[float, str, bytes]] = []
    r = host.run("echo one; sleep 1; echo two >&2", on_output=lambda s, b: seen.append((time.monotonic(), s, b)))
    ended = time.monotonic()
    assert r.exit_code == 0
    assert [(s, b) for _, s, b in seen] == [("stdout", b"one\n"), ("stderr", b"two\n")]
    # The first line arrived while the command still slept (measured from its end, not from a
    # start that includes connecting, so a slow machine does not make this fail).
    assert ended - seen[0][0] > 0.5


def test_five_mib_on_both_streams(host, behaviour):
    behaviour.big_output_on_both_streams(host)


def test_stdin_and_binary_files(host, tmp_path):
    data = os.urandom(3 * 1024 * 1024)  # larger than the channel window, every byte value
    target = tmp_path / "blob"
    host.write_file(str(target), data)
    assert target.read_bytes() == data
    assert host.read_file(str(target)) == data
    with pytest.raises(HostError, match="cannot read"):
        host.read_file(str(tmp_path / "absent"))


def test_timeout_kills_the_remote_process_group(host, behaviour):
    behaviour.timeout_kills_process_group(host)
    assert host.run("echo still usable").stdout == "still usable\n"


def test_timeout_kill_escalates_to_sigkill(host, behaviour):
    marker = unique_marker()
    # An ignored signal stays ignored across exec: shell and sleep both shrug off TERM.
    r = host.run(f"trap '' TERM; sleep 1000 {marker}", timeout=1)
    assert r.timed_out and 2 < r.duration_s < 8
    behaviour.assert_gone(marker)


def test_cancel_kills_the_remote_process(host, behaviour):
    behaviour.cancel_kills_process(host)


def test_twenty_commands_share_one_connection_capped_at_max_sessions(host, behaviour, tmp_path):
    seen = behaviour.concurrency_is_capped(host, tmp_path / "conc", commands=20)
    assert max(seen) <= host.spec.max_sessions == 8
    assert max(seen) >= 4  # they did run side by side
    assert host.connections_opened == 1


def test_pty_on_request_only(host, behaviour):
    assert host.run("test -t 1 && echo tty || echo notty").stdout == "notty\n"
    r = host.run("test -t 1 && echo tty || echo notty; echo $TERM", pty=True)
    assert r.stdout.split() == ["tty", "dumb"]
    assert "upgrade-agent" not in r.stdout
    marker = unique_marker()
    r = host.run(f"sleep 1000 {marker}", pty=True, timeout=1)
    assert r.timed_out
    behaviour.assert_gone(marker)


def test_sudo_wanting_a_password_gets_a_hint(ssh_world, sshd, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A stand-in sudo that reports its arguments and answers as sudo does when it wants a password.
    (bin_dir / "sudo").write_text('#!/bin/sh\necho "args: $*"\necho "sudo: a password is required" >&2\nexit 1\n')
    (bin_dir / "sudo").chmod(0o755)
    ssh_world.add_host_alias("box", sshd)
    host = ssh_world.pool(HostSpec(name="box", path_prefix=[str(bin_dir)])).get("box")
    r = host.run("sudo apt-get update")
    assert r.exit_code == 1
    assert r.stdout == "args: -n apt-get update\n"  # a bare sudo is made non-interactive
    assert r.hint and "password" in r.hint


# --------------------------------------------------------------------------- connection life


def test_sshd_restart_between_commands_reconnects(ssh_world, sshd_factory):
    server = sshd_factory()
    ssh_world.add_host_alias("box", server)
    host = ssh_world.pool(HostSpec(name="box")).get("box")
    assert host.run("echo one").stdout == "one\n"
    first = host.transport
    server.restart()
    r = host.run("echo two")
    assert r.stdout == "two\n" and r.exit_code == 0
    assert host.connections_opened == 2 and host.transport is not first


def test_sshd_killed_during_a_command_is_reported_and_not_rerun(ssh_world, sshd_factory, tmp_path, behaviour):
    server = sshd_factory()
    ssh_world.add_host_alias("box", server)
    host = ssh_world.pool(HostSpec(name="box")).get("box")
    runs = tmp_path / "runs"
    marker = unique_marker()
    out: list = []
    first_output = threading.Event()
    worker = threading.Thread(target=lambda: out.append(host.run(
        f"echo run >> {runs}; echo partial; sleep 1000 {marker}", on_output=lambda s, b: first_output.set())))
    worker.start()
    try:
        assert first_output.wait(10)
        server.kill()
        worker.join(20)
        assert not worker.is_alive()
        (r,) = out
        assert r.connection_lost and r.exit_code is None and not r.timed_out
        assert r.stdout == "partial\n"  # what arrived before the connection died is kept
        assert r.hint and "not run again" in r.hint
        server.start()
        assert host.run("echo back").stdout == "back\n"
        time.sleep(0.5)
        assert runs.read_text() == "run\n"  # ran exactly once
    finally:
        kill_pids(pids_matching(f"sleep 1000 {marker}"))  # sshd died; its command was left running


def test_keepalive_is_sent_on_an_idle_connection(ssh_world, sshd_factory):
    server = sshd_factory(log_level="DEBUG1")
    ssh_world.add_host_alias("box", server)
    host = ssh_world.pool(HostSpec(name="box"), settings=ssh_world.settings(keepalive_s=1)).get("box")
    host.run("true")
    deadline = time.monotonic() + 10
    while "keepalive@lag.net" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "keepalive@lag.net" in server.log()


def test_close_ends_every_connection(ssh_world, ssh_host_spec):
    pool = ssh_world.pool(ssh_host_spec)
    host = pool.get("box")
    host.run("true")
    transport = host.transport
    pool.close()
    transport.join(5)
    assert not transport.is_active() and not transport.is_alive()
    with pytest.raises(HostError, match="closed"):
        host.run("true")


def test_pool_refuses_hosts_outside_the_session(ssh_world, ssh_host_spec):
    pool = ssh_world.pool(ssh_host_spec)
    with pytest.raises(HostError, match="not in this session's hosts"):
        pool.get("other")


# --------------------------------------------------------------------------- failures to connect


def test_refused_connection_is_a_quick_clear_error(ssh_world):
    port = closed_port()
    host = ssh_world.pool(HostSpec(name="gone", target=f"127.0.0.1:{port}")).get("gone")
    start = time.monotonic()
    with pytest.raises(HostError) as e:
        host.run("true")
    assert time.monotonic() - start < 2
    msg = str(e.value)
    assert "refused" in msg and str(port) in msg and "\n" not in msg


def test_silent_server_times_out_on_the_banner(ssh_world):
    # Accepts TCP connections and never speaks: connect succeeds, the SSH banner never comes.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        port = listener.getsockname()[1]
        pool = ssh_world.pool(HostSpec(name="mute", target=f"127.0.0.1:{port}"),
                              settings=ssh_world.settings(connect_timeout=1.0))
        start = time.monotonic()
        with pytest.raises(HostError, match="did not answer as an SSH server"):
            pool.get("mute").run("true")
        assert time.monotonic() - start < 5


def test_passphrase_key_without_agent_is_a_clear_error(ssh_world, sshd_factory, tmp_path):
    locked = keygen(tmp_path / "locked_key", passphrase="correct horse")
    server = sshd_factory(authorized_keys=[locked])
    ssh_world.add_host_alias("box", server, key=locked)
    host = ssh_world.pool(HostSpec(name="box")).get("box")
    with pytest.raises(HostError) as e:
        host.run("true")
    msg = str(e.value)
    assert "passphrase" in msg and str(locked) in msg and "ssh-add" in msg and "SSH_AUTH_SOCK" in msg


def test_passphrase_key_through_the_agent(ssh_world, sshd_factory, tmp_path, monkeypatch):
    locked = keygen(tmp_path / "locked_key", passphrase="correct horse")
    server = sshd_factory(authorized_keys=[locked])
    ssh_world.add_host_alias("box", server, key=locked)
    agent_sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(agent_sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while not agent_sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        askpass = tmp_path / "askpass"
        askpass.write_text("#!/bin/sh\necho 'correct horse'\n")
        askpass.chmod(0o755)
        env = {**os.environ, "SSH_AUTH_SOCK": str(agent_sock), "SSH_ASKPASS": str(askpass),
               "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}
        subprocess.run(["ssh-add", str(locked)], env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(agent_sock))
        host = ssh_world.pool(HostSpec(name="box")).get("box")
        assert host.run("echo via agent").stdout == "via agent\n"
    finally:
        agent.kill()
        agent.wait()


def test_stale_agent_socket_falls_back_to_key_files(ssh_world, ssh_host_spec, tmp_path, monkeypatch):
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "no-agent-here.sock"))
    assert ssh_world.pool(ssh_host_spec).get("box").run("echo ok").stdout == "ok\n"


def test_wrong_key_is_an_auth_error(ssh_world, sshd, tmp_path):
    stranger = keygen(tmp_path / "stranger")
    ssh_world.add_host_alias("box", sshd, key=stranger)
    with pytest.raises(HostError, match="authentication as .* failed.*authorized_keys"):
        ssh_world.pool(HostSpec(name="box")).get("box").run("true")


# --------------------------------------------------------------------------- host keys


def test_unknown_host_key_is_refused_with_its_fingerprint(ssh_world, sshd):
    spec = HostSpec(name="new", target=f"{sshd.user}@127.0.0.1:{sshd.port}")
    _identity_for(ssh_world, "127.0.0.1")
    with pytest.raises(UnknownHostKeyError) as e:
        ssh_world.pool(spec).get("new").run("true")
    fp = sshd.host_key_fingerprint()
    assert e.value.fingerprint == fp and e.value.key_type == "ssh-ed25519"
    assert fp in str(e.value) and f"--trust-host-key {fp}" in str(e.value) and "accept it in chat" in str(e.value)
    assert ssh_world.events == []


def test_trusted_fingerprint_connects_is_recorded_and_saved(ssh_world, sshd):
    _identity_for(ssh_world, "127.0.0.1")
    fp = sshd.host_key_fingerprint()
    target = f"{sshd.user}@127.0.0.1:{sshd.port}"
    host = ssh_world.pool(HostSpec(name="new", target=target, trust_host_key=fp)).get("new")
    assert host.run("echo trusted").stdout == "trusted\n"
    assert ssh_world.events == [("host_key_trusted", {"host": "new", "fingerprint": fp, "key_type": "ssh-ed25519"})]
    saved = ssh_world.project_known_hosts.read_text()
    assert saved.startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
    # The next session knows the key without being told again.
    again = ssh_world.pool(HostSpec(name="new", target=target)).get("new")
    assert again.run("echo known").stdout == "known\n"
    assert len(ssh_world.events) == 1


def test_trust_given_in_chat_through_the_pool(ssh_world, sshd):
    _identity_for(ssh_world, "127.0.0.1")
    pool = ssh_world.pool(HostSpec(name="new", target=f"127.0.0.1:{sshd.port}"))
    with pytest.raises(UnknownHostKeyError) as e:
        pool.get("new").run("true")
    pool.trust_host_key("new", e.value.fingerprint)
    assert pool.get("new").run("echo ok").stdout == "ok\n"
    assert ssh_world.events[0][0] == "host_key_trusted"


def test_trusting_another_fingerprint_does_not_help(ssh_world, sshd, tmp_path):
    _identity_for(ssh_world, "127.0.0.1")
    other = fingerprint(Path(str(keygen(tmp_path / "other_host_key")) + ".pub"))
    host = ssh_world.pool(HostSpec(name="new", target=f"127.0.0.1:{sshd.port}", trust_host_key=other)).get("new")
    with pytest.raises(UnknownHostKeyError, match="does not match"):
        host.run("true")
    assert not ssh_world.project_known_hosts.exists()


def test_changed_host_key_is_always_refused(ssh_world, sshd_factory):
    server = sshd_factory()
    ssh_world.add_host_alias("box", server)
    old_fp = server.host_key_fingerprint()
    host = ssh_world.pool(HostSpec(name="box")).get("box")
    assert host.run("true").exit_code == 0
    server.new_host_key()
    server.restart()
    new_fp = server.host_key_fingerprint()
    assert new_fp != old_fp
    for trusted in (None, old_fp, new_fp):
        spec = HostSpec(name="box", trust_host_key=trusted)
        with pytest.raises(ChangedHostKeyError) as e:
            ssh_world.pool(spec).get("box").run("true")
        assert e.value.fingerprint == new_fp and e.value.known_fingerprint == old_fp
        assert "changed" in str(e.value) and "ssh-keygen -R" in str(e.value)
    # The pooled connection of before notices the restart, reconnects, and is refused too.
    with pytest.raises(ChangedHostKeyError):
        host.run("true")
    assert ssh_world.events == []


# --------------------------------------------------------------------------- ssh config


def test_config_alias_with_hostname_port_user_identityfile(ssh_world, sshd, tmp_path):
    own_key = keygen(tmp_path / "alias_key")
    with open(sshd.authorized_keys, "a") as f:
        f.write(Path(str(own_key) + ".pub").read_text())
    ssh_world.add_host_alias("gpu-box", sshd, key=own_key)
    host = ssh_world.pool(HostSpec(name="gpu1", target="gpu-box")).get("gpu1")
    ep = host.endpoint
    assert (ep.hostname, ep.port, ep.user, ep.identity_files) == ("127.0.0.1", sshd.port, sshd.user, (str(own_key),))
    assert host.run("whoami").stdout.strip() == sshd.user
    assert f"Accepted publickey for {sshd.user}" in sshd.log()


def test_proxyjump_goes_through_the_jump_host(ssh_world, sshd_factory):
    jump = sshd_factory("jump", log_level="DEBUG1")
    target = sshd_factory("target")
    ssh_world.add_host_alias("jumpbox", jump)
    ssh_world.add_host_alias("inner", target, extra="  ProxyJump jumpbox\n")
    host = ssh_world.pool(HostSpec(name="inner")).get("inner")
    assert host.run("echo through").stdout == "through\n"
    # The connection to the target runs inside a channel of the jump host's connection...
    assert isinstance(host.transport.sock, paramiko.Channel)
    assert len(host._clients) == 2 and host.transport.sock.get_transport() is host._clients[0].get_transport()
    # ...and the jump host's sshd forwarded it to the target's port.
    assert f"target 127.0.0.1 port {target.port}" in jump.log()
    # Closing the host closes the jump connection as well.
    jump_transport = host._clients[0].get_transport()
    host.close()
    assert not jump_transport.is_active()


def test_proxycommand(ssh_world, sshd_factory, client_key):
    if not shutil.which("ssh"):
        pytest.fail("needs the OpenSSH client (ssh) for ProxyCommand")
    jump = sshd_factory("jump", log_level="DEBUG1")
    target = sshd_factory("target")
    ssh_world.know(jump)
    proxy = (f"ssh -F none -i {client_key} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes "
             f"-o UserKnownHostsFile={ssh_world.known_hosts} -p {jump.port} -W %h:%p {jump.user}@127.0.0.1")
    ssh_world.add_host_alias("inner", target, extra=f"  ProxyCommand {proxy}\n")
    host = ssh_world.pool(HostSpec(name="inner")).get("inner")
    assert host.run("echo proxied").stdout == "proxied\n"
    assert isinstance(host.transport.sock, paramiko.ProxyCommand)
    assert f"target 127.0.0.1 port {target.port}" in jump.log()


def test_parse_target():
    assert parse_target("root@10.0.0.5:2222") == ("root", "10.0.0.5", 2222)
    assert parse_target("gpu1") == (None, "gpu1", None)
    assert parse_target("me@[::1]:22") == ("me", "::1", 22)
    assert parse_target("::1") == (None, "::1", None)
    with pytest.raises(HostError):
        parse_target("root@host:ssh")


def _identity_for(world, host_pattern: str) -> None:
    """Config that gives the client key to `host_pattern` without listing its host key."""
    with world.config_path.open("a") as f:
        f.write(f"Host {host_pattern}\n  IdentityFile {world.client_key}\n")


def test_an_interrupt_while_waiting_kills_the_remote_process_group(ssh_world, ssh_host_spec, behaviour):
    """A KeyboardInterrupt inside run() (a hard Ctrl-C) must not leave the command running."""
    behaviour.interrupt_kills_process(ssh_world.pool(ssh_host_spec).get("box"))
