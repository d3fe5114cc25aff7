"""The slow tier's list names tests that exist: a renamed test would otherwise leave the slow tier, unseen, and
slow down the README's test command (or, listed under an old name, mark nothing)."""

from __future__ import annotations

import ast
from pathlib import Path

from tiers import slow_tests

ROOT = Path(__file__).resolve().parents[1]


def test_every_slow_tier_entry_is_a_test_function_of_its_file():
    missing = []
    for entry in sorted(slow_tests()):
        path, _, name = entry.partition("::")
        file = ROOT / path
        names = ({n.name for n in ast.walk(ast.parse(file.read_text())) if isinstance(n, ast.FunctionDef)}
                 if file.is_file() else set())
        if name not in names:
            missing.append(entry)
    assert not missing, "tests/slow_tier.txt names tests that are not there (renamed?):\n" + "\n".join(missing)
    assert len(slow_tests()) >= 50  # the list was read, not an empty file
