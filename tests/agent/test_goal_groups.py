"""Host groups in goal files: a rule or a check on a group means each of its hosts, and no other."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.goal import GoalError, load_goal
from agent.safety.authorizations import Authorization
from agent.safety.policy import SafetyPolicy, Verdict
from tools.base import BackupRecord
from tools.pip_install import PipInstall

CU130 = "https://download.pytorch.org/whl/cu130"
GOAL = f"""\
goal: torch to cu130 on the training hosts
hosts:
  - {{name: gpu1, transport: sim}}
  - {{name: gpu2, transport: sim}}
  - {{name: gpu3, transport: sim}}
  - {{name: db1, transport: sim}}
groups:
  train: [gpu1, gpu2]
  gpus: [gpu3, train]
authorizations:
  - host: train
    tool: pip_install
    args: {{index_url: "{CU130}", packages: ["torch==*+cu130"], no_deps: [true, false]}}
  - {{host: gpus, command: "systemctl restart sglang"}}
  - {{host: all, command: "nvidia-smi -pm 1"}}
success:
  - command: {{host: gpus, run: "python -m pip show torch", expect_output: "+cu130"}}
"""
INSTALL = {"index_url": CU130, "packages": ["torch==2.10.0+cu130"], "no_deps": False}


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "goal.yaml"
    p.write_text(text)
    return p


def gate_of(goal) -> SafetyPolicy:
    gate = SafetyPolicy(scope=set(goal.host_names()), mode="scripted", authorizations=goal.authorizations)
    for h in goal.host_names():
        gate.ledger.register(BackupRecord(backup_id=f"b-{h}", host=h, kind="pip-freeze", target="p", created_at=0,
                                          remote_dir="/", verified=True))
    return gate


def install_on(gate: SafetyPolicy, host: str):
    tool = PipInstall()
    return gate.decide(tool.name, tool.action(tool.parse_args({"host": host, **INSTALL})))


def shell_on(gate: SafetyPolicy, host: str, command: str):
    from tools.ssh_exec import SSHExec

    tool = SSHExec()
    return gate.decide(tool.name, tool.action(tool.parse_args({"host": host, "command": command})))


def test_a_rule_on_a_group_covers_its_hosts_and_no_other(tmp_path):
    gate = gate_of(load_goal(write(tmp_path, GOAL)))
    assert [install_on(gate, h).verdict for h in ("gpu1", "gpu2", "gpu3", "db1")] == [
        Verdict.ALLOW, Verdict.ALLOW, Verdict.DENY, Verdict.DENY]
    # Children: gpus holds gpu3 and, through train, gpu1 and gpu2; `all` is every host.
    restart = [shell_on(gate, h, "systemctl restart sglang").verdict for h in ("gpu1", "gpu2", "gpu3", "db1")]
    assert restart == [Verdict.ALLOW, Verdict.ALLOW, Verdict.ALLOW, Verdict.DENY]
    assert shell_on(gate, "db1", "nvidia-smi -pm 1").verdict is Verdict.ALLOW


def test_the_refusal_and_the_goal_message_name_the_group_and_its_hosts(tmp_path):
    from agent.session_builder import goal_message

    goal = load_goal(write(tmp_path, GOAL))
    assert "- [0] on train (gpu1, gpu2): pip_install" in goal_message(goal)
    assert "- [1] on gpus (gpu1, gpu2, gpu3): exactly the command `systemctl restart sglang`" in goal_message(goal)
    refusal = install_on(gate_of(goal), "db1").reason
    assert "train" not in refusal.split("the rules for this host are")[-1], refusal  # db1's rules only
    assert "[2] on all (gpu1, gpu2, gpu3, db1)" in refusal


def test_the_record_keeps_the_groups_hosts_so_replay_needs_no_goal_file(tmp_path):
    goal = load_goal(write(tmp_path, GOAL))
    recorded = gate_of(goal).as_record()["authorizations"]
    assert recorded[0] == {"host": "train", "members": ["gpu1", "gpu2"], "tool": "pip_install",
                           "args": {"index_url": CU130, "packages": ["torch==*+cu130"], "no_deps": [True, False]}}
    rebuilt = [Authorization.model_validate(a) for a in recorded]
    gate = SafetyPolicy(scope=set(goal.host_names()), mode="scripted", authorizations=rebuilt)
    for h in goal.host_names():
        gate.ledger.register(BackupRecord(backup_id=f"b-{h}", host=h, kind="pip-freeze", target="p", created_at=0,
                                          remote_dir="/", verified=True))
    assert [install_on(gate, h).verdict for h in ("gpu1", "db1")] == [Verdict.ALLOW, Verdict.DENY]


def test_a_check_on_a_group_runs_on_each_of_its_hosts(tmp_path):
    goal = load_goal(write(tmp_path, GOAL))
    assert goal.hosts_of("gpus") == ["gpu1", "gpu2", "gpu3"]  # in the order of hosts:
    assert goal.hosts_of("all") == goal.hosts_of(None) == ["gpu1", "gpu2", "gpu3", "db1"]
    assert goal.hosts_of("db1") == ["db1"]


@pytest.mark.parametrize("groups, said", [
    ("  train: [gpu1, nope]\n", r"goal.yaml:\d+: groups: 'train' lists 'nope', which is neither one of the hosts"),
    ("  db1: [gpu1]\n", r"groups: 'db1' is also the name of host 'db1': a group needs a name of its own"),
    ("  DB1: [gpu1]\n", r"groups: 'DB1' is also the name of host 'db1' \(but for case\)"),
    ("  train: [gpus]\n  gpus: [train]\n", r"groups: train > gpus > train is a cycle"),
    ("  train: [train]\n", r"groups: train > train is a cycle"),
    ("  all: [gpu1]\n", r"groups: `all` is every host already"),
    ("  train: []\n", r"groups: 'train' has no members"),
    ("  gpu-a: [gpu1]\n", r"groups: 'gpu-a' is not a group name"),
    ("  '*': [gpu1]\n", r"groups: '\*' is not a group name"),
    ("  train: gpu1\n", r"groups.train: Input should be a valid list"),
    ("  train: [1]\n", r"groups.train\[0\]: Input should be a valid string"),
])
def test_a_wrong_group_is_one_line_naming_the_file_the_line_and_the_key(tmp_path, groups, said):
    text = GOAL.replace("  train: [gpu1, gpu2]\n  gpus: [gpu3, train]\n", groups)
    text = text.replace("host: train", "host: gpu1").replace("host: gpus", "host: gpu1")
    with pytest.raises(GoalError, match=said) as e:
        load_goal(write(tmp_path, text))
    assert "\n" not in str(e.value)


def test_a_rule_naming_an_unknown_group_or_giving_members_itself_is_refused(tmp_path):
    with pytest.raises(GoalError, match=r"authorizations\[0\]: names host 'trian', which is not in hosts .* or "
                                        r"groups \['gpus', 'train'\]"):
        load_goal(write(tmp_path, GOAL.replace("host: train", "host: trian")))
    with pytest.raises(GoalError, match="`members` is not a key of a goal file's rule"):
        load_goal(write(tmp_path, GOAL.replace("  - host: train\n", "  - host: train\n    members: [db1]\n")))


def test_a_host_named_all_is_refused_as_it_would_read_as_every_host(tmp_path):
    with pytest.raises(GoalError, match=r"goal.yaml:\d+: hosts: a host cannot be named `all`"):
        load_goal(write(tmp_path, "goal: g\nhosts: [all, b]\nauthorizations:\n  - {host: all, command: ls}\n"))


def test_a_recipe_rule_cannot_carry_members(tmp_path):
    from agent.fleet.recipe import Recipe

    with pytest.raises(ValueError, match="`members` is not a key of a recipe's rule"):
        Recipe.model_validate({"goal": "g", "steps": [{"tool": "ssh_exec", "args": {"command": "ls"}}], "authorizations": [
            {"host": "x", "members": ["a"], "command": "ls"}]})
