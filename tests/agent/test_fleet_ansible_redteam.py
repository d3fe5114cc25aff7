"""The red team's recipes against `agent recipe --ansible` (tests/data/fleet/redteam-2026-12-02b-ansible/).

Each case meets its recorded fate: refused with one line (every case the tester marked `refuse`, and
those of the `safe` ones the tools' checks, the classifier or the authorizations stop), or exported as a
playbook that keeps its shape: its two plays on `all` (the canary's, the batches'), only the keys the exporter
writes, every string that
holds the attack `!unsafe`, pure ASCII. The slow half runs six of the exported ones with the real
ansible-playbook on a sim, offline: the attack's marker appears neither on the controller nor on the host.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_sims import ansible_playbook, recap, sims_for_ansible

from agent.fleet.ansible import playbook
from agent.fleet.recipe import RecipeError, load_recipe

CORPUS = Path(__file__).resolve().parents[1] / "data" / "fleet" / "redteam-2026-12-02b-ansible"
ROWS = [line.split("\t") for line in (CORPUS / "cases.tsv").read_text().splitlines()[1:]]
CASES = {name: (expected, marker, fate) for name, expected, marker, fate, _ in ROWS}
# The keys the exporter writes; a recipe that added one would have changed what the play does.
OUR_KEYS = {"name", "hosts", "serial", "max_fail_percentage", "gather_facts", "tasks", "vars", "block", "rescue",
            "always", "ansible.builtin.command", "argv", "stdin", "register", "changed_when", "ansible.builtin.debug",
            "msg", "when", "ansible.builtin.meta", "ansible.builtin.fail", "upgrade_python", "upgrade_helper",
            "ansible.builtin.set_fact", "upgrade_proven", "upgrade_seen", "check_mode", "no_log"}


class _Tagged(str):
    pass


def _untagged(text: str) -> set[str]:
    strings: list = []
    _walk(_load(text), set(), strings)
    return {s for s in strings if not isinstance(s, _Tagged)}


def _load(text: str):
    loader = type("L", (yaml.SafeLoader,), {})
    loader.add_constructor("!unsafe", lambda ld, node: _Tagged(ld.construct_scalar(node)))
    return yaml.load(text, Loader=loader)


def _walk(node, keys: set, strings: list) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            keys.add(k)
            _walk(v, keys, strings)
    elif isinstance(node, list):
        for v in node:
            _walk(v, keys, strings)
    elif isinstance(node, str):
        strings.append(node)


def export(name: str) -> str:
    path = CORPUS / "cases" / name
    return playbook(load_recipe(path), source=str(path), canary=1, batch=4, max_fail=0)


OUR_STRINGS = _untagged(playbook(load_recipe(CORPUS / "base.yaml"), source="base.yaml", canary=1, batch=4, max_fail=0))


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_meets_its_recorded_fate(name):
    expected, marker, fate = CASES[name]
    assert expected == "safe" or fate == "refused", name  # what must be refused is
    if fate == "refused":
        with pytest.raises(RecipeError) as e:
            export(name)
        assert "\n" not in str(e.value) and str(e.value).strip(), name
        return
    text = export(name)
    assert all(ord(c) < 128 for c in text)
    plays = _load(text)
    assert isinstance(plays, list) and len(plays) == 2 and all(p["hosts"] == "all" for p in plays)
    keys, strings = set(), []
    _walk(plays, keys, strings)
    assert keys <= OUR_KEYS, keys - OUR_KEYS
    batches = plays[1]["tasks"][1:]
    assert plays[0]["tasks"][2:-1] == batches  # the canary play runs the same host tasks
    names = [t["name"] for t in batches]
    assert names[0].startswith("preflight:") and names[3].startswith("backup:") and "rescue" in batches[-1]
    # The strings Ansible may template are the exporter's own, the same as for the tester's clean recipe.
    assert {s for s in strings if not isinstance(s, _Tagged)} <= OUR_STRINGS
    if marker != "-":
        assert any(marker in s for s in strings if isinstance(s, _Tagged)) or marker not in text

RUN = ["01-goal-jinja-lookup-pipe.yaml", "41-index-url-cmdsubst.yaml", "51-check-toolkit-path-cmdsubst.yaml",
       "54-parser-regex-quote-breakout.yaml", "63-goal-newline-new-play.yaml", "75-goal-escaped-nul.yaml"]


@pytest.mark.parametrize("name", RUN)
def test_an_exported_attack_does_nothing_it_was_written_to_do(name, tmp_path):
    assert CASES[name][2] == "exported"
    marker = Path(CASES[name][1])
    book = tmp_path / "book.yml"
    book.write_text(export(name))
    recipe = load_recipe(CORPUS / "cases" / name)
    node = {recipe.drain.scheduler: {}} if recipe.drain else {}  # a node of the scheduler the recipe drains it from
    inventory, roots = sims_for_ansible(tmp_path / "ansible", {"gpu01": node})
    played = ansible_playbook(inventory, book, tmp_path, offline=True)
    assert "gpu01" in recap(played.stdout), played.stdout[-2000:] + played.stderr[-2000:]
    assert not marker.exists() and not list(roots["gpu01"].rglob(marker.name))
    # no play of the recipe's making: the canary's, then the batches' (none where the canary failed)
    canary, batches = played.stdout.count(" (canary)]"), played.stdout.count(" (batches)]")
    assert played.stdout.count("PLAY [") == canary + batches and canary == 1 and batches <= 1
    assert "TASK [benchmark before]" in played.stdout  # it got past the preflight, the backup and the drain
