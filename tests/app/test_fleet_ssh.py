"""`agent fleet` end to end over real SSH, from an Ansible INI inventory.

Every host is a sim behind an OpenSSH server of its own on 127.0.0.1: the server's ForceCommand runs each
session in the sim's sandbox (tools.hosts.sim.sshd_force_command), so the product reaches it through
paramiko, known_hosts and the key the inventory names, as it would a GPU box, and nothing it runs touches
this machine. The client side is a HOME of the test's own (its known_hosts, no ssh config unless a test
writes one) and no ssh-agent (fleet_runs.env_for drops SSH_AUTH_SOCK).

What is checked is what really happened: the toolkit and the torch wheel on each sim, read from the sim's
trees; the files of a host that must not change, compared before and after; the server's own log of which
key logged in; every transcript's hash chain.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agent.record.transcript import verify
from fleet_runs import agent, canary_recipe, events
from sshd import SSHD, closed_port, fingerprint, keygen
from tools.hosts.sim import sshd_force_command
from tools.sim import Sim, build_sim

VENV = ["/opt/venv/bin", "/usr/local/cuda/bin"]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Path:
    return canary_recipe(tmp_path_factory.mktemp("canary"))


# --------------------------------------------------------------------------- helpers


def sim_behind_sshd(tmp_path: Path, sshd_factory, name: str, *, keys: list[Path], **options) -> tuple[Sim, SSHD]:
    """A sim (built with `options`, e.g. driver_version=) and an sshd whose every session runs in its sandbox,
    taking only `keys`."""
    sim = build_sim(tmp_path / "sims" / name, **options)
    server = sshd_factory(f"sshd-{name}", authorized_keys=keys,
                          extra_config=f"ForceCommand {sshd_force_command(sim.root, name)}\n")
    return sim, server


def client_home(tmp_path: Path, known: list[SSHD]) -> Path:
    """A HOME with ~/.ssh/known_hosts listing the keys of `known`, and nothing else in ~/.ssh."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text("".join(s.known_hosts_line() for s in known))
    return home


def write_inventory(path: Path, groups: dict[str, dict[str, dict[str, object]]], all_vars: dict[str, str]) -> Path:
    """INI: [group] with `name key=value ...` host lines, then [all:vars]."""
    lines = ["# GPU hosts on 127.0.0.1, each a sim behind an sshd of its own"]
    for group, hosts in groups.items():
        lines.append(f"[{group}]")
        lines += [" ".join([name, *(f"{k}={v}" for k, v in hv.items())]) for name, hv in hosts.items()]
        lines.append("")
    lines.append("[all:vars]")
    lines += [f"{k}={v}" for k, v in all_vars.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def toolkits(sim: Sim) -> list[str]:
    return sorted(p.name for p in sim.sys_path("/usr/local").glob("cuda-*"))


def torch_version(sim: Sim) -> list[str]:
    """The torch wheels installed in the sim's venv, as their dist-info directories name them."""
    return sorted(p.name.removeprefix("torch-").removesuffix(".dist-info")
                  for p in sim.sys_path("/opt/venv").glob("lib/python*/site-packages/torch-*.dist-info"))


def tree(sim: Sim) -> dict[str, tuple]:
    """Every file, directory and link under the sim's /usr/local and /opt: what a change would touch.
    (Python's bytecode caches are left out: reading a version may write one, and that is no change.)"""
    out = {}
    for top in ("/usr/local", "/opt"):
        base = sim.sys_path(top)
        for p in sorted(base.rglob("*")):
            if "__pycache__" in p.parts:
                continue
            st = p.lstat()
            out[str(p.relative_to(sim.root))] = (st.st_mode, st.st_size, st.st_mtime_ns,
                                                 os.readlink(p) if p.is_symlink() else None)
    return out


def fleet_hosts(out: Path) -> dict[str, dict]:
    """The fleet's record verifies; its host events by host; each host's transcript verifies and ends where the
    fleet's record says it ends."""
    fleet = out / "fleet.jsonl"
    report = verify(fleet)
    assert report.ok, report.problems
    hosts = {e["host"]: e for e in events(fleet) if e["type"] == "fleet_host"}
    for name, ev in hosts.items():
        path = Path(ev["transcript"])
        assert verify(path).ok, (name, verify(path).problems)
        assert ev["last_hash"] == _last_hash(path), name
    return hosts


def _last_hash(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]).hexdigest()


