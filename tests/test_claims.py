"""The model's final answer checked against the record: real sessions (the real Session, tools, gate and
simulated GPU host, with a scripted model), the recorded transcripts, and a real `agent demo` run."""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from agent.budget import Budget
from agent.goal import load_goal
from agent.loop import Session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter, iter_events
from agent.report import build_report, check_claims, check_report, render_html, render_markdown
from agent.safety.policy import ApprovalAnswer, Authorization, SafetyPolicy
from agent.session_builder import build_session, goal_budget
from app.demo import RECORDING, RecordedTurns, answer_from_record
from app.run import execute_goal
from tools import default_tools
from tools.base import Registry
from tools.hosts import HostPool
from tools.sim import build_sim

from helpers import events

ROOT = Path(__file__).resolve().parents[1]
TRANSCRIPTS = sorted((ROOT / "transcripts").glob("*.jsonl"))
RECORDED = ROOT / "transcripts" / RECORDING
BENCH = "/opt/venv/bin/python -m sglang.bench_serving --backend sglang --num-prompts 10"


def recorded_answer() -> str:
    """The final answer of the recorded upgrade: true of the run it was recorded in, and of no other."""
    return build_report(RECORDED).final_answer


def recorded_figures() -> tuple[str, str, str]:
    """(before, after, change %) as the recorded answer states them."""
    m = re.search(r"before ([\d.]+), after ([\d.]+); after is ([\d.]+)% faster", recorded_answer())
    assert m, "the recorded answer states its throughput figures"
    return m.group(1), m.group(2), m.group(3)


def medians(path: Path) -> dict[str, float]:
    return {e["data"]["label"]: statistics.median(e["data"]["values"]) for e in events(path, "tool_result")
            if e["tool"] == "run_bench" and e["ok"]}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """One simulated host for the sessions that only read it."""
    return build_sim(tmp_path_factory.mktemp("claims") / "gpu")


def session(path: Path, sim, turns: list, gate: SafetyPolicy | None = None, operator=None) -> Path:
    """A real session on the simulated host, driven by scripted turns, closed as `agent chat` closes one."""
    gate = gate or SafetyPolicy(scope={"sim"})
    s = Session(model=ScriptedModel(turns), registry=Registry(default_tools()), gate=gate,
                transcript=TranscriptWriter(path), hosts=HostPool([sim.host_spec()]), budget=Budget(turns=12),
                start_info={"command": "chat"})
    if operator is not None:
        operator.session = s
    outcome = s.send("Benchmark the host, upgrade it, and report.")
    s.close(outcome.status, outcome.reason)
    return path


def bench(label: str, **extra) -> tuple[str, dict]:
    return ("run_bench", {"host": "sim", "command": BENCH, "parser": "sglang_bench_serving", "runs": 3, "warmup": 0,
                          "label": label, **extra})


class Operator:
    """Answers the gate as the operator at a terminal does, by a word of the step, recording each answer."""

    def __init__(self, answers: dict[str, ApprovalAnswer]):
        self.answers = answers
        self.session: Session | None = None

    def ask(self, request):
        answer = next(a for word, a in self.answers.items() if word in request.subject)
        self.session.emit("approval", host=request.host, tool=request.tool, subject=request.subject,
                          answer=answer.value, by="operator")
        return answer


def texts(findings) -> list[str]:
    return [f.text for f in findings]


# --------------------------------------------------------------------------- the recorded sessions


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_no_recorded_answer_is_said_to_differ_from_its_own_record(path):
    """Precision: every recorded answer is true of its own session, so no finding may call it wrong."""
    check = check_claims(path)
    assert check.differences == [], texts(check.differences)


def test_the_recorded_upgrade_has_its_figures_versions_and_install_confirmed():
    check = check_claims(RECORDED)
    before, after, change = recorded_figures()
    measured = medians(RECORDED)
    confirmed = texts(check.confirmed)
    assert f"the model says {before} tok/s before; measured {measured['before']:.6g}" in " | ".join(confirmed)
    assert f"the model says {after} tok/s after; measured {measured['after']:.6g}" in " | ".join(confirmed)
    assert any(t.startswith(f"the model says {change}% faster; measured +") for t in confirmed), confirmed
    assert any(t.startswith("the model says toolkit 13.0.1 was installed; install_runfile installed 13.0.1 into "
                            "/usr/local/cuda-13.0") for t in confirmed), confirmed
    assert "the model says torch moved to 2.10.0+cu130; the record shows torch 2.10.0+cu130 (pip_install, turn 4, " \
           "call 1)" in confirmed
    assert check.headline == f"Checked against the record: {len(check.findings)} claims confirmed, none differ"


