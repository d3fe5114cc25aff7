"""`agent fleet` over real SSH: an Ansible inventory naming hosts by address, port, user and key file.

Each host is a sim behind an OpenSSH server of its own on 127.0.0.1, whose ForceCommand runs every session
in the sim's sandbox, as a GPU box's sshd runs it on the box: the product reaches it exactly as it would
a real machine (paramiko, known_hosts, the key the inventory names), and nothing it runs touches this one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.record.transcript import verify
from fleet_runs import agent, canary_recipe, events
from sshd import closed_port, keygen
from tools.hosts.sim import sshd_force_command
from tools.sim import build_sim



@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Path:
    return canary_recipe(tmp_path_factory.mktemp("canary"))


def test_a_fleet_over_ssh_upgrades_holds_and_reports_the_unreachable_host_using_each_hosts_own_key(
        recipe, tmp_path, sshd_factory, client_key):
    other_key = keygen(tmp_path / "keys" / "id_other")  # gpu02's sshd takes only this key
    sims = {"gpu01": build_sim(tmp_path / "sims" / "gpu01"), "gpu02": build_sim(tmp_path / "sims" / "gpu02"),
            "gpu03": build_sim(tmp_path / "sims" / "gpu03", driver_version="580.95.05")}
    keys = {"gpu01": client_key, "gpu02": other_key, "gpu03": client_key}
    servers = {name: sshd_factory(f"sshd-{name}", authorized_keys=[keys[name]],
                                  extra_config=f"ForceCommand {sshd_force_command(sim.root, name)}\n")
               for name, sim in sims.items()}
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text("".join(s.known_hosts_line() for s in servers.values()))
    user = next(iter(servers.values())).user
    lines = ["[gpu]"]
    lines += [f"{name} ansible_host=127.0.0.1 ansible_port={s.port} ansible_ssh_private_key_file={keys[name]}"
              for name, s in servers.items()]
    lines += [f"gpu04 ansible_host=127.0.0.1 ansible_port={closed_port()} ansible_ssh_private_key_file={client_key}",
              "", "[cpu]", "db1 ansible_host=127.0.0.1 ansible_port=1", "",
              "[all:vars]", f"ansible_user={user}", "agent_python=/opt/venv/bin/python",
              "agent_path_prefix=['/opt/venv/bin', '/usr/local/cuda/bin']"]
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("\n".join(lines) + "\n")
    out = tmp_path / "rollout"
    r = agent("fleet", str(recipe), "-i", str(inventory), "--limit", "gpu", "--dir", str(out), home=home)
    assert r.returncode == 1, r.stderr[-3000:]  # an unreachable host counts as failed
    fleet = out / "fleet.jsonl"
    assert verify(fleet).ok, verify(fleet).problems
    hosts = {e["host"]: e for e in events(fleet) if e["type"] == "fleet_host"}
    assert {h: e["status"] for h, e in hosts.items()} == {"gpu01": "changed", "gpu02": "changed", "gpu03": "held",
                                                         "gpu04": "unreachable"}, r.stderr[-3000:]
    assert "db1" not in r.stderr  # --limit gpu
    assert "driver is '580.95.05'" in hosts["gpu03"]["reason"]
    assert "\n" not in hosts["gpu04"]["reason"] and "gpu04" in hosts["gpu04"]["reason"], hosts["gpu04"]["reason"]
    for name in ("gpu01", "gpu02", "gpu03", "gpu04"):
        path = Path(hosts[name]["transcript"])
        assert verify(path).ok, (name, verify(path).problems)
        start = events(path)[0]
        assert start["host_specs"][0]["transport"] == "ssh" and f"{user}@127.0.0.1:" in start["host_specs"][0]["target"]
    # The changes happened on the sims behind the servers, and only on the two hosts that were upgraded.
    for name, sim in sims.items():
        assert sim.sys_path("/usr/local/cuda-13.0/bin/nvcc").is_file() == (name != "gpu03"), name
    # gpu02 was reached only because the inventory gave its key: its server takes no other.
    assert "Accepted publickey" in servers["gpu02"].log()