def target_of(transcript: str) -> dict:
    return events(Path(transcript))[0]["host_specs"][0]


def logins(server: SSHD) -> list[str]:
    """The server's 'Accepted publickey ...' lines: who logged in with which key."""
    return [line for line in server.log().splitlines() if "Accepted publickey" in line]


def untouched(sim: Sim) -> None:
    assert toolkits(sim) == ["cuda-12.8"], toolkits(sim)
    assert torch_version(sim) == ["2.10.0+cu128"], torch_version(sim)


def upgraded(sim: Sim) -> None:
    assert toolkits(sim) == ["cuda-12.8", "cuda-13.0"], toolkits(sim)
    assert sim.sys_path("/usr/local/cuda-13.0/bin/nvcc").is_file()
    assert torch_version(sim) == ["2.10.0+cu130"], torch_version(sim)


# --------------------------------------------------------------------------- 1. a small fleet over SSH


def test_over_ssh_two_hosts_are_upgraded_the_other_driver_is_held_unchanged_the_closed_port_is_unreachable(
        recipe, tmp_path, sshd_factory, client_key):
    """[gpu]: gpu01 and gpu02 plain, gpu03 with driver 580.95.05 (the recipe was proven on 590.48.01), gpu04 on a
    closed port; [spare]: spare01, a plain host that is reachable, left out by --limit gpu. Host lines give
    ansible_host, ansible_port, ansible_user and ansible_ssh_private_key_file; [all:vars] the interpreter."""
    sims, servers = {}, {}
    for name, options in (("gpu01", {}), ("gpu02", {}), ("gpu03", {"driver_version": "580.95.05"}),
                          ("spare01", {})):
        sims[name], servers[name] = sim_behind_sshd(tmp_path, sshd_factory, name, keys=[client_key], **options)
    home = client_home(tmp_path, list(servers.values()))
    user = servers["gpu01"].user
    dead = closed_port()

    def line(port: int) -> dict:
        return {"ansible_host": "127.0.0.1", "ansible_port": port, "ansible_user": user,
                "ansible_ssh_private_key_file": client_key}

    inv = write_inventory(tmp_path / "hosts.ini", {
        "gpu": {**{n: line(servers[n].port) for n in ("gpu01", "gpu02", "gpu03")}, "gpu04": line(dead)},
        "spare": {"spare01": line(servers["spare01"].port)},
    }, {"agent_python": "/opt/venv/bin/python", "agent_path_prefix": repr(VENV)})
    held_before, spare_before = tree(sims["gpu03"]), tree(sims["spare01"])
    for sim in sims.values():
        untouched(sim)

    out = tmp_path / "rollout"
    r = agent("fleet", str(recipe), "--inventory", str(inv), "--limit", "gpu", "--max-fail", "50", "--dir", str(out),
              home=home)

    assert r.returncode == 1, r.stderr[-3000:]  # app/fleet.py: 1 when a host failed; unreachable counts as failed
    assert "Traceback" not in r.stderr
    hosts = fleet_hosts(out)
    assert {h: e["status"] for h, e in hosts.items()} == {
        "gpu01": "changed", "gpu02": "changed", "gpu03": "held", "gpu04": "unreachable"}, r.stderr[-3000:]
    result = [e for e in events(out / "fleet.jsonl") if e["type"] == "fleet_result"][0]
    assert result["failed"] == ["gpu04"], result
    # Each host was reached over SSH at the address, port and user its line gives.
    for name in ("gpu01", "gpu02", "gpu03", "gpu04"):
        spec = target_of(hosts[name]["transcript"])
        port = dead if name == "gpu04" else servers[name].port
        assert spec["transport"] == "ssh" and spec["target"] == f"{user}@127.0.0.1:{port}", (name, spec)
    # Upgraded, on the sims behind the servers: CUDA 13.0 beside 12.8, the cu130 torch in the venv.
    for name in ("gpu01", "gpu02"):
        upgraded(sims[name])
        assert hosts[name]["reason"].startswith("2 steps ran, the checks passed"), hosts[name]["reason"]
        assert logins(servers[name]), name
    # Held: why, and nothing under /usr/local or /opt changed (the server was reached: it was inspected).
    assert "driver is '580.95.05', the recipe was proven on '590.48.01'" in hosts["gpu03"]["reason"]
    assert tree(sims["gpu03"]) == held_before
    untouched(sims["gpu03"])
    assert logins(servers["gpu03"])
    # Unreachable: one line that names the host, the port and what happened.
    why = hosts["gpu04"]["reason"]
    assert "\n" not in why and "gpu04" in why and f"port {dead} refused" in why, why
    assert not [e for e in events(Path(hosts["gpu04"]["transcript"])) if e["type"] == "intent"]
    # --limit gpu: the other group's host was never connected to, let alone changed.
    assert "spare01" not in r.stderr and "spare01" not in hosts and not (out / "spare01.jsonl").exists()
    assert "Connection from" not in servers["spare01"].log() and not logins(servers["spare01"])
    assert tree(sims["spare01"]) == spare_before
    # The recap, and `agent show --verify` on the fleet's record, as an operator would run it.
    assert "RECAP" in r.stderr and "gpu04" in r.stderr.split("RECAP", 1)[1]
    shown = agent("show", "--verify", str(out / "fleet.jsonl"), home=home)
    assert shown.returncode == 0 and "chain intact" in shown.stdout, shown.stdout + shown.stderr


