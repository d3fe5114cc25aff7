"""The red team's goal files against host groups (tests/data/authorizations/redteam-2026-12-02-groups/).

Written from a one-page brief by a tester who had not read the code: each case is a goal file, what a safe
tool does with it (`load-error`, or `loads`), and for those that load, probes: a step on a host, and whether
a rule should cover it. A case passes when the goal is refused with a GoalError (never another exception),
or loads and the gate answers each probe as the case says, with a verified backup of every host in place
(so only the rules decide).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from agent.goal import GoalError, load_goal
from agent.safety.policy import SafetyPolicy, Verdict
from tools import default_tools
from tools.base import BackupRecord

CORPUS = Path(__file__).resolve().parents[1] / "data" / "authorizations" / "redteam-2026-12-02-groups"
CASES = sorted((CORPUS / "cases").glob("*.yaml"))


def read_case(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def decide(gate: SafetyPolicy, probe: dict) -> Verdict:
    if "command" in probe:
        name, args = "ssh_exec", {"host": probe["host"], "command": probe["command"]}
    else:
        name, args = probe["tool"], {"host": probe["host"], **(probe.get("args") or {})}
    tool = next(t for t in default_tools([name]))
    try:
        parsed = tool.parse_args(args)
    except Exception:  # noqa: BLE001 - arguments the tool refuses: the step never runs
        return Verdict.DENY
    return gate.decide(tool.name, tool.action(parsed)).verdict


# Cases the tester wrote as `loads` that the loader refuses instead, each with one line; a refusal covers
# nothing, so it is as safe as the probes' answers (the tester said so of 04, 16 and 43 in cases.tsv).
REFUSED_INSTEAD = {
    "04-group-case-variant-of-host": "a group named GPU1 beside host gpu1 differs from it only in case",
    "05-empty-group-rule": "an empty group is a mistake, not a rule that covers nobody",
    "16-lookalike-group-keys": "a zero-width space is not in a group name",
    "42-host-key-inside-args": "`host` inside a rule's args is not an argument a rule decides",
    "43-deep-chain": "3,000 groups are over the limit of 256",
    "45-huge-group": "5,000 hosts make a file over the 64 KiB limit",
}


def test_the_corpus_is_there():
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_each_case_is_refused_or_covers_exactly_what_it_says(path, tmp_path):
    case = read_case(path)
    goal_file = tmp_path / "goal.yaml"
    goal_file.write_text(case["goal_file"], encoding="utf-8")
    if case["expect"] == "load-error" or path.stem in REFUSED_INSTEAD:
        with pytest.raises(GoalError) as e:
            load_goal(goal_file)
        # One line per problem, each naming the file (and the line and key where there is one).
        assert all(line.startswith(str(goal_file)) for line in str(e.value).splitlines()), str(e.value)
        return
    goal = load_goal(goal_file)
    gate = SafetyPolicy(scope=set(goal.host_names()), mode="scripted", authorizations=goal.authorizations)
    for h in goal.host_names():
        gate.ledger.register(BackupRecord(backup_id=f"b-{h}", host=h, kind="pip-freeze", target="p", created_at=0,
                                          remote_dir="/", verified=True))
    got = [(p["host"], p.get("tool") or p["command"], decide(gate, p) is Verdict.ALLOW) for p in case.get("probes") or []]
    want = [(p["host"], p.get("tool") or p["command"], bool(p["covered"])) for p in case.get("probes") or []]
    assert got == want