def test_a_version_said_under_a_condition_is_not_a_claim_of_the_end_state():
    """A played model that stopped before the install wrote "If torch moved to cu130 while the toolkit stayed at
    12.8, the stack would fail": the check called that a claim that torch was cu130 at the end, which differed."""
    report = build_report(RECORDED)
    said = ("If torch moved to cu128 while the toolkit stayed, it would fail. Once torch is on 2.10.0+cu128 again, "
            "run it. torch is now 2.10.0+cu130.")
    check = check_report(dataclasses.replace(report, final_answer=said))
    assert check.differences == [] and [f.says for f in check.confirmed] == \
        ["the model says torch is 2.10.0+cu130 after"], texts(check.findings)
    # the same for every kind of claim: a toolkit, the link, a restore, the upgrade done, each said as a condition
    conditions = ("If the cuda symlink was moved, jobs break. If CUDA 13.0 was not installed, nothing runs. Once the "
                  "upgrade is done, rerun. Unless the backup was restored, torch stays.")
    assert check_report(dataclasses.replace(report, final_answer=conditions)).findings == []
    stated = "The cuda symlink was moved. CUDA 13.0 was not installed. The backup was restored."
    assert len(check_report(dataclasses.replace(report, final_answer=stated)).differences) == 3


def test_a_toolkit_said_not_installed_is_confirmed_by_the_failed_install():
    check = check_claims(ROOT / "transcripts" / "install-no-space.jsonl")
    [finding] = [f for f in check.findings if f.kind == "toolkit"]
    assert finding.agrees and finding.says == "the model says toolkit 13.0 was not installed"
    assert "no install_runfile call installed it (turn 2, call 1: error (the installer failed" in finding.record


# --------------------------------------------------------------------------- real sessions


def test_figures_of_another_run_differ_from_this_runs_measurements(sim, tmp_path):
    """The recording's answer, given in a session that measured its own figures: each figure differs, and
    the finding names the measured one."""
    path = session(tmp_path / "t.jsonl", sim, [turn(calls=[bench("before")]),
                                               turn(calls=[bench("after", compare_to="before")]),
                                               turn(recorded_answer())])
    before, after, change = recorded_figures()
    measured = medians(path)
    check = check_claims(path)
    diffs = texts(check.differences)
    assert (f"the model says {before} tok/s before; measured {measured['before']:.6g} (median of 3 runs, "
            f"turn 1, call 1)") in diffs
    assert (f"the model says {after} tok/s after; measured {measured['after']:.6g} (median of 3 runs, "
            f"turn 2, call 1)") in diffs
    change_now = (measured["after"] / measured["before"] - 1) * 100
    assert any(t.startswith(f"the model says {change}% faster; measured {change_now:+.2f}% (after ") for t in diffs)
    # Nothing was installed in this session, whatever the answer says.
    assert any(t.startswith("the model says toolkit 13.0.1 was installed; no install_runfile call succeeded")
               for t in diffs), diffs
    assert check.headline.startswith(f"Checked against the record: {len(diffs)} claims differ")


def test_a_claim_of_50_percent_faster_is_checked_against_the_measured_change(sim, tmp_path):
    path = session(tmp_path / "t.jsonl", sim, [
        turn(calls=[bench("before")]), turn(calls=[bench("after", compare_to="before")]),
        turn("The upgrade paid off: after is 50% faster than before. NVIDIA says CUDA 13 is 20% faster at some "
             "kernels; the run took 3 s.")])
    measured = medians(path)
    change = (measured["after"] / measured["before"] - 1) * 100
    check = check_claims(path)
    [finding] = check.findings  # the vendor's figure and the run time are not this session's to judge
    assert not finding.agrees
    assert finding.text == (f"the model says 50% faster; measured {change:+.2f}% (after {measured['after']:.6g} vs "
                            f"before {measured['before']:.6g} tok/s, turn 2, call 1)")
    assert check.lines() == ["Checked against the record: 1 claim differs", f"  differs: {finding.text}"]


