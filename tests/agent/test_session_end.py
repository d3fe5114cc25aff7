"""Every session ends in one place (agent/finish.py): the final state is read from the hosts however the
session ends, and the verdict names the real cause. Real sessions: the loop, the gate, the tools and a
simulated GPU host, with a scripted model."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.finish import finish, judge
from agent.goal import load_goal
from agent.loop import Outcome
from agent.model import ScriptedModel, turn
from agent.record.transcript import verify
from agent.session_builder import build_session, goal_budget
from app.exit_codes import ExitCode
from app.run import execute_goal
from tools.sim import build_sim

from helpers import events

BENCH = "/opt/venv/bin/python -m sglang.bench_serving --backend sglang --num-prompts 10"


@pytest.fixture
def sim(tmp_path):
    return build_sim(tmp_path / "gpu")


def goal_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "goal.yaml"
    path.write_text("goal: Upgrade sim.\nhosts:\n  - {name: sim, transport: sim}\n" + body)
    return path


def run(tmp_path: Path, sim, goal_text: str, script) -> tuple[int, Path]:
    goal = load_goal(goal_file(tmp_path, goal_text))
    path = tmp_path / "run.jsonl"
    built = build_session(hosts=goal.hosts, model=ScriptedModel(script), mode="scripted",
                          authorizations=goal.authorizations, budget=goal_budget(goal), transcript=path,
                          sims={"sim": sim}, start_info={"goal": goal.goal, "command": "run"})
    code, _ = execute_goal(goal, built.session)
    return code, path


THROUGHPUT = "success:\n  - throughput: {label: after, compare_to: before, min_ratio: 1.0}\n"


def test_a_failed_check_is_named_and_a_refused_read_is_not_called_a_refused_step(tmp_path, sim):
    # The model skipped its "before" benchmark; on the way a read it tried was refused. The run fails
    # because of the missing baseline, and the verdict says so: exit 1, not 3 ("a needed step was refused").
    script = [turn(calls=[("ssh_exec", {"host": "sim", "command": "rm -rf /"}),
                          ("run_bench", {"host": "sim", "label": "after", "command": BENCH, "runs": 1, "warmup": 0,
                                         "parser": "sglang_bench_serving"})]),
              turn("Done.")]
    code, path = run(tmp_path, sim, THROUGHPUT, script)
    result = events(path, "goal_result")[-1]
    assert code == ExitCode.FAILED, result
    assert "throughput check 1" in result["reason"] and "label 'before'" in result["reason"], result["reason"]
    assert "label 'after'" not in result["reason"]  # the "after" was measured
    assert verify(path).ok


def test_a_change_that_stayed_refused_is_named_with_its_rule(tmp_path, sim):
    script = [turn(calls=[("pip_freeze_backup", {"host": "sim"})]),
              turn(calls=[("ssh_exec", {"host": "sim", "command": "python3 -m pip install requests"})]),
              turn("I could not install requests.")]
    code, path = run(tmp_path, sim, "success:\n  - command: {host: sim, run: 'python3 -m pip show requests'}\n",
                     script)
    result = events(path, "goal_result")[-1]
    assert code == ExitCode.REFUSED, result
    assert "python3 -m pip install requests" in result["reason"] and "[not-authorized]" in result["reason"]
    assert "command check 1" in result["reason"]


def test_a_change_refused_once_then_allowed_is_no_refusal_of_the_goal(tmp_path, sim):
    # Refused before the backup, allowed after it: the run did not stop at a refusal.
    change = "touch /opt/venv/marker"
    script = [turn(calls=[("ssh_exec", {"host": "sim", "command": change})]),
              turn(calls=[("pip_freeze_backup", {"host": "sim"})]),
              turn(calls=[("ssh_exec", {"host": "sim", "command": change})]),
              turn("Done.")]
    code, path = run(tmp_path, sim, f"authorizations:\n  - {{host: sim, command: '{change}'}}\n"
                     "success:\n  - command: {host: sim, run: 'ls /opt/venv/nothing-here'}\n", script)
    result = events(path, "goal_result")[-1]
    assert [d["rule"] for d in events(path, "decision") if d["subject"] == change] == ["no-backup", "authorized"]
    assert code == ExitCode.FAILED and "command check 1" in result["reason"], result


def test_an_interrupted_run_reads_the_state_of_the_host_it_changed(tmp_path, sim):
    change = "ln -sfn /opt /usr/local/cuda"

    def interrupted(messages):
        raise KeyboardInterrupt

    turns = iter([turn(calls=[("pip_freeze_backup", {"host": "sim"})]),
                  turn(calls=[("ssh_exec", {"host": "sim", "command": change})])])
    code, path = run(tmp_path, sim, f"authorizations:\n  - {{host: sim, command: '{change}'}}\n",
                     lambda messages: next(turns, None) or interrupted(messages))
    assert code == ExitCode.INTERRUPTED
    states = events(path, "final_state")
    assert [s["host"] for s in states] == ["sim"]
    assert states[0]["inspect"]["cuda_symlink"] == "/opt", states[0]["inspect"]
    assert verify(path).ok and verify(path).status == "interrupted"


def test_a_session_without_a_goal_reads_only_the_hosts_it_changed(tmp_path, sim):
    # A chat's end: no verdict, no checks; the changed host's state is read, an untouched host's is not.
    other = build_sim(tmp_path / "other")
    from agent.goal import HostEntry

    change = "ln -sfn /opt /usr/local/cuda"
    from agent.safety.policy import ApprovalAnswer

    class Yes:
        def ask(self, request):
            return ApprovalAnswer.YES_ONCE

    built = build_session(hosts=[HostEntry(name="sim", transport="sim"), HostEntry(name="other", transport="sim")],
                          model=ScriptedModel([turn(calls=[("pip_freeze_backup", {"host": "sim"})]),
                                               turn(calls=[("ssh_exec", {"host": "sim", "command": change}),
                                                           ("inspect_host", {"host": "other"})]),
                                               turn("Linked.")]),
                          mode="interactive", approver=Yes(), transcript=tmp_path / "chat.jsonl",
                          sims={"sim": sim, "other": other}, start_info={"command": "chat"})
    session = built.session
    with session.closing():
        outcome = session.send("point the cuda link at /opt")
        assert finish(session, outcome) is None
    states = events(tmp_path / "chat.jsonl", "final_state")
    assert [s["host"] for s in states] == ["sim"]
    assert states[0]["inspect"]["cuda_symlink"] == "/opt"
    assert not events(tmp_path / "chat.jsonl", "goal_result")
    assert session.ending == Outcome("done", "") or session.ending.status == "done"


def test_a_run_whose_calls_could_not_run_says_so_not_that_the_model_called_none():
    session = SimpleNamespace(gate=SimpleNamespace(plan=False), failed_calls=0, refused=[], tool_calls=0, calls_made=2,
                              transcript=SimpleNamespace(path=None))
    verdict = judge(Outcome("done", "final answer"), session, None)
    assert verdict.verdict == "not met" and verdict.reason.startswith("nothing ran: none of the model's 2 call(s)")
    session.calls_made = 0
    assert "the model answered without calling a tool" in judge(Outcome("done"), session, None).reason
