"""The redactor and the bash walk stay in rooms of a readable size, and their names stay where callers
import them: the redactor's patterns are data beside a small engine (agent/record/redact*.py), and the
walk is split by what it judges (agent/safety/classifier/: analysis, statements, simple commands, pipes,
redirections, expansions, the work budget)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOUND = 600  # lines: a module one can read in a sitting
MODULES = sorted([*ROOT.glob("agent/record/redact*.py"), *ROOT.glob("agent/safety/classifier/*.py")])


def test_the_modules_are_found():
    names = {p.name for p in MODULES}
    assert {"redact.py", "shell.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_module_is_within_the_bound(path):
    lines = len(path.read_text().splitlines())
    assert lines <= BOUND, f"{path.relative_to(ROOT)} has {lines} lines (at most {BOUND}): split it by what it does"


def test_callers_import_the_same_names_from_the_same_places():
    from agent.record import transcript
    from agent.record.redact import REDACTED, Redactor, StreamRedactor
    from agent.safety.classifier import classify, classify_workload, plain_words
    from agent.safety.classifier.shell import classify as shell_classify

    assert transcript.Redactor is Redactor and transcript.StreamRedactor is StreamRedactor
    assert transcript.REDACTED == REDACTED == "[REDACTED]"
    assert classify is shell_classify
    redactor = Redactor(secrets=["a-known-secret"], environ={})
    stream = StreamRedactor(redactor)
    assert stream.feed("token a-known-secret ghp_" + "a" * 36 + "\n") == [f"token {REDACTED} {REDACTED}"]
    assert classify("ls /tmp").cls.value == "read-only"
    assert classify_workload("rm -rf /").cls.value == "forbidden"
    assert plain_words("nvidia-smi -L") == ["nvidia-smi", "-L"]


def test_the_redactor_patterns_are_data():
    """What the patterns module defines at its top level is compiled patterns, strings, numbers and tables;
    its only functions build patterns when it loads (no rule runs from there)."""
    tree = ast.parse((ROOT / "agent/record/redact_patterns.py").read_text())
    functions = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert functions <= {"_flags", "_by_first_letter"}, functions
