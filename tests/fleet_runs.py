"""Real `agent` processes for the fleet tests: a clean environment, events of a record, a canary's recipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def env_for(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "SSH_AUTH"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "TMPDIR": str(home)})
    return env


def agent(*args: str, home: Path, stdin: str = "", timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, input=stdin,
                          env=env_for(home), timeout=timeout, cwd=ROOT)


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def canary_recipe(home: Path) -> Path:
    """The demo's run as the canary (goal met), and the recipe `agent recipe` reads from it."""
    demo = agent("demo", "--dir", str(home / "demo"), "--json", home=home, timeout=300)
    assert demo.returncode == 0, demo.stderr[-2000:]
    out = home / "cuda13.recipe.yaml"
    made = agent("recipe", str(home / "demo" / "demo.jsonl"), "-o", str(out), home=home)
    assert made.returncode == 0 and "2 steps" in made.stderr, made.stderr
    return out
