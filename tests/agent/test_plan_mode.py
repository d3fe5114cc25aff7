"""`--plan` is a check mode: each change is answered with what a real run of the same session would do."""

from __future__ import annotations

from agent.safety.authorizations import Authorization
from agent.safety.policy import SafetyPolicy, Verdict
from tools.pip_freeze_backup import PipFreezeBackup
from tools.pip_install import PipInstall
from tools.restore_backup import RestoreBackup
from tools.ssh_exec import SSHExec

CU130 = "file:///srv/pypi/simple-cu130"


def decide(gate, tool, **args):
    parsed = tool.parse_args({"host": "sim", **args})
    return gate.decide(tool.name, tool.action(parsed))


def scripted_plan() -> SafetyPolicy:
    return SafetyPolicy(scope={"sim"}, mode="scripted", plan=True, authorizations=[
        Authorization(host="sim", tool="pip_install", args={"packages": ["torch==2.10.0+cu130"], "index_url": CU130})])


def test_a_dry_run_says_per_step_whether_the_goal_file_would_allow_it():
    gate = scripted_plan()
    early = decide(gate, PipInstall(), packages=["torch==2.10.0+cu130"], index_url=CU130)
    assert early.verdict is Verdict.SKIP and early.reason.startswith("would be refused: authorizations[0] (")
    assert "covers it, but no backup of sim is taken or planned before it: run pip_freeze_backup first" in early.reason

    backup = decide(gate, PipFreezeBackup())
    assert backup.verdict is Verdict.SKIP and backup.reason.startswith("would run: a backup writes only")

    covered = decide(gate, PipInstall(), packages=["torch==2.10.0+cu130"], index_url=CU130)
    assert covered.reason.startswith("would run: authorized by authorizations[0]") and "no backup" not in covered.reason

    other = decide(gate, PipInstall(), packages=["torch==2.9.0+cu130"], index_url=CU130)
    assert other.reason.startswith("would be refused:") and "the closest, authorizations[0]" in other.reason
    assert "torch==2.9.0+cu130" in other.reason

    restore = decide(gate, RestoreBackup(), backup_id="sim-1")
    assert restore.reason.startswith("would be refused:")
    reading = decide(gate, SSHExec(), command="nvidia-smi -L")
    assert reading.verdict is Verdict.ALLOW, "reading runs in a dry run too"
    assert [w for w, _ in gate.planned] == ["would be refused", "would run", "would run", "would be refused",
                                            "would be refused"]


def test_an_interactive_dry_run_says_it_would_ask():
    gate = SafetyPolicy(scope={"sim"}, mode="interactive", plan=True)
    before = decide(gate, RestoreBackup(), backup_id="sim-1")
    assert before.reason.startswith("would be refused:") and "run pip_freeze_backup first" in before.reason
    decide(gate, PipFreezeBackup())
    d = decide(gate, RestoreBackup(), backup_id="sim-1")
    assert d.verdict is Verdict.SKIP and d.reason.startswith("would ask the operator for approval, asked one by one")
    assert gate.planned[-1][0] == "would ask"


