"""pip_install checks the environment's declared requirements after every install (`pip check`).

Real sims throughout: pip installs the sim's wheels, whose METADATA declares what torch+cu130 needs
(tools/sim/wheels.py), and `pip check` reads them in the sim's own venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.fleet.recipe import RecipeError, recipe_from_transcript
from agent.model import ScriptedModel, turn
from agent.safety.authorizations import Authorization
from agent.safety.policy import classify_action
from tools.base import ArtifactStore, ToolContext, ToolError
from tools.hosts import HostPool
from tools.pip_install import UNMET, PipInstall, blamed_on_install
from tools.sim import Sim, build_sim

ROOT = Path(__file__).resolve().parents[2]
TORCH = "torch==2.10.0+cu130"
NEEDS = ["nvidia-nccl-cu13==2.28.9", "nvidia-cuda-runtime==13.0.96"]


@pytest.fixture
def world(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"), store={})
    yield sim, pool, ctx
    pool.close()


def install(ctx, sim, packages, **kw):
    tool = PipInstall()
    return tool.run(ctx, tool.parse_args({"host": "sim", "index_url": sim.index_urls["cu130"], "packages": packages,
                                          **kw}))


def pip_check(pool) -> tuple[int, str]:
    r = pool.get("sim").run("/opt/venv/bin/python -m pip check", timeout=120)
    return r.exit_code, r.stdout + r.stderr


def freeze(pool) -> str:
    return pool.get("sim").run("/opt/venv/bin/python -m pip freeze --all", timeout=120).stdout


def test_a_no_deps_install_that_leaves_requirements_missing_fails_and_says_what_to_install(world):
    sim, pool, ctx = world
    with pytest.raises(ToolError) as e:
        install(ctx, sim, [TORCH], no_deps=True)
    said = str(e.value)
    assert said.startswith(UNMET) and "\n" not in said
    assert "torch 2.10.0+cu130 requires nvidia-nccl-cu13, which is not installed." in said
    assert "torch 2.10.0+cu130 requires nvidia-cuda-runtime, which is not installed." in said
    # The exact pins torch declares, from the same index, and the other ways out.
    assert f"install {', '.join(sorted(NEEDS, key=str.lower))} from {sim.index_urls['cu130']} too" in said
    assert "without no_deps" in said and "allow_broken_requirements: true" in said
    # What the install did is said too: the host changed although the step failed.
    assert "torch 2.10.0+cu128 -> 2.10.0+cu130" in said and "torch==2.10.0+cu130" in freeze(pool)


def test_naming_what_torch_declares_leaves_an_environment_pip_check_accepts(world):
    sim, pool, ctx = world
    result = install(ctx, sim, [TORCH, "sgl-kernel==0.3.21+cu130", *NEEDS], no_deps=True)
    assert result.dependency_warnings == [] and result.unmet_requirements == []
    assert {c.package for c in result.changes} == {"torch", "sgl-kernel", "nvidia-nccl-cu13", "nvidia-cuda-runtime"}
    assert pip_check(pool)[0] == 0


def test_torch_moved_alone_says_the_kernels_built_for_the_old_cuda_will_not_load(world):
    """A played model moved torch to cu130 and left sgl-kernel on cu128: pip check was clean, the install said
    nothing, and sglang failed to import sgl_kernel (libcudart.so.12) in the benchmark after."""
    sim, pool, ctx = world
    result = install(ctx, sim, [TORCH, *NEEDS], no_deps=True)
    assert result.unmet_requirements == [] and pip_check(pool)[0] == 0
    said = [w for w in result.warnings if "another CUDA major" in w]
    assert len(said) == 1 and said[0].startswith("sgl-kernel==0.3.21+cu128 is built for another CUDA major than "
                                                 "torch==2.10.0+cu130") and "+cu130 build too" in said[0], said
    mixed = pool.get("sim").run("/opt/venv/bin/python -c 'import sgl_kernel'", timeout=120)
    assert not mixed.ok and "libcudart.so.12" in mixed.stderr  # what the warning foretold
    both = install(ctx, sim, [TORCH, "sgl-kernel==0.3.21+cu130", *NEEDS], no_deps=True)
    assert not [w for w in both.warnings if "another CUDA major" in w]
    r = pool.get("sim").run("/opt/venv/bin/python -c 'import sgl_kernel'", timeout=120)
    assert r.ok, r.stderr  # the warning's remedy works


def test_without_no_deps_pip_installs_the_requirements_from_the_same_index(world):
    sim, pool, ctx = world
    result = install(ctx, sim, [TORCH])
    assert result.unmet_requirements == [] and pip_check(pool)[0] == 0
    assert {"nvidia-nccl-cu13", "nvidia-cuda-runtime"} <= {c.package for c in result.changes}


def test_breakage_from_before_the_install_is_reported_but_not_blamed_on_it(world):
    sim, pool, ctx = world
    r = pool.get("sim").run("/opt/venv/bin/python -m pip uninstall -y triton", timeout=120)
    assert r.ok, r.stderr
    result = install(ctx, sim, ["sgl-kernel==0.3.21+cu130"], no_deps=True)
    assert result.dependency_warnings == ["torch 2.10.0+cu128 requires triton, which is not installed."]
    assert result.unmet_requirements == []


def test_a_goal_that_accepts_a_broken_environment_says_so_and_its_rule_must_name_it(world):
    sim, pool, ctx = world
    tool = PipInstall()
    args = tool.parse_args({"host": "sim", "index_url": sim.index_urls["cu130"], "packages": [TORCH],
                            "no_deps": True, "allow_broken_requirements": True})
    action = tool.action(args)
    risk = classify_action(action)
    plain = Authorization(host="sim", tool="pip_install", args={"index_url": sim.index_urls["cu130"],
                                                                 "packages": [TORCH], "no_deps": True})
    assert any("allow_broken_requirements" in m for m in plain.check("pip_install", action, risk))
    named = plain.model_copy(update={"args": {**plain.args, "allow_broken_requirements": True}})
    assert named.check("pip_install", action, risk) == []
    result = tool.run(ctx, args)
    assert len(result.unmet_requirements) == 2 and all(u.startswith("torch 2.10.0+cu130 requires nvidia-")
                                                       for u in result.unmet_requirements)


def test_a_conflict_is_blamed_on_the_install_that_changed_either_side():
    # pip check's conflict line, word for word: sglang untouched, torch changed by this install.
    line = "sglang 0.5.9 has requirement torch==2.10.0, but you have torch 2.11.0."
    assert blamed_on_install([line], {"torch"}) == [line]
    assert blamed_on_install([line], {"sglang"}) == [line]
    assert blamed_on_install([line], {"vllm"}) == []
    assert blamed_on_install(["Sgl_Kernel 1.0 is not supported on this platform"], {"sgl-kernel"})


# --------------------------------------------------------------------------- recipes


def canary(tmp_path: Path, sim: Sim, rule: dict, *installs: dict) -> Path:
    """An `agent run` on `sim` under one pip_install rule: inspect, back up, then each install in a turn of
    its own; checked by torch's build. Its transcript."""
    from agent.goal import Goal
    from agent.session_builder import build_session, goal_budget
    from app.run import execute_goal

    goal = Goal.model_validate({
        "goal": "Move torch on host sim to cu130.", "hosts": [{"name": "sim", "transport": "sim"}],
        "authorizations": [{"host": "sim", "tool": "pip_install", "args": rule}], "budget": {"turns": 8},
        "success": [{"command": {"host": "sim", "run": "/opt/venv/bin/python -m pip show torch",
                                 "expect_output": "+cu130"}}]})
    script = [turn(calls=[("inspect_host", {"host": "sim"}), ("pip_freeze_backup", {"host": "sim"})]),
              *(turn(calls=[("pip_install", {"host": "sim", **args})]) for args in installs), turn("done")]
    path = tmp_path / "canary.jsonl"
    built = build_session(hosts=goal.hosts, model=ScriptedModel(script), mode="scripted",
                          authorizations=goal.authorizations, budget=goal_budget(goal), transcript=path,
                          start_info={"goal": goal.goal, "command": "run"}, sims={"sim": sim})
    execute_goal(goal, built.session)
    return path


