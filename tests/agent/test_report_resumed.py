"""A resumed session is one story: the report, the claim check, the recipe and `agent sessions` read every part.

Real `agent run` and `agent resume` processes on a simulated GPU host, the real openai SDK against a scripted
server on 127.0.0.1. The run inspects the host, backs it up, measures "before" and installs the toolkit; then
its model server fails (the script is spent), and `agent resume` goes on in a new transcript: the torch
install, the "after" benchmark and a final answer that names the first part's backup and baseline.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))  # the resume tests' process helpers

from agent.fleet.recipe import recipe_from_transcript  # noqa: E402
from agent.report import build_report, check_report, render_markdown  # noqa: E402

from fake_openai import FakeOpenAI, Reply  # noqa: E402
from helpers import events  # noqa: E402
from test_resume import BENCH, RUNFILE, agent  # noqa: E402

pytestmark = pytest.mark.timeout(400)

PACKAGES = ["torch==2.10.0+cu130", "sgl-kernel==0.3.21+cu130", "nvidia-nccl-cu13==2.28.9",
            "nvidia-cuda-runtime==13.0.96"]
PIP = {"host": "sim", "index_url": "file:///srv/pypi/simple-cu130", "no_deps": True, "packages": PACKAGES}
GOAL = "Install CUDA 13.0 beside 12.8 on sim and move torch to cu130, measured before and after."


@dataclass
class Resumed:
    first: Path
    second: Path
    backup_id: str
    before_median: float
    tmp: Path


def goal_file(tmp: Path) -> Path:
    goal = tmp / "goal.yaml"
    goal.write_text(
        f"goal: {GOAL}\nhosts: [{{name: sim, transport: sim}}]\nauthorizations:\n"
        f"  - {{host: sim, tool: install_runfile, args: {{version: \"13.0\", runfile: \"{RUNFILE['runfile']}\"}}}}\n"
        f"  - {{host: sim, tool: pip_install, args: {{index_url: \"{PIP['index_url']}\", "
        f"packages: {json.dumps(PACKAGES)}, no_deps: true}}}}\n"
        "budget: {turns: 12}\nsuccess:\n  - toolkit: {host: sim, path: /usr/local/cuda-13.0, version: \"13.0\"}\n"
        "  - throughput: {label: after, compare_to: before, min_ratio: 1.0}\n")
    return goal


@pytest.fixture(scope="module")
def resumed(tmp_path_factory) -> Resumed:
    tmp = tmp_path_factory.mktemp("resumed")
    goal = goal_file(tmp)
    first, second = tmp / "first.jsonl", tmp / "second.jsonl"
    with FakeOpenAI([Reply(calls=[("inspect_host", {"host": "sim"})]),
                     Reply(calls=[("pip_freeze_backup", {"host": "sim"}), ("run_bench", {**BENCH, "label": "before"})]),
                     Reply(calls=[("install_runfile", RUNFILE)])]) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(first), "--json", tmp_path=tmp)
    assert events(first, "session_end")[0]["status"] == "model_error", r.stderr[-2000:]
    (backup,) = [e["data"] for e in events(first, "tool_result") if e["tool"] == "pip_freeze_backup"]
    (bench,) = [e["data"] for e in events(first, "tool_result") if e["tool"] == "run_bench"]
    answer = (f"Backup {backup['backup_id']} was read back intact. The before benchmark measured {bench['median']} "
              "tok/s; CUDA 13.0 was installed beside 12.8 and torch moved to 2.10.0+cu130.")
    with FakeOpenAI([Reply(calls=[("pip_install", PIP)]),
                     Reply(calls=[("run_bench", {**BENCH, "label": "after", "compare_to": "before",
                                                  "env": {"CUDA_HOME": "/usr/local/cuda-13.0"}})]),
                     Reply(text=answer)]) as srv:
        r = agent("resume", str(first), "--base-url", srv.base_url, "--transcript", str(second), tmp_path=tmp)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert events(second, "session_start")[0]["resumes"]["path"] == str(first.absolute())
    return Resumed(first, second, backup["backup_id"], bench["median"], tmp)


def test_the_report_of_a_resumed_run_tells_both_parts(resumed):
    report = build_report(resumed.second)
    assert [p.path for p in report.parts] == [resumed.first, resumed.second]
    # The backup, the baseline and the inspection of the first part count.
    assert [b.backup_id for b in report.backups] == [resumed.backup_id]
    assert [c.baseline.where for c in report.comparisons] == ["part 1, turn 2, call 2"]
    md = render_markdown(report)
    assert f"# Session report: {GOAL}" in md
    assert "no backup was taken" not in md and "Nothing was verified" not in md
    assert f"backup {resumed.backup_id} of /opt/venv/bin/python on sim" in md
    assert "| output\\_throughput (tok/s) | before: " in md and "| part 1, turn 2, call 2 / part 2, turn 2, call 1 |" in md
    assert "Before: part 1, turn 1, call 1 (inspect\\_host)" in md
    assert "| `/usr/local/cuda-13.0` | `13.0` | no | yes | added |" in md
    assert f"restore_backup {{\"host\": \"sim\", \"backup_id\": \"{resumed.backup_id}\"}}" in md
    # Steps of different parts, each numbered from turn 1, do not collide.
    assert len({s.where for s in report.steps}) == len(report.steps) == 6
    assert "over 2 parts" in md and "| **Parts** | 1. " in md


def test_the_claims_of_a_resumed_run_are_checked_against_every_part(resumed):
    check = check_report(build_report(resumed.second))
    assert check.differences == [], [f.text for f in check.differences]
    confirmed = " ".join(f.text for f in check.confirmed)
    assert resumed.backup_id in confirmed and "(part 1, turn 3, call 1)" in confirmed, confirmed


def test_a_resumed_canary_gives_a_recipe(resumed):
    recipe = recipe_from_transcript(resumed.second)
    assert [s.tool for s in recipe.steps] == ["install_runfile", "pip_install"]
    assert recipe.preconditions.toolkits == ["12.8"] and recipe.preconditions.driver
    assert recipe.benchmark is not None and recipe.benchmark.command == BENCH["command"]
    assert recipe.learned_from.verdict == "met"


def test_a_recipe_is_not_read_through_a_link_that_does_not_hold(resumed, tmp_path):
    from agent.fleet.recipe import RecipeError

    shutil.copy(resumed.second, tmp_path / "second.jsonl")
    changed = tmp_path / "first.jsonl"
    changed.write_bytes(resumed.first.read_bytes().replace(b'"label":"before"', b'"label":"b4"', 1))
    moved = json.loads((tmp_path / "second.jsonl").read_text().splitlines()[0])
    assert Path(moved["resumes"]["path"]).name == "first.jsonl"
    # The recorded path still holds the real first part: hide it so the changed copy beside is the one found.
    hidden = resumed.first.with_name("first.hidden")
    resumed.first.rename(hidden)
    try:
        with pytest.raises(RecipeError, match="was changed after this part began"):
            recipe_from_transcript(tmp_path / "second.jsonl")
    finally:
        hidden.rename(resumed.first)


def test_sessions_lists_the_resumed_run_as_one_story(resumed):
    data = resumed.tmp / "listing"
    data.mkdir()
    r = agent("sessions", "--json", "--dir", str(resumed.tmp), tmp_path=resumed.tmp)
    assert r.returncode == 0, r.stderr
    listed = {Path(s["path"]).name: s for s in json.loads(r.stdout)}
    old, new = listed["first.jsonl"], listed["second.jsonl"]
    # The first part goes on in the second: that one is the session now, and no resume is offered for the old.
    assert old["resumed_by"] == str(resumed.second.absolute()) and "resume" not in old
    assert new["parts"] == 2 and new["goal"] == GOAL and new["status"] == "finished"
    assert new["session_started"] == events(resumed.first)[0]["t"]
