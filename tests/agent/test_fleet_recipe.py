"""Recipes: what a canary's record gives, and what a recipe file may say."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.fleet.recipe import RecipeError, dump_recipe, load_recipe, recipe_from_transcript
from agent.fleet.rollout import host_goal
from agent.goal import HostEntry

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "transcripts"


def test_a_recipe_round_trips_through_its_file(tmp_path):
    r = recipe_from_transcript(TRANSCRIPTS / "cuda13-upgrade.jsonl")
    path = tmp_path / "r.yaml"
    path.write_text(dump_recipe(r))
    assert load_recipe(path) == r
    assert path.read_text().startswith("# A recipe for `agent fleet")


@pytest.mark.parametrize("name, said", [
    ("refused-before-backup.jsonl", "did not meet its goal"),
    ("install-no-space.jsonl", "did not meet its goal"),
])
def test_a_session_that_proved_nothing_gives_no_recipe(name, said):
    with pytest.raises(RecipeError, match=said):
        recipe_from_transcript(TRANSCRIPTS / name)


def test_a_rule_for_one_host_applies_to_that_host_only(tmp_path):
    r = recipe_from_transcript(TRANSCRIPTS / "cuda13-upgrade.jsonl")
    r.authorizations.append(r.authorizations[0].model_copy(update={"host": "h1"}))
    for name, count in (("h1", len(r.authorizations)), ("h10", len(r.authorizations) - 1)):
        goal = host_goal(r, HostEntry(name=name, transport="sim"))  # builds: no crash for h10
        assert len(goal.authorizations) == count


def test_a_rule_that_can_never_match_is_said_when_the_recipe_loads(tmp_path):
    """Red team: a web_search rule naming `query` crashed every host's session instead."""
    r = recipe_from_transcript(TRANSCRIPTS / "cuda13-upgrade.jsonl")
    text = dump_recipe(r).replace("authorizations:\n", "authorizations:\n- host: '*'\n  tool: web_search\n"
                                                       "  args: {query: cuda}\n", 1)
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError, match="authorizations.0.*query") as e:
        load_recipe(path)
    assert "\n" not in str(e.value)


def test_a_recipe_with_an_outputs_check_names_the_endpoint_each_host_is_asked_at(tmp_path):
    """An outputs check in a recipe without `outputs:` would hold every host's first change for a baseline that
    never comes (a newcomer found `--check` saying "would change" and the canary then refused): said when the recipe
    loads. With the endpoint, each host is asked before and after (tests/app/test_fleet_outputs.py)."""
    from agent.fleet.recipe import Recipe

    base = {"goal": "g", "steps": [{"tool": "ssh_exec", "args": {"command": "ls"}}],
            "checks": [{"outputs": {"label": "after", "compare_to": "before"}}]}
    with pytest.raises(ValueError, match=r"checks\[0\]: an `outputs` check needs the recipe's `outputs:`"):
        Recipe.model_validate(base)
    recipe = Recipe.model_validate({**base, "outputs": {"endpoint": "http://127.0.0.1:30000"}})
    assert recipe.outputs.call("gpu01", "after") == {"host": "gpu01", "endpoint": "http://127.0.0.1:30000",
                                                     "label": "after", "max_tokens": 24, "timeout": 300,
                                                     "compare_to": "before"}
    with pytest.raises(ValueError, match="endpoint"):
        Recipe.model_validate({**base, "outputs": {"endpoint": "http://10.0.0.1:30000"}})
