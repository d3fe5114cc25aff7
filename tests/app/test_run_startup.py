"""The start of `agent run`: what it loads and how, kept cheap without changing what it records."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.run import start_up_uncollected

ROOT = Path(__file__).resolve().parents[2]


def env_for(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "SSH_AUTH"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(home)})
    return env


def test_the_versions_on_record_do_not_load_paramiko_for_a_session_without_ssh(tmp_path):
    probe = ("import importlib.metadata, json, sys\n"
             "from agent.session_builder import versions\n"
             "v = versions()\n"
             "print(json.dumps({'loaded': 'paramiko' in sys.modules, 'versions': v,\n"
             "                  'installed': importlib.metadata.version('paramiko')}))\n")
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env_for(tmp_path), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    assert seen["loaded"] is False
    assert seen["versions"]["paramiko"] == seen["installed"]
    assert set(seen["versions"]) == {"upgrade_agent", "python", "openai", "paramiko", "pydantic"}


def test_the_collector_pauses_for_the_start_up_only_and_comes_back_after_an_error():
    assert gc.isenabled()
    try:
        with start_up_uncollected():
            assert not gc.isenabled()
        assert gc.isenabled() and gc.get_freeze_count() > 0  # what start-up made is not walked again
        with pytest.raises(RuntimeError), start_up_uncollected():
            raise RuntimeError("a bad goal file")
        assert gc.isenabled()
    finally:
        gc.unfreeze()  # this test process goes on: its objects are collectable again
