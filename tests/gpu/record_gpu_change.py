"""Record transcripts/gpu-h200-change.jsonl: a real change on a GPU machine, and its rollback.

    python3 tests/gpu/record_gpu_change.py --out DIR [--name gpu-h200-change] [--host h200]

Run from the repository's root on the GPU machine, with the change's wheels carried as docs/gpu.md
says (tests/gpu/change_support.py: what they are). One session, the machine as the local host:

 1. inspect the host and read its freeze;
 2. back up the PyTorch environment and benchmark it (benchmarks/gpu_decode.py, eager, then compiled);
 3. change it with pip_install from a file:// index of the carried wheels: two packages torch imports
    move to another version, one new package comes in;
 4. benchmark again, both modes;
 5. restore_backup from the same index, and compare the freeze with the one read in step 1;
 6. benchmark a third time, both modes.

Each benchmark runs alone in its turn, so that nothing else the session does shares the machine with it.

The model is scripted, as in tests/recording.py: a generator making the decisions an expert
would, reading the real tool results; it stops and says so when a step fails. Everything else
is the product: the loop, the gate (the goal file authorizes exactly this pip_install and this
restore), the tools, the transcript, the final checks.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

from change_support import ChangePlan, plan_change  # noqa: E402

from agent.goal import Goal  # noqa: E402
from agent.model import turn  # noqa: E402
from agent.session_builder import build_session, goal_budget  # noqa: E402
from app.run import execute_goal  # noqa: E402
from tools.pip_freeze_backup import parse_freeze  # noqa: E402

from gpu_support import clean_env, gpu_python, host_path_prefix  # noqa: E402
from recording import GeneratorModel, last_tool_outputs  # noqa: E402

NOTE = ("recorded on a real NVIDIA GPU machine with a scripted model that makes the decisions an expert would "
        "(tests/gpu/record_gpu_change.py); the tools, the safety gate, the change, its rollback and the benchmarks "
        "ran for real")

BENCH = "python3 benchmarks/gpu_decode.py --batch 1 --tokens 256"
INDEX_DIR = Path("/tmp/upgrade-agent-gpu-change-index")


def make_goal(host: str, plan: ChangePlan) -> Goal:
    name, version = next(iter(plan.moved.items()))
    return Goal.model_validate({
        "goal": (f"Prove on the real GPU machine {host} that a change to its PyTorch environment can be rolled back "
                 f"exactly. Back it up and measure decode throughput (benchmarks/gpu_decode.py, eager and "
                 f"torch.compile). Then install {', '.join(plan.pins)} from the local index {plan.index_url} (the "
                 f"machine has no route to PyPI), measure again, restore the backup from the same index, show that "
                 f"the freeze is exactly as backed up, and measure a third time."),
        "hosts": [{"name": host, "transport": "local", "python": gpu_python(), "path_prefix": host_path_prefix()}],
        "authorizations": [
            {"host": host, "tool": "pip_install", "args": {"packages": plan.pins, "index_url": plan.index_url}},
            {"host": host, "tool": "restore_backup", "destructive": True,
             "args": {"backup_id": f"{host}-*", "index_url": plan.index_url}},
        ],
        "budget": {"turns": 14, "minutes": 40},
        "success": [
            {"command": {"host": host, "run": f"python3 -m pip show {name}", "expect_output": f"Version: {version[0]}"}},
            {"command": {"host": host, "run": f"python3 -m pip show {plan.added.split('==')[0]}", "expect_exit": 1}},
            # Eager decode at batch 1 is bound by launching kernels from Python, and on the H200 machine its
            # runs fall in two bands, about 135 and 270 tok/s, alone or not (docs/gpu.md): a median of 5 moves by
            # up to a fifth. Compiled decode replays CUDA graphs and holds within half a percent: its gate is the
            # tight one.
            {"throughput": {"label": "restored-eager", "compare_to": "before-eager", "min_ratio": 0.85}},
            {"throughput": {"label": "restored-compile", "compare_to": "before-compile", "min_ratio": 0.95}},
        ],
    })


# --------------------------------------------------------------------------- reading the results


def tool_json(content: str) -> dict:
    """A tool's JSON result; a step the goal file authorized is announced first ("[allowed by ...] {...}")."""
    try:
        data = json.loads(re.sub(r"^\[allowed by [^\n]*\]\s*", "", content))
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def stdout_of(content: str) -> str:
    m = re.search(r"--- stdout ---\n(.*?)(?:\n--- stderr|\Z)", content, re.S)
    return m.group(1) if m else ""