# --------------------------------------------------------------------------- 2. the key the inventory names


def test_the_key_named_by_ansible_ssh_private_key_file_is_the_one_that_logs_in(recipe, tmp_path, sshd_factory,
                                                                                  client_key):
    """Both servers take only a deploy key kept outside ~/.ssh; ~/.ssh holds another key (id_ed25519, what is tried
    when no key is named) and no config. gpu01 names the deploy key by its absolute path, gpu03 as ~/deploy/...:
    both upgraded, and each server's log shows the deploy key's fingerprint logging in. gpu02 names no key: the
    default key is refused, the host is unreachable with a reason naming the key tried, and nothing changed."""
    home = tmp_path / "home"
    deploy = keygen(home / "deploy" / "id_deploy")
    sims, servers = {}, {}
    for name in ("gpu01", "gpu02", "gpu03"):
        sims[name], servers[name] = sim_behind_sshd(tmp_path, sshd_factory, name, keys=[deploy])
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text("".join(s.known_hosts_line() for s in servers.values()))
    for suffix in ("", ".pub"):
        shutil.copy(str(client_key) + suffix, home / ".ssh" / ("id_ed25519" + suffix))
    assert not (home / ".ssh" / "config").exists()
    user = servers["gpu01"].user
    hosts_ = {name: {"ansible_host": "127.0.0.1", "ansible_port": s.port} for name, s in servers.items()}
    hosts_["gpu01"]["ansible_ssh_private_key_file"] = deploy
    hosts_["gpu03"]["ansible_ssh_private_key_file"] = "~/deploy/id_deploy"
    inv = write_inventory(tmp_path / "hosts.ini", {"gpu": hosts_}, {
        "ansible_user": user, "agent_python": "/opt/venv/bin/python", "agent_path_prefix": repr(VENV)})
    before = tree(sims["gpu02"])

    out = tmp_path / "rollout"
    r = agent("fleet", str(recipe), "-i", str(inv), "--limit", "gpu", "--max-fail", "50", "--dir", str(out), home=home)

    assert r.returncode == 1, r.stderr[-3000:]
    hosts = fleet_hosts(out)
    assert {h: e["status"] for h, e in hosts.items()} == {"gpu01": "changed", "gpu02": "unreachable",
                                                         "gpu03": "changed"}, r.stderr[-3000:]
    deploy_fp = fingerprint(Path(str(deploy) + ".pub"))
    for name in ("gpu01", "gpu03"):
        upgraded(sims[name])
        said = logins(servers[name])
        assert said and all(deploy_fp in x for x in said), (name, said)
    why = hosts["gpu02"]["reason"]
    assert "\n" not in why and "authentication as" in why and str(home / ".ssh" / "id_ed25519") in why, why
    assert str(deploy) not in why  # the deploy key was offered only where the inventory names it
    assert not logins(servers["gpu02"])
    assert tree(sims["gpu02"]) == before
    untouched(sims["gpu02"])


