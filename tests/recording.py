"""Record the sessions in transcripts/ by running the product against fresh simulated hosts.

    python tests/recording.py [--out transcripts]

The model is scripted: an expert's decisions, written as generators that read the real tool
results in the conversation (the checksum NVIDIA publishes, the backup id, the benchmark
figures) and decide the next batch. Everything else is the product itself: the loop, the
gate with a goal file's authorizations, the tools, the simulated host, the transcript.
Re-record whenever the simulated host or the tools change what they print.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Callable, Generator

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from agent.goal import Goal  # noqa: E402
from agent.model import AssistantTurn, turn  # noqa: E402
from agent.session_builder import build_session, goal_budget  # noqa: E402
from app.run import execute_goal  # noqa: E402
from tools.sim import Sim  # noqa: E402

EXPERT_NOTE = ("recorded with a scripted model that makes the decisions an expert would (tests/recording.py); "
               "the tools, the safety gate and the simulated GPU host ran for real")

Policy = Callable[[Sim], Generator[AssistantTurn, list, None]]
# What torch 2.10.0+cu130 declares (Requires-Dist) beyond triton, which the host already has: a no_deps install
# names them too, or pip_install fails the step on pip check.
TORCH_CU130_NEEDS = ("nvidia-nccl-cu13==2.28.9", "nvidia-cuda-runtime==13.0.96")


class GeneratorModel:
    """A model whose turns come from a generator that is sent the conversation before each turn."""

    def __init__(self, policy: Generator[AssistantTurn, list, None], name: str = "scripted-expert"):
        self.name = name
        self._policy = policy
        self._started = False

    def complete(self, messages, tools, on_text=None) -> AssistantTurn:
        t = self._policy.send(messages) if self._started else next(self._policy)
        self._started = True
        if on_text and t.text:
            on_text(t.text)
        return t


def last_tool_outputs(messages: list[dict]) -> list[str]:
    """The tool results of the latest batch, in call order."""
    out = []
    for m in reversed(messages):
        if m["role"] != "tool":
            break
        out.append(m["content"])
    return out[::-1]


def mirror(sim: Sim, version: str) -> tuple[str, str]:
    """(runfile URL, path of the published md5sum.txt) in the sim's mirror of NVIDIA's archive."""
    info = sim.runfiles[version]
    return info.url, info.md5sum_url.removeprefix("file://")


# --------------------------------------------------------------------------- the goal


def demo_goal() -> Goal:
    """The seed's upgrade as goals/demo.yaml says it: the demo replays the session recorded under it."""
    from agent.goal import load_goal

    return load_goal(ROOT / "goals" / "demo.yaml")


def goal_with(text: str, sim: Sim, extra: list[dict] | None = None, success: list[dict] | None = None) -> Goal:
    """A goal on host `sim` with the demo's authorizations plus `extra` ones."""
    demo = demo_goal()
    auths = [a.model_dump(exclude_defaults=True) for a in demo.authorizations] + (extra or [])
    return Goal.model_validate({"goal": text, "hosts": [{"name": "sim", "transport": "sim"}],
                                "authorizations": auths, "budget": {"turns": 12}, "success": success or []})


# --------------------------------------------------------------------------- policies


