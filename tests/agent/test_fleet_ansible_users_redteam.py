"""A red team of Ansible users, who had not read our code, wrote 144 inventories and `--limit` patterns with what
ansible-core (2.15, 2.17 and 2.19, checked by running each) does with them (tests/data/fleet/
redteam-2026-12-05-ansible/cases.json). Each case must select the hosts ansible-playbook selects, in its order,
warn about the connection variables it names, and refuse what Ansible refuses, in one line; or be one of the
differences below, each a refusal where Ansible would warn and go on, or follow one of its bugs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest


from agent.fleet.inventory import InventoryError, host_entry, inventory_warnings, load_inventory

CASES = json.loads((Path(__file__).resolve().parents[1] / "data" / "fleet" / "redteam-2026-12-05-ansible" /
                    "cases.json").read_text())
FILES = {"ini": "hosts.ini", "yaml": "hosts.yml", "json-list": "inventory.json"}
# Refused by us, run by Ansible: where a rollout over other hosts than the operator meant is the risk.
REFUSED_ON_PURPOSE = {
    "pat-comma-then-colon": "a term that matches nothing (`gpu02:gpu03`, one term once a comma is there): Ansible "
                            "warns and rolls over the rest",
    "pat-nomatch-partial": "a term that matches nothing: Ansible warns and goes on",
    "pat-mixed-separators": "a term that matches nothing (the colons are literal once a comma is there)",
    "pat-sub-glob-dups": "gpu*[4]: ansible-core indexes its list before it drops the hosts matched twice, so [4] "
                         "of 4 hosts picks one; we say there is no [4]",
    "ini-range-reversed": "gpu[04:01] expands to no host in Ansible, silently",
    "yaml-duplicate-host-key": "a key written twice: Ansible keeps the last and warns",
    "unsure-conn-connection-local": "agent_transport sim and ansible_connection local on one host say two things",
}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_an_ansible_users_inventory_and_limit(case, tmp_path, monkeypatch):
    path = tmp_path / FILES[case["format"]]
    path.write_text(case["inventory"])
    limit = case.get("limit")
    if case.get("retry_file") is not None:
        retry = tmp_path / "retry.txt"
        retry.write_text(case["retry_file"])
        limit = limit.replace("/tmp/redteam-ansible/retry.txt", str(retry))
    try:
        inv = load_inventory(path)
        got, refused = inv.select(limit), None
    except InventoryError as e:
        got, refused = None, str(e)
    if refused is not None:
        assert "\n" not in refused
    if case["id"] in REFUSED_ON_PURPOSE:
        assert refused is not None, (case["id"], got)
        return
    if case["expect"].get("error"):
        assert refused is not None, (case["why"], got)
        return
    assert refused is None, (case["why"], refused)
    assert got == (case.get("hosts_playbook_order") or case["expect"]["hosts"]), case["why"]
    said = " ".join(inventory_warnings(inv, got))
    for variable in case.get("should_warn") or []:
        assert variable in said, (variable, said)
    for host, want in (case.get("effective") or {}).items():  # where ssh would connect, as Ansible's ssh runs
        values = {k: v for k, v in inv.vars_of(host).items() if k != "agent_transport"}  # as an SSH host
        entry = host_entry(path, host, values)
        m = re.fullmatch(r"(?:(?P<user>[^@]+)@)?(?P<host>\[[^\]]+\]|[^:]+)(?::(?P<port>\d+))?", entry.target)
        ours = {"host": m["host"], "port": int(m["port"]) if m["port"] else None, "user": m["user"]}
        for key, value in want.items():
            if key == "private_key_file":
                assert entry.identity_file == str(Path(value).expanduser()), (host, entry.identity_file, value)
            else:
                assert ours[key] == value, (host, key, ours[key], value)
