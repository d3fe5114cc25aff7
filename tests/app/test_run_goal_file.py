"""The run records its goal file as an absolute path, so `agent resume` finds it from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]


def test_a_goal_file_given_relative_is_recorded_absolute(tmp_path):
    (tmp_path / "goals").mkdir()
    (tmp_path / "goals" / "look.yaml").write_text("goal: look\nhosts: [local]\nbudget: {turns: 2}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    with FakeOpenAI([Reply(text="Nothing to do.")]) as srv:
        env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path), OPENAI_API_KEY="x", OPENAI_BASE_URL=srv.base_url)
        subprocess.run([sys.executable, "-m", "app.cli", "run", "goals/look.yaml", "--transcript", "t.jsonl"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    start = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert start["goal_file"] == str(tmp_path / "goals" / "look.yaml")