def test_an_install_the_operator_declined_is_not_confirmed(sim, tmp_path):
    """The recorded answer after the operator said no to the toolkit: the install and the speed-up it claims
    are both set against what happened."""
    runfile = {"host": "sim", "runfile": sim.runfiles["13.0"].url, "checksum": sim.runfiles["13.0"].md5,
               "version": "13.0"}
    operator = Operator({"install_runfile": ApprovalAnswer.NO})
    gate = SafetyPolicy(scope={"sim"}, mode="interactive", approver=operator)
    path = session(tmp_path / "t.jsonl", sim, [
        turn(calls=[("pip_freeze_backup", {"host": "sim"}), bench("before")]),
        turn(calls=[("install_runfile", runfile)]),
        turn(calls=[bench("after", compare_to="before", env={"CUDA_HOME": "/usr/local/cuda-13.0"})]),
        turn(recorded_answer())], gate=gate, operator=operator)
    assert [e["answer"] for e in events(path, "approval")] == ["no"]
    diffs = texts(check_claims(path).differences)
    assert ("the model says toolkit 13.0.1 was installed; no install_runfile call succeeded (turn 2, call 1: refused "
            "(the operator declined it))") in diffs
    assert any(t.startswith("the model says CUDA 12.8 -> 13.0; no install_runfile call succeeded") for t in diffs)
    _, _, change = recorded_figures()
    if "after" in medians(path):
        assert any(t.startswith(f"the model says {change}% faster; measured ") for t in diffs), diffs
    else:
        assert any(t.startswith(f"the model says {change}% faster; no before/after comparison finished") for t in diffs)


def test_versions_and_a_restore_are_checked_against_the_results(sim, tmp_path):
    """pip_install's changes, restore_backup's result and the backup ids: true and false claims of each."""
    own = build_sim(tmp_path / "gpu")  # this session changes its host
    cu130 = own.index_urls["cu130"]
    # torch with the wheels it declares: a no_deps install of torch alone fails on pip check.
    torch_cu130 = ["torch==2.10.0+cu130", "nvidia-nccl-cu13==2.28.9", "nvidia-cuda-runtime==13.0.96"]
    gate = SafetyPolicy(scope={"sim"}, authorizations=[
        Authorization(host="sim", tool="pip_install", args={"index_url": cu130, "packages": torch_cu130,
                                                            "no_deps": True}),
        Authorization(host="sim", tool="restore_backup", args={"backup_id": "*"}, destructive=True)])
    path = tmp_path / "t.jsonl"

    def script():
        yield turn(calls=[("pip_freeze_backup", {"host": "sim"})])
        yield turn(calls=[("pip_install", {"host": "sim", "index_url": cu130, "no_deps": True,
                                           "packages": torch_cu130})])
        # The backup id is known once the backup ran: the scripted model reads it from the transcript.
        backup_id = events(path, "backup")[0]["backup_id"]
        yield turn(calls=[("restore_backup", {"host": "sim", "backup_id": backup_id})])
        yield turn(f"torch 2.10.0+cu128 -> 2.10.0+cu130, then the backup {backup_id} was restored: torch is now "
                   f"2.10.0+cu128. sgl-kernel is now 0.3.21+cu130. Backup sim-20990101-000000-abcd is the other one.")

    turns = script()
    s = Session(model=ScriptedModel(lambda messages: next(turns)), registry=Registry(default_tools()), gate=gate,
                transcript=TranscriptWriter(path),
                hosts=HostPool([own.host_spec()]), budget=Budget(turns=8), start_info={"command": "chat"})
    outcome = s.send("Move torch to cu130, then put it back.")
    s.close(outcome.status, outcome.reason)
    restore = [e for e in events(path, "tool_result") if e["tool"] == "restore_backup"]
    assert restore and restore[0]["data"]["restored"] is True, restore
    check = check_claims(path)
    confirmed, diffs = texts(check.confirmed), texts(check.differences)
    assert any(t.startswith("the model says torch was 2.10.0+cu128 before; the record shows") for t in confirmed)
    assert any(t.startswith("the model says the backup was restored; restore_backup restored ") for t in confirmed)
    assert any(t.startswith("the model says torch is 2.10.0+cu128 after; the record shows torch 2.10.0+cu128 at the "
                            "end (restore_backup, turn 3, call 1)") for t in confirmed), confirmed
    assert any(t.startswith("the model says sgl-kernel is 0.3.21+cu130 after; the record shows sgl-kernel "
                            "0.3.21+cu128 at the end") for t in diffs), diffs
    assert "the model says backup sim-20990101-000000-abcd; no backup with this id was taken in this session" in \
        " | ".join(diffs)
    assert len(diffs) == 2, diffs