def bench_summary(content: str) -> dict:
    out = {"ok": not content.startswith("error")}
    for key, pattern in (("median", r"^median ([0-9.e+-]+)"), ("spread", r"\(([0-9.]+)% of the median\)"),
                         ("ratio", r"ratio ([0-9.]+) \("), ("verdict", r"^verdict: (.*)$")):
        m = re.search(pattern, content, re.M)
        if m:
            out[key] = m.group(1)
    return out


def bench(host: str, mode: str, stage: str, compare_to: str | None = None):
    args = {"host": host, "command": f"{BENCH} --mode {mode}", "parser": "json:decode_tok_s",
            "label": f"{stage}-{mode}", "runs": 5 if mode == "eager" else 3, "warmup": 1, "timeout": 900}
    if compare_to:
        args["compare_to"] = compare_to
    return ("run_bench", args)


def failed(content: str) -> bool:
    return content.startswith("error") or content.startswith("refused")


# --------------------------------------------------------------------------- the expert


def expert(host: str, plan: ChangePlan):
    names = " ".join([*plan.moved, plan.added.split("==")[0]])
    messages = yield turn(
        "Reading the machine and its PyTorch environment's freeze first, in one batch.",
        calls=[("inspect_host", {"host": host}),
               ("ssh_exec", {"host": host, "command": "python3 -m pip freeze --all"})])
    inspect, freeze_out = last_tool_outputs(messages)
    first_freeze = stdout_of(freeze_out)
    facts = tool_json(inspect)
    have = parse_freeze(first_freeze)
    mismatch = [f"{n} is {have.get(n)}, expected {n}=={now}" for n, (now, _) in plan.moved.items()
                if (have.get(n) or "").lower().replace("_", "-") != f"{n}=={now}"]
    if mismatch:
        yield turn("The environment is not what the change was planned for: " + "; ".join(mismatch)
                   + ". Nothing was changed.")
        return
    gpu = (facts.get("gpus") or [{}])[0].get("name", "?")
    torch = (facts.get("python") or {}).get("torch", "?")
    messages = yield turn(
        f"{host}: {gpu}, driver {(facts.get('driver') or {}).get('version')}, torch {torch}; the freeze has "
        f"{len(have)} packages, with {', '.join(f'{n} {now}' for n, (now, _) in plan.moved.items())} (both imported "
        f"by torch). Backing up the environment first. Each benchmark then runs alone in its turn: nothing else "
        f"shares the machine while it measures.",
        calls=[("pip_freeze_backup", {"host": host})])
    backup_out = last_tool_outputs(messages)[0]
    backup_id = tool_json(backup_out).get("backup_id")
    if not backup_id or not tool_json(backup_out).get("verified"):
        yield turn(f"The backup did not verify, so nothing will be changed:\n\n{backup_out[:1500]}")
        return
    messages = yield turn(f"Backup {backup_id} verified. The eager baseline.", calls=[bench(host, "eager", "before")])
    eager = last_tool_outputs(messages)[0]
    messages = yield turn("Now the compiled baseline (torch.compile, reduce-overhead).",
                          calls=[bench(host, "compile", "before", "before-eager")])
    before = {"eager": bench_summary(eager), "compile": bench_summary(last_tool_outputs(messages)[0])}
    messages = yield turn(
        f"Baselines taken. Installing {', '.join(plan.pins)} from {plan.index_url}.",
        calls=[("pip_install", {"host": host, "packages": plan.pins, "index_url": plan.index_url})])
    install_out = last_tool_outputs(messages)[0]
    install = tool_json(install_out)
    if failed(install_out) or not install:
        yield turn(f"pip_install failed; the environment may be part-way changed. Backup {backup_id} restores it."
                   f"\n\n{install_out[:1500]}")
        return
    changes = "; ".join(f"{c['package']} {c.get('before') or '(new)'} -> {c.get('after') or '(removed)'}" for c in install["changes"])
    messages = yield turn(
        f"Changed: {changes}. pip check: {install['dependency_warnings'] or 'no broken requirements'}. Checking what "
        f"the environment now has.",
        calls=[("ssh_exec", {"host": host, "command": f"python3 -m pip show {names}"})])
    messages = yield turn("Eager again.", calls=[bench(host, "eager", "after", "before-eager")])
    eager_after = last_tool_outputs(messages)[0]
    messages = yield turn("And compiled again.", calls=[bench(host, "compile", "after", "before-compile")])
    after = {"eager": bench_summary(eager_after), "compile": bench_summary(last_tool_outputs(messages)[0])}
    messages = yield turn(
        f"Restoring backup {backup_id} from the same local index (the machine cannot reach PyPI).",
        calls=[("restore_backup", {"host": host, "backup_id": backup_id, "index_url": plan.index_url})])
    restore_out = last_tool_outputs(messages)[0]
    restore = tool_json(restore_out)
    if failed(restore_out) or not restore:
        yield turn(f"restore_backup failed:\n\n{restore_out[:2000]}")
        return
    messages = yield turn(
        f"restore_backup: uninstalled {restore['uninstalled']}, reinstalled {restore['installed']}; remaining "
        f"difference from the backup: {restore['remaining_diff'] or 'none'}. Reading the freeze again to compare it "
        f"with the one read before anything changed.",
        calls=[("ssh_exec", {"host": host, "command": "python3 -m pip freeze --all"})])
    freeze_again = last_tool_outputs(messages)[0]
    messages = yield turn("Eager a third time.", calls=[bench(host, "eager", "restored", "before-eager")])
    eager_restored = last_tool_outputs(messages)[0]
    same = stdout_of(freeze_again).splitlines() == first_freeze.splitlines()
    messages = yield turn("And compiled a third time.", calls=[bench(host, "compile", "restored", "before-compile")])
    restored = {"eager": bench_summary(eager_restored), "compile": bench_summary(last_tool_outputs(messages)[0])}

    def row(stage: str, figures: dict) -> str:
        return (f"| {stage} | {figures['eager'].get('median')} (±{figures['eager'].get('spread')}%) | "
                f"{figures['compile'].get('median')} (±{figures['compile'].get('spread')}%) |")
    lines = [
        f"## {host}: changed, rolled back, {'identical' if same and restore['restored'] else 'NOT identical'}",
        "",
        f"- Backup {backup_id} (turn 2), verified.",
        f"- pip_install (turn 5): {changes}.",
        f"- restore_backup (turn 9): uninstalled {', '.join(restore['uninstalled']) or 'nothing'}, reinstalled "
        f"{', '.join(restore['installed']) or 'nothing'}; the tool's freeze diff is "
        f"{'empty' if not restore['remaining_diff'] else restore['remaining_diff']}, and the freeze read after it "
        f"{'is line for line the one read in turn 1' if same else 'differs from the one read in turn 1'} "
        f"({len(stdout_of(freeze_again).splitlines())} lines).",
        "",
        "Decode throughput, tok/s (median of 5 eager and 3 compiled runs, spread):",
        "",
        "| environment | eager | compiled |",
        "|---|---|---|",
        row("backed up", before), row("changed", after), row("restored", restored),
    ]
    yield turn("\n".join(lines))


# --------------------------------------------------------------------------- the session


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for NAME.jsonl and NAME.artifacts/")
    ap.add_argument("--name", default="gpu-h200-change")
    ap.add_argument("--host", default="h200", help="host name in the session")
    a = ap.parse_args()
    freeze = subprocess.run([gpu_python(), "-m", "pip", "freeze", "--all"], capture_output=True, text=True,
                            env=clean_env(), check=True).stdout
    plan = plan_change(parse_freeze(freeze), INDEX_DIR)
    goal = make_goal(a.host, plan)
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    transcript = out_dir / f"{a.name}.jsonl"
    transcript.unlink(missing_ok=True)
    built = build_session(hosts=goal.hosts, model=GeneratorModel(expert(a.host, plan)), mode="scripted",
                          authorizations=goal.authorizations, budget=goal_budget(goal), transcript=transcript,
                          start_info={"goal": goal.goal, "note": NOTE, "command": "record"})
    code, _ = execute_goal(goal, built.session)
    print(json.dumps({"recorded": str(transcript), "exit_code": int(code)}))
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
