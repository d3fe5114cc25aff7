"""`--limit` as Ansible reads it, inventory variables we do not honour, typos of our own, and the JSON of
`ansible-inventory --list` (agent/fleet/patterns.py, agent/fleet/inventory.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.fleet.inventory import InventoryError, inventory_warnings, load_inventory

INI = """\
solo
[gpu]
gpu01
gpu02
gpu03
gpu04
[h200]
gpu03
h200-01
[dc:children]
gpu
h200
[top:children]
sub
[sub]
s1
[other]
o1
[all:vars]
agent_transport=sim
"""


@pytest.fixture
def inv(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text(INI)
    return load_inventory(path)


@pytest.mark.parametrize("pattern, hosts", [
    ("gpu0*", ["gpu01", "gpu02", "gpu03", "gpu04"]),
    ("gpu?1", ["gpu01"]),
    ("~gpu0[12]", ["gpu01", "gpu02"]),
    ("~(h200|o).*", ["o1", "gpu03", "h200-01"]),  # the group h200 and the host o1, in the order of all
    ("gpu[0]", ["gpu01"]),
    ("gpu[-1]", ["gpu04"]),
    ("gpu[1:2]", ["gpu02", "gpu03"]),  # the end is included
    ("gpu[0:1]", ["gpu01", "gpu02"]),
    ("gpu[2:]", ["gpu03", "gpu04"]),
    ("gpu[0]:h200[1]", ["gpu01", "h200-01"]),  # the colon inside brackets is not a separator
    ("!gpu", ["solo", "o1", "h200-01", "s1"]),  # only exclusions: from all
    ("&h200", ["gpu03", "h200-01"]),
    ("!h200:gpu", ["gpu01", "gpu02", "gpu04"]),  # unions first, whatever the order
    ("dc:&h200:!gpu03", ["h200-01"]),
    ("dc", ["gpu01", "gpu02", "gpu03", "gpu04", "h200-01"]),
    ("top", ["s1"]),
    ("all", ["solo", "o1", "gpu01", "gpu02", "gpu03", "gpu04", "h200-01", "s1"]),  # Ansible's order, level by level
    ("*", ["solo", "o1", "gpu01", "gpu02", "gpu03", "gpu04", "h200-01", "s1", ]),
    ("o1,solo", ["solo", "o1"]),
])
def test_limit_means_what_it_means_to_ansible_playbook(inv, pattern, hosts):
    """The hosts `ansible-playbook --limit PATTERN` runs on, in its order (that of `all`, whatever the pattern's);
    each list here is what ansible-core 2.19 gives."""
    assert inv.select(pattern) == hosts


def test_all_and_star_have_one_order(inv):
    assert inv.select(None) == inv.select("all")


@pytest.mark.parametrize("pattern, said", [
    ("gpu[9]", "gpu has 4 hosts, so there is no [9]"),
    ("gpu[7:9]", "none in [7:9]"),
    ("cpu*", "neither a group nor a host"),
    ("~(", "is not a valid pattern"),
    ("gpu:&other", "leaves no host"),
    ("!", "names nothing after its ! or &"),
    ("gpu[:1]", "neither a group nor a host"),  # not a subscript to ansible-core: a wildcard that matches nothing
])
def test_a_pattern_that_selects_nothing_is_one_line(inv, pattern, said):
    with pytest.raises(InventoryError) as e:
        inv.select(pattern)
    assert said in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_retry_file_names_hosts_one_a_line_and_is_never_echoed(inv, tmp_path):
    retry = tmp_path / "site.retry"
    retry.write_text("gpu04\ngpu02\n\n")
    assert inv.select(f"@{retry}") == ["gpu02", "gpu04"]  # as ansible-playbook --limit: in the order of all
    assert inv.select(f"@{retry}:!gpu02") == ["gpu04"]
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-password\ngpu01\n")
    with pytest.raises(InventoryError) as e:
        inv.select(f"@{secret}")
    assert f"a line of @{secret}, which is neither" in str(e.value) and "hunter2" not in str(e.value)
    retry.write_text("!gpu\n")  # its lines are terms of the pattern, as ansible-core reads them
    assert inv.select(f"@{retry}") == ["solo", "o1", "h200-01", "s1"]
    with pytest.raises(InventoryError, match="no such file|not found|does not exist|cannot"):
        inv.select(f"@{tmp_path / 'missing.retry'}")


def test_connection_variables_we_do_not_honour_are_warned_about_and_aliases_are_honoured(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu]\n"
                    "gpu01 ansible_ssh_host=10.0.0.5 ansible_ssh_port=2222 ansible_ssh_user=ops "
                    "ansible_private_key_file=~/.ssh/fleet ansible_become=true\n"
                    "gpu02 ansible_host=10.0.0.6 ansible_password=hunter2 "
                    "ansible_ssh_common_args='-o ProxyJump=bastion'\n")
    inv = load_inventory(path)
    first = inv.entries(["gpu01"])[0]
    assert first.target == "ops@10.0.0.5:2222" and first.identity_file.endswith("/.ssh/fleet")
    warnings = inventory_warnings(inv, inv.hosts())
    assert [w.split(": ")[1].split(" ")[0] for w in warnings] == ["ansible_become", "ansible_password",
                                                                  "ansible_ssh_common_args"]
    assert "NOPASSWD" in warnings[0] and "by key only" in warnings[1] and "~/.ssh/config" in warnings[2]
    assert not any("hunter2" in w or "bastion" in w for w in warnings)  # the names, never the values
    assert inventory_warnings(inv, ["gpu01"]) == warnings[:1]  # only the hosts the rollout names


@pytest.mark.parametrize("text, said", [
    ("[gpu]\ngpu01 agent_trasport=sim\n", "agent_trasport is not a variable of agent fleet"),
    ("[gpu]\ngpu01\n[gpu:vars]\nagent_pyhton=/usr/bin/python3\n", "agent_pyhton is not a variable"),
])
def test_a_typo_in_our_own_variables_is_refused(tmp_path, text, said):
    path = tmp_path / "hosts.ini"
    path.write_text(text)
    with pytest.raises(InventoryError) as e:
        load_inventory(path)
    assert said in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text, said", [
    ("all:\n  hosts:\n    - gpu01\n    - gpu02\n", "hosts: of group 'all' is a list"),
    ("all:\n  children:\n    gpu:\n      hosts:\n        on:\n", "Ansible's YAML reader takes it for a boolean"),
    ("all:\n  children:\n    gpu:\n      hosts:\n        0123:\n", "takes it for a number"),
    ("all:\n  children:\n    - gpu\n", "children: of group 'all' is a list"),
])
def test_yaml_hosts_or_children_written_as_a_list_or_a_string_is_one_line(tmp_path, text, said):
    path = tmp_path / "hosts.yml"
    path.write_text(text)
    with pytest.raises(InventoryError) as e:
        load_inventory(path)
    assert said in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_the_json_of_ansible_inventory_list_is_read_as_ansible_merged_it(tmp_path):
    listed = {"_meta": {"hostvars": {
        "ip-10-0-0-5": {"ansible_host": "10.0.0.5", "ansible_user": "ubuntu", "ec2_instance_type": "p5.48xlarge"},
        "ip-10-0-0-6": {"ansible_host": "10.0.0.6", "ansible_user": "ubuntu"},
        "sim1": {"agent_transport": "sim"}}},
        "all": {"children": ["ungrouped", "aws_ec2", "sims"]},
        "aws_ec2": {"hosts": ["ip-10-0-0-5", "ip-10-0-0-6"]},
        "sims": {"hosts": ["sim1"]}}
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(listed))
    inv = load_inventory(path)
    assert inv.select("aws_ec2[-1]") == ["ip-10-0-0-6"]
    assert [e.target for e in inv.entries(inv.select("aws_ec2"))] == ["ubuntu@10.0.0.5", "ubuntu@10.0.0.6"]
    assert inv.entries(["sim1"])[0].transport == "sim"
    assert inventory_warnings(inv, inv.hosts()) == []  # ec2_* is the plugin's, not a connection variable
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"_meta": {}, "all": {"children": ["x"]}}))
    with pytest.raises(InventoryError, match="ansible-inventory -i SOURCE --list"):
        load_inventory(broken)


def test_ten_thousand_hosts_select_quickly(tmp_path):
    path = tmp_path / "big.ini"
    path.write_text("[gpu]\ngpu[00000:09999] agent_transport=sim\n")
    inv = load_inventory(Path(path))
    assert len(inv.select("gpu:!gpu0000*")) == 9990


def test_a_host_with_a_port_is_that_host_on_that_port(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu]\ngpu01:2222 ansible_host=10.0.0.5\ngpu[02:03]:2200\n")
    inv = load_inventory(path)
    assert inv.hosts() == ["gpu01", "gpu02", "gpu03"]
    assert [e.target for e in inv.entries()] == ["10.0.0.5:2222", "gpu02:2200", "gpu03:2200"]
    yml = tmp_path / "hosts.yml"
    yml.write_text("all:\n  hosts:\n    gpu01:2222:\n      ansible_user: ops\n")
    assert load_inventory(yml).entries()[0].target == "ops@gpu01:2222"
