"""Ansible inventories read as Ansible reads them: the same hosts, groups and variables from INI and YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.fleet.inventory import InventoryError, load_inventory

INI = """\
# a comment
head01 ansible_host=10.0.0.1

[gpu]
gpu[01:03].dc ansible_user=ml ansible_port=2222
gpu09.dc ansible_host=fd00::9 ansible_port=22 agent_python=/opt/venv/bin/python

[h200]
gpu09.dc

[gpu:vars]
ansible_ssh_private_key_file=~/.ssh/fleet_ed25519
agent_path_prefix=/usr/local/cuda/bin

[h200:vars]
ansible_user=root

[dc:children]
gpu

[sims]
sim[a:b] agent_transport=sim agent_sim='{driver: 580.95.05, gpus: 4}'
box ansible_connection=local
"""

YAML = """\
all:
  hosts:
    head01: {ansible_host: 10.0.0.1}
  children:
    dc:
      children:
        gpu:
          hosts:
            gpu[01:03].dc: {ansible_user: ml, ansible_port: 2222}
            gpu09.dc: {ansible_host: "fd00::9", ansible_port: 22, agent_python: /opt/venv/bin/python}
          vars:
            ansible_ssh_private_key_file: ~/.ssh/fleet_ed25519
            agent_path_prefix: /usr/local/cuda/bin
    h200:
      hosts:
        gpu09.dc:
      vars: {ansible_user: root}
    sims:
      hosts:
        sim[a:b]: {agent_transport: sim, agent_sim: {driver: 580.95.05, gpus: 4}}
        box: {ansible_connection: local}
"""


@pytest.fixture(params=["ini", "yaml"])
def inv(request, tmp_path):
    path = tmp_path / ("hosts" if request.param == "ini" else "hosts.yml")
    path.write_text(INI if request.param == "ini" else YAML)
    return load_inventory(path)


def test_both_formats_give_the_same_hosts_groups_and_entries(inv, tmp_path):
    assert sorted(inv.hosts()) == sorted(["head01", "gpu01.dc", "gpu02.dc", "gpu03.dc", "gpu09.dc", "sima", "simb",
                                          "box"])
    assert sorted(inv.select("dc")) == ["gpu01.dc", "gpu02.dc", "gpu03.dc", "gpu09.dc"]  # through its children
    entries = {e.name: e for e in inv.entries()}
    key = str(Path("~/.ssh/fleet_ed25519").expanduser())
    assert entries["gpu02.dc"].target == "ml@gpu02.dc:2222" and entries["gpu02.dc"].identity_file == key
    assert entries["gpu02.dc"].path_prefix == ["/usr/local/cuda/bin"]
    # The deeper group's variable wins over the shallower one's; the host's own over both.
    assert entries["gpu09.dc"].target == "root@[fd00::9]:22" and entries["gpu09.dc"].python == "/opt/venv/bin/python"
    assert entries["head01"].target == "10.0.0.1" and entries["head01"].identity_file is None
    assert entries["sima"].transport == "sim" and entries["sima"].sim.driver == "580.95.05"
    assert entries["sima"].sim.gpus == 4 and entries["box"].transport == "local"


def test_limit_patterns_union_exclusion_and_intersection(inv):
    # ansible-playbook's order, that of all: gpu09.dc comes first through h200, a group one level up from gpu
    assert inv.select("gpu:!gpu02.dc") == ["gpu09.dc", "gpu01.dc", "gpu03.dc"]
    assert inv.select("gpu:&h200") == ["gpu09.dc"]
    assert inv.select("head01,sims") == ["head01", "sima", "simb", "box"]
    with pytest.raises(InventoryError, match="neither a group nor a host"):
        inv.select("cpu")
    with pytest.raises(InventoryError, match="leaves no host"):
        inv.select("h200:!gpu09.dc")


@pytest.mark.parametrize("text, said", [
    ("[gpu\nx\n", ":1: '[gpu' is not a section header"),
    ("[gpu:vars]\nnovalue\n", ":2: a [gpu:vars] line is key=value"),
    ("[gpu]\nn[1:x]\n", "cannot expand the range"),
    ("[gpu]\nn[0:99999]\n", "gives 100000 hosts"),
    ("[gpu]\nh agent_transport=sim agent_sim='{gpus: 99}'\n", "host h: sim.gpus"),
    ("# nothing\n", "names no host"),
])
def test_a_broken_inventory_is_one_line_that_names_the_place(tmp_path, text, said):
    path = tmp_path / "hosts.ini"
    path.write_text(text)
    with pytest.raises(InventoryError, match=None) as e:
        load_inventory(path)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_a_yaml_group_that_is_its_own_child_is_refused(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  children:\n    a:\n      children:\n        a: {}\n")
    with pytest.raises(InventoryError, match="its own child"):
        load_inventory(path)


# Found by the red team (tests/data/fleet/redteam-2026-12-02/): inventories that tried to smuggle a path, a
# shell command or an SSH option through a host's name or its connection variables, and a group cycle in INI.
@pytest.mark.parametrize("line, said", [
    ("../../escape agent_transport=sim", "a host name is letters, digits and ._:-"),
    ("/tmp/abs agent_transport=sim", "a host name is letters, digits and ._:-"),
    ("h1 ansible_host='127.0.0.1;touch /tmp/x'", "ansible_host '127.0.0.1;touch /tmp/x' is not a host name"),
    ("h1 ansible_host=-oProxyCommand=x", "is not a host name or an IP address"),
    ("h1 ansible_user='$(touch /tmp/x)'", "ansible_user '$(touch /tmp/x)' is not a user name"),
    ("h1 ansible_port='22 -oProxyCommand=x'", "is not a port number"),
    ("h1 ansible_port=70000", "is not a port number"),
    ("h1 agent_transport=SIM", "agent_transport 'SIM' is not ssh, local or sim"),
    ("h1 agent_transport=sim ansible_connection=local", "say different things"),
    ("h1 agent_python='python3;touch /tmp/x'", "is not an interpreter's path or name"),
    ("h1 agent_path_prefix='/usr/bin:$(touch /tmp/x)'", "is not an absolute directory"),
])
def test_names_and_connection_variables_are_what_they_say(tmp_path, line, said):
    path = tmp_path / "hosts.ini"
    path.write_text(f"[gpu]\n{line}\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(path)
    assert said in str(e.value)


def test_a_yaml_host_name_with_control_characters_is_refused(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text('all:\n  hosts:\n    "h2\\n[ok] h9 upgraded": {agent_transport: sim}\n')
    with pytest.raises(InventoryError, match="a host name is letters"):
        load_inventory(path)


def test_a_yaml_cycle_made_of_edges_in_two_places_is_refused(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  children:\n    a:\n      hosts: {h1: {agent_transport: sim}}\n      children: {b: {}}\n"
                    "    b:\n      children: {a: {}}\n")
    with pytest.raises(InventoryError, match="its own child"):
        load_inventory(path)


def test_an_ini_group_that_is_its_own_child_is_refused(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[a:children]\nb\n[b:children]\na\n[b]\nh1 agent_transport=sim\n")
    with pytest.raises(InventoryError, match="its own child"):
        load_inventory(path)