def happy_path(sim: Sim):
    url, md5sum = mirror(sim, "13.0")
    toolkit13 = "/usr/local/cuda-13.0"
    bench = "python -m sglang.bench_serving --backend sglang --dataset-name random --num-prompts 32 --max-concurrency 1"
    messages = yield turn(
        "Verifying the starting point first: driver, toolkit, Python stack, and where to get CUDA 13.",
        calls=[("inspect_host", {"host": "sim"}),
               ("ssh_exec", {"host": "sim",
                             "command": "nvidia-smi | head -5 && echo --- && nvcc --version | tail -1"}),
               ("web_search", {"query": "NVIDIA CUDA 13.0 Update 1 toolkit runfile download Linux x86_64",
                               "num_results": 3})])
    messages = yield turn(
        "The driver (590.48.01) already supports CUDA 13.1 while the toolkit is 12.8, so only the toolkit and "
        "the wheels need to move. Backing up the Python environment, measuring the baseline, and reading the "
        "published checksum of the 13.0.1 runfile from the host's mirror of NVIDIA's archive.",
        calls=[("pip_freeze_backup", {"host": "sim"}),
               ("run_bench", {"host": "sim", "command": bench, "parser": "sglang_bench_serving", "label": "before",
                              "runs": 3, "warmup": 1}),
               ("ssh_exec", {"host": "sim", "command": f"cat {md5sum}"})])
    md5 = re.search(r"\b([0-9a-f]{32})\b", last_tool_outputs(messages)[2]).group(1)
    messages = yield turn(
        f"Backup verified. Installing CUDA 13.0.1 side by side (toolkit only, /usr/local/cuda-13.0; the 12.8 "
        f"toolkit and the cuda symlink stay), checking the runfile against md5 {md5}.",
        calls=[("install_runfile", {"host": "sim", "runfile": url, "checksum": md5, "version": "13.0"})])
    messages = yield turn(
        "nvcc 13.0 is in place. Moving PyTorch and sgl-kernel to their cu130 builds from the cu130 index, with the "
        "NCCL and CUDA runtime wheels torch+cu130 declares (no_deps, so every package is named and pinned).",
        calls=[("pip_install", {"host": "sim", "index_url": sim.index_urls["cu130"], "no_deps": True,
                                "packages": ["torch==2.10.0+cu130", "sgl-kernel==0.3.21+cu130", *TORCH_CU130_NEEDS]})])
    messages = yield turn(
        "Benchmarking again against the new toolkit (CUDA_HOME set for this run only) and re-reading the host.",
        calls=[("run_bench", {"host": "sim", "command": bench, "parser": "sglang_bench_serving", "label": "after",
                              "compare_to": "before", "runs": 3, "warmup": 1, "env": {"CUDA_HOME": toolkit13}}),
               ("inspect_host", {"host": "sim"})])
    bench_out = last_tool_outputs(messages)[0]
    verdict = re.search(r"verdict: (.*)", bench_out)
    medians = re.findall(r"median ([0-9.]+)", bench_out)
    yield turn(
        "## Upgrade done: CUDA 12.8 -> 13.0 side by side, PyTorch cu128 -> cu130\n\n"
        "- Driver 590.48.01 (supports CUDA 13.1) was left alone; toolkit 13.0.1 installed in /usr/local/cuda-13.0, "
        "nvcc reports release 13.0; 12.8 and the `cuda` symlink are unchanged (turn 3).\n"
        "- torch 2.10.0+cu128 -> 2.10.0+cu130 and sgl-kernel +cu128 -> +cu130, with " + " and ".join(TORCH_CU130_NEEDS)
        + "; pip check finds no broken requirements (turn 4).\n"
        f"- Throughput (sglang.bench_serving, output tok/s, median of 3): before {medians[1] if len(medians) > 1 else '?'}"
        f", after {medians[0] if medians else '?'}; {verdict.group(1) if verdict else ''} (turns 2 and 5).\n"
        "- Backup of the environment from turn 2; roll back with restore_backup and its id, then remove "
        "/usr/local/cuda-13.0.\n- Jobs that build CUDA code must set CUDA_HOME=/usr/local/cuda-13.0 (or move the "
        "symlink, which is a separate, destructive step I did not take).")


def refused_before_backup(sim: Sim):
    yield turn("Checking the host first.", calls=[("inspect_host", {"host": "sim"})])
    messages = yield turn("torch is the cu128 build; removing it before installing the cu130 one.",
                          calls=[("ssh_exec", {"host": "sim", "command": "python -m pip uninstall -y torch"})])
    refusal = last_tool_outputs(messages)[0]
    assert "no rule of the goal file's authorizations covers it" in refusal and "pip_install" in refusal
    messages = yield turn(
        "Refused: no rule allows an uninstall through ssh_exec; the rules for this host are an install_runfile "
        "and a pip_install. The uninstall is not needed: pip_install of the cu130 build replaces the cu128 one in "
        "one step. Taking the backup it needs first.", calls=[("pip_freeze_backup", {"host": "sim"})])
    messages = yield turn(
        "Backup verified; installing the pinned cu130 build as authorizations[1] allows.",
        calls=[("pip_install", {"host": "sim", "index_url": sim.index_urls["cu130"], "no_deps": True,
                                "packages": ["torch==2.10.0+cu130", *TORCH_CU130_NEEDS]})])
    yield turn("torch is now 2.10.0+cu130 (installed over the cu128 build, no uninstall needed). The uninstall I "
               "first tried was refused (no rule allowed it); the install that replaced it was allowed by "
               "authorizations[1] once the backup was taken. Backup id in turn 3.")


