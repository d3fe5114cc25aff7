"""Baselines precede changes: a goal with a throughput check refuses the first change on a host until its
"before" exists there, and a "before" on a host already changed is refused. The real gate, fed results as
the loop feeds it."""

from __future__ import annotations

from agent.goal import Goal
from agent.safety.authorizations import Authorization
from agent.safety.policy import SafetyPolicy
from tools import default_tools
from tools.base import BackupRecord, Registry

REGISTRY = Registry(default_tools())
INDEX = "https://download.pytorch.org/whl/cu130"
INSTALL = {"index_url": INDEX, "packages": ["torch==2.10.0+cu130"]}
BENCH = {"command": "python -m sglang.bench_serving --backend sglang --num-prompts 10",
         "parser": "sglang_bench_serving"}


def prepared(gate: SafetyPolicy, tool: str, args: dict):
    t = REGISTRY.get(tool)
    return gate.decide(tool, t.action(t.parse_args({"host": "gpu1", **args})))


def gate_for_goal() -> SafetyPolicy:
    goal = Goal(goal="upgrade", hosts=[{"name": "gpu1", "transport": "sim"}],
                success=[{"throughput": {"label": "after", "compare_to": "before"}}])
    gate = SafetyPolicy(scope={"gpu1"}, mode="scripted", baselines=goal.baselines(),
                        default_python={"gpu1": "python3"},
                        authorizations=[Authorization(host="gpu1", tool="pip_install", args=INSTALL)])
    gate.ledger.register(BackupRecord(backup_id="bk-1", host="gpu1", kind="pip-freeze", target="python3",
                                      created_at=0.0, remote_dir="/b", files={"system.txt": "1"}, verified=True))
    return gate


def test_the_first_change_waits_for_the_before_benchmark_of_its_host():
    gate = gate_for_goal()
    d = prepared(gate, "pip_install", INSTALL)
    assert (d.verdict.value, d.rule) == ("deny", "no-baseline")
    assert "run_bench on gpu1 with label='before'" in d.reason
    bench = prepared(gate, "run_bench", {**BENCH, "label": "before"})
    assert bench.allowed
    gate.observe("run_bench", bench, True, "ok", {"host": "gpu1", "label": "before"})
    assert prepared(gate, "pip_install", INSTALL).allowed


def test_a_before_measured_after_a_change_is_refused_and_no_hint_invites_one():
    gate = gate_for_goal()
    bench = prepared(gate, "run_bench", {**BENCH, "label": "before"})
    gate.observe("run_bench", bench, True, "ok", {"host": "gpu1", "label": "before"})
    change = prepared(gate, "pip_install", INSTALL)
    gate.observe("pip_install", change, True, "ok", {})
    late = prepared(gate, "run_bench", {**BENCH, "label": "before"})
    assert (late.verdict.value, late.rule) == ("deny", "baseline-after-change")
    assert prepared(gate, "run_bench", {**BENCH, "label": "after", "compare_to": "before"}).allowed
    # A resumed session starts from the earlier part's facts.
    resumed = gate_for_goal()
    resumed.resume_measured(gate.measured.facts())
    assert prepared(resumed, "run_bench", {**BENCH, "label": "before"}).rule == "baseline-after-change"


def test_a_change_that_never_started_leaves_the_host_unchanged_for_its_baseline():
    gate = gate_for_goal()
    bench = prepared(gate, "run_bench", {**BENCH, "label": "before"})
    gate.observe("run_bench", bench, True, "ok", {"host": "gpu1", "label": "before"})
    gate.observe("pip_install", prepared(gate, "pip_install", INSTALL), False, "skipped", {"not_started": True})
    assert prepared(gate, "run_bench", {**BENCH, "label": "before"}).allowed


def test_run_bench_never_hints_at_a_before_measured_now():
    import inspect

    import tools.run_bench as run_bench
    assert "measure it first with label=" not in inspect.getsource(run_bench)
