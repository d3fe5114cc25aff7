"""A recipe that asks the served model before and after (`outputs:`, check_outputs) and judges its answers (an
`outputs` check): rolled over sims of which one's answers drift on the CUDA 13 build, that host is failed and
restored while the other is upgraded; a canary that measured its answers gives a recipe that does the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.fleet.recipe import RecipeError, load_recipe
from fleet_runs import agent, canary_recipe, events
from test_fleet import check_record, inventory

ENDPOINT = "http://127.0.0.1:30000"


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Path:
    """The demo canary's recipe, with the served model's answers asked and required the same."""
    home = tmp_path_factory.mktemp("canary")
    learned = canary_recipe(home)
    text = learned.read_text().replace("\nchecks:\n", "\nchecks:\n- outputs:\n    same: true\n", 1)
    edited = home / "answers.recipe.yaml"
    edited.write_text(text + f"outputs:\n  endpoint: {ENDPOINT}\n")
    return edited


def test_a_host_whose_answers_drift_is_failed_and_restored_and_one_whose_answers_hold_is_upgraded(recipe, tmp_path):
    r0 = load_recipe(recipe)
    assert r0.outputs.endpoint == ENDPOINT and any(c.outputs and c.outputs.same for c in r0.checks)
    inv = inventory(tmp_path / "hosts.ini", {"gpu01": "", "gpu02": "{numerics: drift}"})
    out = tmp_path / "rollout"
    r = agent("fleet", str(recipe), "-i", str(inv), "--max-fail", "100", "--dir", str(out), home=tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    hosts = check_record(out)
    assert {h: e["ended"] for h, e in hosts.items()} == {"gpu01": "upgraded", "gpu02": "failed, restored"}, hosts
    assert "answers: the same outputs as before, prompt for prompt" in hosts["gpu01"]["reason"]
    assert "a success check failed" in hosts["gpu02"]["reason"] and "outputs differ from before" in \
        hosts["gpu02"]["reason"] and "rolled back" in hosts["gpu02"]["reason"], hosts["gpu02"]["reason"]
    for name, ok in (("gpu01", True), ("gpu02", False)):
        evs = events(out / f"{name}.jsonl")
        asked = [e["data"]["label"] for e in evs if e["type"] == "tool_result" and e["tool"] == "check_outputs"]
        assert asked == ["before", "after"], asked
        (check,) = [e for e in evs if e["type"] == "check" and e["kind"] == "outputs"]
        assert check["ok"] is ok, check
    # The restored host runs its old stack again: torch back on cu128, as its backup had it.
    restored = [e for e in events(out / "gpu02.jsonl") if e["type"] == "final_state"][-1]
    assert restored["inspect"]["python"]["torch"].endswith("+cu128"), restored["inspect"]["python"]


def test_a_recipe_asks_and_judges_answers_together_or_not_at_all(recipe, tmp_path):
    text = recipe.read_text()
    alone = tmp_path / "no-check.yaml"
    alone.write_text(text.replace("- outputs:\n    same: true\n", "", 1))
    with pytest.raises(RecipeError, match="no check judges its answers"):
        load_recipe(alone)
    unasked = tmp_path / "no-endpoint.yaml"
    unasked.write_text(text.split("\noutputs:\n")[0] + "\n")
    with pytest.raises(RecipeError, match=r"an `outputs` check needs the recipe's `outputs:`"):
        load_recipe(unasked)
    relabelled = tmp_path / "labels.yaml"
    relabelled.write_text(text.replace("- outputs:\n    same: true\n",
                                       "- outputs:\n    same: true\n    label: post\n", 1))
    with pytest.raises(RecipeError, match="compares label 'after' with 'before'"):
        load_recipe(relabelled)
    json.dumps(load_recipe(recipe).model_dump(mode="json"))  # the edited recipe itself loads