def install_fails_no_space(sim: Sim):
    sim.set_free_space("/tmp", 100)
    url, md5sum = mirror(sim, "13.0")
    tmp = "/tmp"
    log = "/var/log/cuda-installer.log"
    messages = yield turn("Checking the host and the checksum first.",
                          calls=[("inspect_host", {"host": "sim"}), ("pip_freeze_backup", {"host": "sim"}),
                                 ("ssh_exec", {"host": "sim", "command": f"cat {md5sum}"})])
    md5 = re.search(r"\b([0-9a-f]{32})\b", last_tool_outputs(messages)[2]).group(1)
    messages = yield turn("Installing CUDA 13.0 side by side.",
                          calls=[("install_runfile", {"host": "sim", "runfile": url, "checksum": md5,
                                                      "version": "13.0"})])
    assert "Disk space check has failed" in last_tool_outputs(messages)[0] or "space" in last_tool_outputs(messages)[0]
    runfile = f"{tmp}/{url.rsplit('/', 1)[1]}"
    messages = yield turn(
        "The installer stopped on its disk-space check for the temp dir. Reading its log, checking the space, and "
        "removing the downloaded runfile so /tmp is left as it was.",
        calls=[("ssh_exec", {"host": "sim", "command": f"tail -n 20 {log}"}),
               ("ssh_exec", {"host": "sim", "command": f"df -h {tmp}"}),
               ("ssh_exec", {"host": "sim", "command": f"rm -f {runfile}"})])
    yield turn("CUDA 13.0 was NOT installed: the runfile's extraction needs several GB in the temp dir and "
               f"{tmp} has about 100 MB free (turn 3: 'Disk space check has failed'). Nothing was written to "
               "/usr/local; the downloaded runfile was removed. Next step for you: free space in /tmp, or re-run "
               "with install_runfile's tmpdir pointing at a filesystem with at least 10 GB free.")


def malformed_calls(sim: Sim):
    # Two malformed turns (the loop gives up after three in a row), then the model corrects itself.
    yield turn(calls=[("inspect_host", '{"host": "sim"'),                                  # cut-off JSON
                      ("run_shell", {"host": "sim", "command": "nvidia-smi -L"})])         # no such tool
    yield turn(calls=[("ssh_exec", {"host": "sim", "cmd": "nvidia-smi -L"})])              # wrong field name
    yield turn("Fixing the call: the tool is ssh_exec and its field is `command`.",
               calls=[("ssh_exec", {"host": "sim", "command": "nvidia-smi -L"})])
    yield turn("8 GPUs: NVIDIA RTX PRO 6000 Blackwell (turn 3). My first calls were malformed (bad JSON, an unknown "
               "tool, a wrong field name); each came back as an error that said what was wrong, and I corrected it.")


def no_space_goal(sim: Sim) -> Goal:
    runfile = f"/tmp/{sim.runfiles['13.0'].filename}"
    # The clean-up of a failed install: exactly this removal, nothing else.
    return goal_with("Install CUDA 13.0 side by side on host sim.", sim,
                     [{"host": "sim", "command": f"rm -f {runfile}"}],
                     [{"toolkit": {"host": "sim", "path": "/usr/local/cuda-13.0", "version": "13.0"}}])


SESSIONS: dict[str, tuple[Policy, Callable[[Sim], Goal]]] = {
    "cuda13-upgrade": (happy_path, lambda sim: demo_goal()),
    "refused-before-backup": (refused_before_backup, lambda sim: goal_with("Move torch on host sim to cu130.", sim)),
    "install-no-space": (install_fails_no_space, no_space_goal),
    "malformed-calls": (malformed_calls, lambda sim: goal_with("List the GPUs of host sim.", sim)),
}


def record(name: str, out_dir: Path, work: Path) -> Path:
    """Run one session against a fresh simulated host and write its transcript to out_dir/NAME.jsonl."""
    import shutil

    from tools.sim import build_sim

    policy, make_goal = SESSIONS[name]
    sim = build_sim(work / name / "sim")
    goal = make_goal(sim)
    out = out_dir / f"{name}.jsonl"
    out.unlink(missing_ok=True)
    shutil.rmtree(out_dir / f"{name}.artifacts", ignore_errors=True)
    built = build_session(hosts=goal.hosts, model=GeneratorModel(policy(sim)), mode="scripted",
                          authorizations=goal.authorizations, budget=goal_budget(goal), transcript=out,
                          start_info={"goal": goal.goal, "note": EXPERT_NOTE, "command": "record"},
                          sims={"sim": sim})
    execute_goal(goal, built.session)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "transcripts"))
    ap.add_argument("names", nargs="*", default=list(SESSIONS))
    a = ap.parse_args()
    from fake_exa import CUDA_DOWNLOADS, FakeExa, Results

    # Web results come from a loopback server in Exa's shape: the recording never leaves this machine.
    with FakeExa([Results([CUDA_DOWNLOADS])]) as exa, tempfile.TemporaryDirectory() as work:
        os.environ.update(EXA_API_KEY="exa-recording-key-not-a-secret", EXA_BASE_URL=exa.base_url)
        for name in a.names:
            path = record(name, Path(a.out), Path(work))
            print(json.dumps({"recorded": str(path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
