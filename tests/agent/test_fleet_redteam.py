"""The red team's inventories, recipes and flags against `agent fleet` (tests/data/fleet/redteam-2026-12-02/).

Each case's recorded fate is what this code does with it: refused when its files load (one line, naming
what is wrong), or loaded, to be stopped by the tools and the gate as a rollout on sims showed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.fleet.inventory import InventoryError, load_inventory
from agent.fleet.recipe import RecipeError, dump_recipe, load_recipe, recipe_from_transcript

CORPUS = Path(__file__).resolve().parents[1] / "data" / "fleet" / "redteam-2026-12-02" / "attacks.jsonl"
CASES = [json.loads(line) for line in CORPUS.read_text().splitlines()]
SAMPLE = dump_recipe(recipe_from_transcript(Path(__file__).resolve().parents[2] / "transcripts" / "cuda13-upgrade.jsonl"))


def load(case: dict, tmp_path: Path) -> None:
    inventory = tmp_path / case["inventory"]["name"]
    inventory.write_text(case["inventory"]["text"])
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text((case.get("recipe") or {}).get("text") or SAMPLE)
    load_recipe(recipe)
    inv = load_inventory(inventory)
    flags = case["flags"]
    if "--limit" in flags:
        inv.select(flags[flags.index("--limit") + 1])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_each_case_meets_its_recorded_fate(case, tmp_path):
    if case["refused_at_load"]:
        with pytest.raises((InventoryError, RecipeError)) as e:
            load(case, tmp_path)
        said = str(e.value)
        assert "\n" not in said and said.split(": ", 1)[1] in case["fate"], said
    else:
        load(case, tmp_path)
