"""The recorded sessions in transcripts/: each replays, and each shows what it was recorded to show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.record.replay import replay
from agent.record.transcript import iter_events, verify
from tools import default_tools
from tools.base import Registry

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = sorted((ROOT / "transcripts").glob("*.jsonl"))


def events(name: str) -> list[dict]:
    return list(iter_events(ROOT / "transcripts" / f"{name}.jsonl"))


def test_the_recorded_sessions_are_all_there():
    names = {p.stem for p in TRANSCRIPTS}
    assert {"cuda13-upgrade", "refused-before-backup", "install-no-space", "malformed-calls",
            "gpu-h200-check", "gpu-h200-change"} <= names


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_every_recorded_session_verifies_and_replays(path):
    check = verify(path)
    assert check.ok, check.problems
    report = replay(path, Registry(default_tools()))
    assert report.ok, report.message
    start = next(iter_events(path))
    assert "scripted model" in start.get("note", ""), "a recorded session says how its model turns were made"


def test_the_happy_path_verifies_in_one_batch_then_backs_up_installs_and_benchmarks():
    ev = events("cuda13-upgrade")
    first = [e["tool"] for e in ev if e["type"] == "tool_call" and e["turn"] == 1]
    assert first == ["inspect_host", "ssh_exec", "web_search"]
    starts = {e["call_id"]: e["t"] for e in ev if e["type"] == "tool_start" and e["turn"] == 1}
    ends = [e["ended"] for e in ev if e["type"] == "tool_result" and e["turn"] == 1]
    assert max(starts.values()) < min(ends), "the first checks ran as one parallel batch"
    tools_in_order = [e["tool"] for e in ev if e["type"] == "tool_call"]
    assert tools_in_order.index("pip_freeze_backup") < tools_in_order.index("install_runfile")
    results = {e["tool"]: e for e in ev if e["type"] == "tool_result"}
    assert results["install_runfile"]["data"]["nvcc_version"] == "13.0"
    bench = [e["data"] for e in ev if e["type"] == "tool_result" and e["tool"] == "run_bench"]
    assert [b["label"] for b in bench] == ["before", "after"]
    assert 85 < bench[0]["median"] < 94 and 92 < bench[1]["median"] < 100
    assert bench[1]["comparison"]["significant"] is True
    assert [e for e in ev if e["type"] == "goal_result"][0]["met"] is True


def test_the_refused_session_shows_every_reason_at_once_and_the_recovery():
    ev = events("refused-before-backup")
    rules = [(e["rule"], e["verdict"]) for e in ev if e["type"] == "decision"]
    assert rules == [("read-only", "allow"), ("not-authorized", "deny"), ("backup", "allow"), ("authorized", "allow")]
    refusal = next(e for e in ev if e["type"] == "decision" and e["verdict"] == "deny")
    assert "no rule of the goal file's authorizations covers it" in refusal["reason"]
    assert "the rules for this host are [0]" in refusal["reason"]  # what would pass instead
    assert "pip_freeze_backup" not in refusal["reason"]  # no rule would cover it, so a backup would not help


def test_the_failed_install_is_reported_and_cleaned_up():
    ev = events("install-no-space")
    install = [e for e in ev if e["type"] == "tool_result" and e["tool"] == "install_runfile"][0]
    assert install["status"] == "error" and "Disk space check has failed" in install["content"]
    cleanup = [e for e in ev if e["type"] == "decision" and e["subject"].startswith("rm -f")][0]
    assert cleanup["verdict"] == "allow" and cleanup["risk"] == "destructive"
    assert [e for e in ev if e["type"] == "goal_result"][0]["met"] is False


def test_the_malformed_session_recovers():
    ev = events("malformed-calls")
    calls = [e for e in ev if e["type"] == "tool_call"]
    assert sum(bool(c.get("error")) for c in calls) == 3
    assert not calls[-1].get("error") and ev[-1]["status"] == "done"


def test_demo_runs_the_upgrade_on_a_fresh_host_in_one_go(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run([sys.executable, "-m", "app.cli", "demo", "--dir", str(tmp_path)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "recorded in transcripts/cuda13-upgrade.jsonl are played again" in r.stderr
    assert "ratio after/before: 1.0" in r.stdout
    transcript = tmp_path / "demo.jsonl"
    assert verify(transcript).ok
    assert (tmp_path / "demo.report.md").exists()
    checks = [e for e in iter_events(transcript) if e["type"] == "check"]
    assert [(c["kind"], c["ok"]) for c in checks] == [("toolkit", True), ("throughput", True), ("command", True)]
    # The fresh host really changed: the new toolkit and the cu130 wheel are there.
    assert (tmp_path / "sim" / "usr" / "local" / "cuda-13.0" / "bin" / "nvcc").exists()
    freeze = [e for e in iter_events(transcript) if e["type"] == "final_state"][0]["freeze"]
    assert "torch==2.10.0+cu130" in freeze
    assert replay(transcript, Registry(default_tools())).ok


def test_demo_json_prints_events_only(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run([sys.executable, "-m", "app.cli", "demo", "--json", "--dir", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines[0]["type"] == "session_start" and lines[-1]["type"] == "session_end"


def test_the_real_gpu_change_was_backed_up_then_rolled_back_to_the_same_freeze():
    """transcripts/gpu-h200-change.jsonl, recorded on the H200 machine (docs/gpu.md): a real pip_install and its
    restore, with the freeze read before anything changed equal to the one read after the restore."""
    ev = events("gpu-h200-change")
    calls = [(e["turn"], e["tool"]) for e in ev if e["type"] == "tool_call"]
    tools = [t for _, t in calls]
    assert tools.index("pip_freeze_backup") < tools.index("pip_install") < tools.index("restore_backup")
    results = {e["call_id"] + f"@{e['turn']}": e for e in ev if e["type"] == "tool_result"}
    by_tool = {}
    for e in results.values():
        by_tool.setdefault(e["tool"], []).append(e)
    install = by_tool["pip_install"][0]["data"]
    assert install["index_urls"][0].startswith("file:///") and len(install["changes"]) == 3
    assert sum(1 for c in install["changes"] if c.get("before") is None) == 1, "one package is new"
    restore = by_tool["restore_backup"][0]["data"]
    assert restore["restored"] and restore["remaining_diff"] == [] and restore["uninstalled"]
    freezes = [e["content"].split("--- stdout ---", 1)[-1].split("--- stderr", 1)[0] for e in by_tool["ssh_exec"]
               if "==" in e["content"] and "Version:" not in e["content"]]
    assert len(freezes) == 2 and freezes[0] == freezes[1] and freezes[0].count("==") > 100
    labels = [e["data"]["label"] for e in by_tool["run_bench"]]
    assert labels == ["before-eager", "before-compile", "after-eager", "after-compile", "restored-eager",
                      "restored-compile"]
    end = next(e for e in ev if e["type"] == "goal_result")
    assert end["verdict"] == "met" and end["exit_code"] == 0