# --------------------------------------------------------------------------- the report


def test_the_report_shows_the_findings_beside_the_final_answer(sim, tmp_path):
    path = session(tmp_path / "t.jsonl", sim, [turn(calls=[("inspect_host", {"host": "sim"}), bench("before")]),
                                               turn(calls=[bench("after", compare_to="before")]),
                                               turn(recorded_answer())])
    check = check_claims(path)
    headline = check.headline
    assert re.fullmatch(r"Checked against the record: \d+ claims differ, \d+ confirmed", headline)
    md = render_markdown(build_report(path))
    assert f"| **Final answer** | **{headline}** |" in md  # in the summary at the top
    answer = md.split("\n## The model's final answer\n", 1)[1].split("\n## Steps\n", 1)[0]
    head, block = answer.split("\nTurn 3:\n", 1)
    assert head.strip().startswith(f"**{headline}**")
    assert len(re.findall(r"^- \*\*differs\*\*: ", head, re.M)) == len(check.differences)
    assert len(re.findall(r"^- \*\*confirmed\*\*: ", head, re.M)) == len(check.confirmed)
    assert block.lstrip().startswith("```text\n## Upgrade done")
    page = render_html(build_report(path), tmp_path / "t.html")
    assert f'<span class="bad">{headline}</span>' in page
    assert page.count('<span class="bad">differs</span>') == len(check.differences)


# --------------------------------------------------------------------------- the demo


def test_the_demos_answer_says_an_install_the_operator_declined_was_not_made(tmp_path, monkeypatch):
    """`agent demo --ask` with the toolkit declined: the played-again turns stop there (the recording's next ones
    speak of a toolkit in place), and the closing answer is written from this run's record, and nothing in it
    differs from that record."""
    monkeypatch.delenv("EXA_API_KEY", raising=False)
    goal = load_goal(ROOT / "goals" / "demo.yaml")
    sim = build_sim(tmp_path / "sim")
    path = tmp_path / "demo.jsonl"
    operator = Operator({"install_runfile": ApprovalAnswer.NO, "pip_install": ApprovalAnswer.NO})
    model = RecordedTurns(RECORDED, final_answer=lambda: answer_from_record(build_report(path)))
    built = build_session(hosts=goal.hosts, model=model, mode="interactive", approver=operator,
                          authorizations=goal.authorizations, budget=goal_budget(goal), transcript=path,
                          sims={"sim": sim}, start_info={"goal": goal.goal, "command": "demo"})
    operator.session = built.session
    execute_goal(goal, built.session)
    report = build_report(path)
    assert report.final_answer_done
    answer = report.final_answer
    assert "CUDA 13.0 was NOT installed: install_runfile was declined by you" in answer, answer
    # Past the declined install the recording's turns would speak of what it did: they stop there.
    assert "pip_install" not in [e.get("tool") for e in iter_events(path) if e["type"] == "tool_call"]
    assert "PyTorch" in answer and "cu130" not in answer.split("PyTorch", 1)[1].split("\n")[0], answer
    assert "installed in" not in answer and "faster" not in answer
    check = check_claims(path)
    assert check.differences == [], texts(check.differences)
    assert any(f.kind == "toolkit" and f.agrees for f in check.findings)
    # The recording's own closing words, against this run's record, would have claimed the install.
    recorded = check_report(dataclasses.replace(report, final_answer=recorded_answer()))
    assert any(t.startswith("the model says toolkit 13.0.1 was installed; no install_runfile call succeeded")
               for t in texts(recorded.differences))


def test_the_demos_final_answer_states_the_figures_of_its_own_table(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run([sys.executable, "-m", "app.cli", "demo", "--dir", str(tmp_path)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    table = re.search(r"median \(tok/s\)\s+([\d.]+)\s+([\d.]+)", r.stdout)
    assert table, r.stdout[-2000:]
    before, after = table.groups()
    transcript = tmp_path / "demo.jsonl"
    answer = [e["text"] for e in iter_events(transcript) if e["type"] == "model_response"][-1]
    assert f"before {before}, after {after};" in answer, answer
    ratio = re.search(r"ratio after/before: [\d.]+ +\((.*)\)", r.stdout).group(1)
    assert ratio in answer  # the tool's own verdict, as the table prints it
    check = check_claims(transcript)
    assert check.differences == [] and len(check.confirmed) >= 10, texts(check.differences)
    assert f"\n{check.headline}\n" in r.stderr
    assert check.lines() == [check.headline]