def test_agent_run_plan_ends_with_what_a_real_run_would_do_and_exit_3_when_a_step_would_be_refused(tmp_path):
    """A real `agent run --plan` on the local host, the model through the real openai SDK on loopback."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fake_openai import FakeOpenAI, Reply

    root = Path(__file__).resolve().parents[2]
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: try a wheel\nhosts: [local]\nbudget: {turns: 4}\nauthorizations:\n"
                    f"  - {{host: local, tool: pip_install, args: {{packages: [\"six==1.17.0\"], index_url: \"{CU130}\"}}}}\n")
    replies = [Reply(calls=[("pip_freeze_backup", {"host": "local"}),
                            ("pip_install", {"host": "local", "packages": ["six==1.17.0"], "index_url": CU130})]),
               Reply(calls=[("pip_install", {"host": "local", "packages": ["six==1.16.0"], "index_url": CU130})]),
               Reply(text="That is the plan.")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    with FakeOpenAI(replies) as srv:
        env.update(PYTHONPATH=str(root), HOME=str(tmp_path), OPENAI_API_KEY="x", OPENAI_BASE_URL=srv.base_url)
        r = subprocess.run([sys.executable, "-m", "app.cli", "run", str(goal), "--plan", "--transcript",
                            str(tmp_path / "t.jsonl")], capture_output=True, text=True, env=env, cwd=root, timeout=120)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "of 3 changes, 2 would run, 1 would be refused" in r.stdout
    # Each step's line says what a real run would do, first, where a cut cannot lose it.
    assert "six==1.16.0 [mutating; dry run: would be refused]" in r.stdout, r.stdout
    assert "= pip_install skipped in 0.00s: would run: authorized by authorizations[0]" in r.stdout, r.stdout
    assert "= pip_install skipped in 0.00s: would be refused: " in r.stdout
    assert "refused at `pip_install python=(default) index=file:///srv/pypi/simple-cu130 six==1.16.0`" in r.stdout
    events = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    reasons = [e["reason"] for e in events if e["type"] == "decision" and e["rule"] == "plan"]
    assert reasons[0].startswith("would run: a backup") and reasons[1].startswith("would run: authorized by")
    assert reasons[2].startswith("would be refused:")
    end = next(e for e in events if e["type"] == "goal_result")
    assert end["verdict"] == "dry run" and end["exit_code"] == 3
    # The model is told it is a dry run and that only calls are checked: a played model, not told, wrote a plan.
    first = srv.requests[0]["messages"][1]["content"]
    assert "This is a dry run (--plan)" in first and "A written plan without the calls checks nothing" in first


def test_a_refusal_for_want_of_a_rule_names_the_rule_that_would_cover_the_call_and_that_rule_does():
    import json

    from agent.safety.ledger import BackupLedger
    from tools.install_runfile import InstallRunfile

    tool = InstallRunfile()
    call = {"host": "sim", "runfile": "file:///srv/cuda_13.0.1_580.82.07_linux.run",
            "checksum": "b17527a3800a58441fccd5606c97a594", "version": "13.0", "move_symlink": True}
    action = tool.action(tool.parse_args(call))
    refused = SafetyPolicy(scope={"sim"}, mode="scripted").decide(tool.name, action)
    said = refused.reason.split("the operator could add this rule to the goal file's authorizations: ", 1)[1]
    rule = json.JSONDecoder().raw_decode(said)[0]
    assert rule == {"host": "sim", "tool": "install_runfile", "destructive": True,
                    "args": {"version": "13.0", "runfile": call["runfile"], "move_symlink": True}}
    ledger = BackupLedger()
    gate = SafetyPolicy(scope={"sim"}, mode="scripted", ledger=ledger, authorizations=[Authorization(**rule)])
    from agent.safety.ledger import BackupRecord

    ledger.register(BackupRecord(backup_id="sim-1", host="sim", kind="pip-freeze", target="/opt/venv/bin/python",
                            created_at=0.0, remote_dir="/var/tmp/b", local_dir=None, files={}, verified=True,
                            package_count=1))
    assert gate.decide(tool.name, action).verdict is Verdict.ALLOW


def test_a_dry_run_runs_no_benchmark_and_counts_its_baseline_as_planned():
    from tools.run_bench import RunBench

    gate = SafetyPolicy(scope={"sim"}, mode="scripted", plan=True, baselines=["before"], authorizations=[
        Authorization(host="sim", tool="pip_install", args={"packages": ["torch==2.10.0+cu130"], "index_url": CU130})])
    decide(gate, PipFreezeBackup())
    early = decide(gate, PipInstall(), packages=["torch==2.10.0+cu130"], index_url=CU130)
    assert early.reason.startswith("would be refused:") and "measure it first" in early.reason, early.reason
    bench = decide(gate, RunBench(), command="python -m sglang.bench_serving --backend sglang --num-prompts 10",
                   parser="sglang_bench_serving", label="before")
    assert bench.verdict is Verdict.SKIP and bench.reason == "would run: a benchmark (a dry run runs none)"
    after = decide(gate, PipInstall(), packages=["torch==2.10.0+cu130"], index_url=CU130)
    assert after.reason.startswith("would run: authorized by authorizations[0]"), after.reason
    # outside a dry run the same benchmark runs
    live = SafetyPolicy(scope={"sim"}, mode="scripted")
    assert decide(live, RunBench(), command="python -m sglang.bench_serving --backend sglang --num-prompts 10",
                  parser="sglang_bench_serving", label="before").verdict is Verdict.ALLOW


MODEL_LESS_GOAL = """\
goal: Install CUDA 13.0 beside 12.8, and torch cu130 on gpu-a.
hosts:
  - {name: gpu-a, transport: sim}
  - {name: gpu-b, transport: sim}