# --------------------------------------------------------------------------- 3. host keys


def test_an_unknown_or_changed_host_key_makes_that_host_unreachable_unchanged_and_the_others_go_on(
        recipe, tmp_path, sshd_factory, client_key):
    """gpu01's key is in known_hosts; gpu02's is in none; for gpu03's address known_hosts lists another key (the
    server was re-keyed). gpu01 is upgraded; gpu02 and gpu03 are unreachable, each with one line that names the
    key the server presented, never logged in to (the host key is checked before the client authenticates),
    unchanged; and no key was trusted on the way (upgrade-agent's own known_hosts stays empty)."""
    sims, servers = {}, {}
    for name in ("gpu01", "gpu02", "gpu03"):
        sims[name], servers[name] = sim_behind_sshd(tmp_path, sshd_factory, name, keys=[client_key])
    stale = servers["gpu03"].known_hosts_line()
    servers["gpu03"].new_host_key()
    servers["gpu03"].restart()
    home = client_home(tmp_path, [servers["gpu01"]])
    with (home / ".ssh" / "known_hosts").open("a") as f:
        f.write(stale)
    user = servers["gpu01"].user
    inv = write_inventory(tmp_path / "hosts.ini", {"gpu": {
        name: {"ansible_host": "127.0.0.1", "ansible_port": s.port, "ansible_user": user,
               "ansible_ssh_private_key_file": client_key} for name, s in servers.items()}},
        {"agent_python": "/opt/venv/bin/python", "agent_path_prefix": repr(VENV)})
    before = {name: tree(sims[name]) for name in ("gpu02", "gpu03")}

    out = tmp_path / "rollout"
    r = agent("fleet", str(recipe), "-i", str(inv), "--limit", "gpu", "--max-fail", "90", "--dir", str(out), home=home)

    assert r.returncode == 1, r.stderr[-3000:]
    hosts = fleet_hosts(out)
    assert {h: e["status"] for h, e in hosts.items()} == {"gpu01": "changed", "gpu02": "unreachable",
                                                         "gpu03": "unreachable"}, r.stderr[-3000:]
    upgraded(sims["gpu01"])
    unknown, changed = hosts["gpu02"]["reason"], hosts["gpu03"]["reason"]
    assert "\n" not in unknown and f"unknown host key ssh-ed25519 {servers['gpu02'].host_key_fingerprint()}" in unknown
    assert "\n" not in changed and "host key" in changed and "has changed" in changed, changed
    assert servers["gpu03"].host_key_fingerprint() in changed, changed
    for name in ("gpu02", "gpu03"):
        assert not logins(servers[name]), name
        assert tree(sims[name]) == before[name], name
        untouched(sims[name])
    project_known = home / "data" / "upgrade-agent" / "known_hosts"
    assert not project_known.exists() or project_known.read_text() == ""
    assert (home / ".ssh" / "known_hosts").read_text().count("\n") == 2  # read, never written