@pytest.mark.parametrize("how", ["allowed broken", "failed then fixed"])
def test_a_recipe_never_copies_an_install_whose_requirements_were_not_met(tmp_path, how):
    sim = build_sim(tmp_path / "gpu")
    index = sim.index_urls["cu130"]
    if how == "allowed broken":
        args = {"index_url": index, "packages": [TORCH], "no_deps": True, "allow_broken_requirements": True}
        path = canary(tmp_path, sim, args, args)
        said = "left requirements unmet on the canary (torch 2.10.0+cu130 requires nvidia-"
    else:
        rule = {"index_url": index, "packages": [TORCH, *NEEDS], "no_deps": True}
        path = canary(tmp_path, sim, rule, {**rule, "packages": [TORCH]}, {**rule, "packages": NEEDS})
        said = "pip_install changed the canary and then failed"
    verdict = [json.loads(line) for line in path.read_text().splitlines()][-2:]
    assert any(e.get("verdict") == "met" for e in verdict), verdict
    with pytest.raises(RecipeError) as e:
        recipe_from_transcript(path)
    assert said in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_recipe_refuses_a_record_from_before_the_check_whose_no_deps_install_pip_warned_about():
    from agent.fleet.recipe import _install_left_requirements_unmet

    # As the record of such a run holds it: the step ok, pip check's warnings only in dependency_warnings.
    call = {"tool": "pip_install", "arguments": {"host": "sim", "packages": [TORCH], "no_deps": True}}
    result = {"ok": True, "status": "ok", "data": {"dependency_warnings": [
        "torch 2.10.0+cu130 requires nvidia-nccl-cu13, which is not installed."]}}
    said = _install_left_requirements_unmet({(4, 0): call}, {(4, 0): result}, [(4, 0)])
    assert said and "'s pip_install with no_deps left requirements unmet on the canary (torch " in said
    result["data"]["dependency_warnings"] = []
    assert _install_left_requirements_unmet({(4, 0): call}, {(4, 0): result}, [(4, 0)]) is None


# --------------------------------------------------------------------------- the demo


def test_agent_demo_ends_with_an_environment_pip_check_accepts(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
                "TMPDIR": str(tmp_path)})
    work = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "app.cli", "demo", "--dir", str(work)], capture_output=True,
                       text=True, env=env, timeout=400, cwd=ROOT)
    events = [json.loads(line) for line in (work / "demo.jsonl").read_text().splitlines()]
    pip = [e for e in events if e["type"] == "tool_result" and e["tool"] == "pip_install"]
    assert pip and all(e["ok"] for e in pip), [e.get("error") for e in pip]
    sim = Sim.open(work / "sim")
    pool = HostPool([sim.host_spec()])
    try:
        code, out = pip_check(pool)
    finally:
        pool.close()
    assert code == 0, out
    assert r.returncode == 0, r.stderr[-2000:]