authorizations:
  - host: "*"
    tool: install_runfile
    args: {version: "13.0", toolkit_only: true, move_symlink: false, override: false,
           runfile: "file:///srv/nvidia/compute/cuda/13.0.1/local_installers/cuda_13.0.1_580.82.07_linux.run"}
  - host: gpu-a
    tool: pip_install
    args: {index_url: "file:///srv/pypi/simple-cu130", packages: ["torch==2.10.0+cu130"], no_deps: true}
  - host: gpu-b
    tool: pip_install
    args: {index_url: "file:///srv/pypi/simple-cu130", packages: ["sgl-kernel==*+cu130"]}
  - {host: gpu-a, command: "systemctl restart sglang"}
  - {host: gpu-b, command: "systemctl stop sglang"}
success:
  - throughput: {label: after, compare_to: before, min_ratio: 1.0}
  - outputs: {label: after, compare_to: before}
"""


def test_a_plan_with_no_model_configured_makes_the_calls_the_authorizations_spell_out(tmp_path):
    """`agent run --plan` with no model anywhere (no flag, no model:, no OPENAI_BASE_URL): no server is asked
    (the run is in a network namespace of its own, and none is set), the hosts are inspected, each rule that
    names one call is made on its hosts after a backup, and what only a model can choose is listed."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import pytest

    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to keep the run off every network")
    root = Path(__file__).resolve().parents[2]
    goal = tmp_path / "goal.yaml"
    goal.write_text(MODEL_LESS_GOAL)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "UPGRADE_AGENT_"))}
    env.update(PYTHONPATH=str(root), HOME=str(tmp_path))
    r = subprocess.run(["unshare", "-rn", sys.executable, "-m", "app.cli", "run", str(goal), "--plan",
                        "--transcript", str(tmp_path / "t.jsonl")], capture_output=True, text=True, env=env,
                       cwd=root, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    events = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    calls = [(e["tool"], e["arguments"].get("host")) for e in events if e["type"] == "tool_call"]
    assert calls[:2] == [("inspect_host", "gpu-a"), ("inspect_host", "gpu-b")], calls
    assert calls[2:4] == [("pip_freeze_backup", "gpu-a"), ("pip_freeze_backup", "gpu-b")], calls
    assert sorted(calls[4:]) == [("pip_install", "gpu-a"), ("ssh_exec", "gpu-a"), ("ssh_exec", "gpu-b")], calls
    reasons = {e["subject"]: e["reason"] for e in events if e["type"] == "decision" and e["rule"] == "plan"}
    assert any(s.startswith("pip_install") and v.startswith("would run: authorized by authorizations[1]")
               for s, v in reasons.items()), reasons
    assert reasons["systemctl restart sglang"].startswith("would run: authorized by authorizations[3]"), reasons
    assert reasons["systemctl stop sglang"].startswith("would run: authorized by authorizations[4]"), reasons
    inspected = [e for e in events if e["type"] == "tool_result" and e["tool"] == "inspect_host"]
    assert len(inspected) == 2 and all(e["ok"] for e in inspected)
    assert not any(e["type"] == "tool_result" and e["tool"] == "run_bench" for e in events)
    end = next(e for e in events if e["type"] == "goal_result")
    assert end["verdict"] == "dry run" and end["exit_code"] == 0, end
    assert "of 5 changes, 5 would run" in end["reason"], end
    # what a model would have to choose, named
    assert "authorizations[0] (install_runfile on any host): it leaves checksum to the caller" in out, out
    assert "authorizations[2] (pip_install on gpu-b): its arguments hold a pattern" in out, out
    assert "the throughput check's benchmark: a model chooses its command" in out, out
    assert "the outputs check's samples: a model names the serving endpoint" in out, out
    # the verdict's line says what a dry run's exit code means, once
    assert "DRY RUN: of 5 changes, 5 would run" in out and "(exit code 0: a real run would be allowed every change)" in out, out
    assert "tokens:" not in out and "cost:" not in out, out