# An unknown host key in a fleet: the reason says to run again with --trust-host-key FP, and agent fleet takes it.
def test_the_advice_for_an_unknown_host_key_in_a_fleet_is_one_agent_fleet_takes(recipe, tmp_path, sshd_factory,
                                                                                client_key):
    sim, server = sim_behind_sshd(tmp_path, sshd_factory, "gpu01", keys=[client_key])
    home = client_home(tmp_path, [])
    inv = write_inventory(tmp_path / "hosts.ini", {"gpu": {"gpu01": {
        "ansible_host": "127.0.0.1", "ansible_port": server.port, "ansible_user": server.user,
        "ansible_ssh_private_key_file": client_key}}},
        {"agent_python": "/opt/venv/bin/python", "agent_path_prefix": repr(VENV)})
    r = agent("fleet", str(recipe), "-i", str(inv), "--dir", str(tmp_path / "first"), home=home)
    assert r.returncode == 1, r.stderr[-3000:]
    why = fleet_hosts(tmp_path / "first")["gpu01"]["reason"]
    fp = server.host_key_fingerprint()
    assert f"--trust-host-key {fp}" in why, why  # what the reason tells the operator to do
    again = agent("fleet", str(recipe), "-i", str(inv), "--trust-host-key", fp, "--dir", str(tmp_path / "again"),
                  home=home)
    assert "unrecognized arguments" not in again.stderr, again.stderr
    assert again.returncode == 0, again.stderr[-3000:]
    upgraded(sim)


# --------------------------------------------------------------------------- 4. a rollout killed mid-change


def test_over_ssh_a_host_left_mid_change_by_a_killed_rollout_is_restored_then_upgraded_on_resume(
        recipe, tmp_path, sshd_factory, client_key):
    """SIGKILL of `agent fleet` and all it started while gpu01's toolkit installs over SSH: gpu01's record has no
    end. `--resume` reads its backup back over SSH against the hashes that record holds, restores gpu01 in a
    session of its own (the new toolkit gone, torch as it was), then upgrades it; gpu02, never started, is
    upgraded too; every record verifies."""
    import signal
    import subprocess
    import sys
    import time

    from fleet_runs import env_for

    sims, servers = {}, {}
    for name in ("gpu01", "gpu02"):
        sims[name], servers[name] = sim_behind_sshd(tmp_path, sshd_factory, name, keys=[client_key])
    home = client_home(tmp_path, list(servers.values()))
    user = servers["gpu01"].user
    inv = write_inventory(tmp_path / "hosts.ini", {"gpu": {
        name: {"ansible_host": "127.0.0.1", "ansible_port": s.port, "ansible_user": user,
               "ansible_ssh_private_key_file": client_key} for name, s in servers.items()}},
        {"agent_python": "/opt/venv/bin/python", "agent_path_prefix": repr(VENV)})
    out = tmp_path / "rollout"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "fleet", str(recipe), "-i", str(inv), "--dir", str(out)],
                            cwd=root, env=env_for(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    first = out / "gpu01.jsonl"
    deadline = time.monotonic() + 300
    while not any(e.get("type") == "intent" and e.get("tool") == "install_runfile"
                  for e in (_whole_events(first) if first.exists() else [])):
        assert time.monotonic() < deadline and proc.poll() is None, "install_runfile never began"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    # The command the killed process started runs on in the host's own sshd session until it ends, as on a real
    # host: wait for it, as an operator would before resuming.
    while subprocess.run(["pgrep", "-f", str(sims["gpu01"].root) + ".*cuda"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the remote installer never ended"
        time.sleep(0.2)
    assert _whole_events(first)[-1]["type"] != "session_end"

    r = agent("fleet", str(recipe), "-i", str(inv), "--resume", str(out), home=home)

    assert r.returncode == 0, r.stderr[-3000:]
    restore = out / "gpu01-2.jsonl"
    assert verify(restore).ok, verify(restore).problems
    evs = events(restore)
    assert [(e["tool"], e.get("status")) for e in evs if e["type"] == "tool_result"] == [("restore_backup", "ok")]
    state = [e for e in evs if e["type"] == "final_state"][-1]["inspect"]
    assert [t["version"] for t in state["toolkits"]] == ["12.8"] and state["python"]["torch"] == "2.10.0+cu128"
    final = {e["host"]: e for e in events(out / "fleet-2.jsonl") if e["type"] == "fleet_host"}
    assert final["gpu01"]["ended"] == final["gpu02"]["ended"] == "upgraded", final
    assert final["gpu01"]["restored_first"] == str(restore)
    for sim in sims.values():
        upgraded(sim)
    shown = agent("show", "--verify", str(out / "fleet-2.jsonl"), home=home)
    assert shown.returncode == 0, shown.stdout + shown.stderr


def _whole_events(path: Path) -> list[dict]:
    import json

    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # the last line, half written
            pass
    return out


# --------------------------------------------------------------------------- 5. SIGTERM at each moment of a change


@pytest.mark.parametrize("moment, ended", [
    ("pip_freeze_backup", ("unchanged: interrupted before its first step",)),  # before any change: as it was
    ("install_runfile", ("restored after interrupt",)),  # its first step had begun: it ends, then the backup
    ("pip_install", ("upgraded",)),  # its last step had begun: it ends, and the host is finished
])
def test_over_ssh_sigterm_at_each_moment_leaves_the_host_upgraded_or_as_it_was_and_resume_finishes(
        recipe, tmp_path, sshd_factory, client_key, moment, ended):
    """SIGTERM while gpu01's backup, first step or last step runs over SSH: the running command ends in its own
    sshd session (the signal reaches our process, not the host), no step starts after it, and gpu01 ends
    either upgraded or as it was, never between the two stacks; its tree says so, not its record alone.
    `--resume` then upgrades it (or carries it over), and every record verifies."""
    import signal
    import subprocess
    import sys
    import time

    from fleet_runs import env_for

    sim, server = sim_behind_sshd(tmp_path, sshd_factory, "gpu01", keys=[client_key])
    home = client_home(tmp_path, [server])
    inv = write_inventory(tmp_path / "hosts.ini", {"gpu": {"gpu01": {
        "ansible_host": "127.0.0.1", "ansible_port": server.port, "ansible_user": server.user,
        "ansible_ssh_private_key_file": client_key}}},
        {"agent_python": "/opt/venv/bin/python", "agent_path_prefix": repr(VENV)})
    before = tree(sim)
    out = tmp_path / "rollout"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "fleet", str(recipe), "-i", str(inv), "--dir", str(out)],
                            cwd=root, env=env_for(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    first, deadline = out / "gpu01.jsonl", time.monotonic() + 300
    while not any(e.get("type") == "intent" and e.get("tool") == moment
                  for e in (_whole_events(first) if first.exists() else [])):
        assert time.monotonic() < deadline and proc.poll() is None, f"{moment} never began"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err[-2000:]
    host = fleet_hosts(out)["gpu01"]
    assert host["ended"] in ended, host
    if host["ended"] == "upgraded":
        upgraded(sim)
    else:  # as it was: every file, folder and link under /usr/local and /opt, but the backup's own folder
        untouched(sim)
        now = tree(sim)
        kept = {p: (mode, size, link) for p, (mode, size, _, link) in before.items()}  # a reinstall's times are new
        differ = sorted(p for p in set(before) | set(now)
                        if kept.get(p) != ((now[p][0], now[p][1], now[p][3]) if p in now else None))
        assert not differ, differ[:20]
    intents = [e["tool"] for e in events(first) if e["type"] == "intent"]
    after = intents[intents.index(moment) + 1:]
    assert not set(after) & {"install_runfile", "pip_install"} - ({moment} if moment == "pip_install" else set()), \
        intents  # nothing began after the signal but the finish or the restore

    r = agent("fleet", str(recipe), "-i", str(inv), "--resume", str(out), home=home)
    assert r.returncode == 0, r.stderr[-3000:]
    final = {e["host"]: e for e in events(out / "fleet-2.jsonl") if e["type"] == "fleet_host"}
    assert final["gpu01"]["ended"] == "upgraded", final
    upgraded(sim)
    shown = agent("show", "--verify", str(out / "fleet-2.jsonl"), home=home)
    assert shown.returncode == 0, shown.stdout + shown.stderr
