"""`agent demo`: the upgrade this project comes from, on a fresh simulated GPU host.

CUDA 12.8 -> 13.0 side by side, PyTorch cu128 -> cu130, benchmark before and after, under the
authorizations of goals/demo.yaml. The model is the real one when an endpoint is configured
(OPENAI_API_KEY or OPENAI_BASE_URL); otherwise the model turns recorded in
transcripts/cuda13-upgrade.jsonl are played again, and the screen says so. Either way the tools,
the safety gate and the host are real, and a fresh transcript and report are written.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from agent.goal import Goal, load_goal
from agent.model import AssistantTurn, ModelError
from agent.record.replay import turn_from_event
from agent.record.transcript import iter_events
from agent.report import write_report
from agent.session_builder import build_session, goal_budget, make_model
from app.chat import TerminalApprover
from app.run import busy, execute_goal
from app.ui import JsonLines, make_view
from tools.hosts.sim import SandboxUnavailable, check_sandbox
from tools.sim import SimBuildError, build_sim

RECORDING = "cuda13-upgrade.jsonl"


def packaged(package: str, name: str) -> Path:
    """A data file shipped with the package (goals/demo.yaml, transcripts/cuda13-upgrade.jsonl)."""
    return Path(str(resources.files(package).joinpath(name)))


class RecordedTurns:
    """The model turns of a recorded session, played again in order (the tools, gate and host are live).

    The recording names only plain host paths, so its turns fit any fresh simulated host as they are.
    """

    def __init__(self, path: Path):
        self.name = "recorded turns of " + path.name
        self._turns = [e for e in iter_events(path) if e["type"] == "model_response"]
        self._i = 0

    def complete(self, messages, tools, on_text=None) -> AssistantTurn:
        if self._i >= len(self._turns):
            raise ModelError("the recorded session has no more model turns")
        turn = turn_from_event(self._turns[self._i])
        self._i += 1
        if on_text and turn.text:
            on_text(turn.text)
        return turn


def demo(args) -> int:
    say = (lambda *a: None) if args.json else (lambda *a: print(*a, file=sys.stderr, flush=True))
    started = time.monotonic()
    goal: Goal = load_goal(packaged("goals", "demo.yaml"))
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="upgrade-agent-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    say("Building a simulated GPU host: 8x NVIDIA RTX PRO 6000 Blackwell, driver 590.48.01 (CUDA 13.1), "
        "toolkit 12.8, torch 2.10.0+cu128 ...")
    try:
        check_sandbox()
        sim = build_sim(work / "sim")
    except SandboxUnavailable as e:
        print(f"agent: {e}", file=sys.stderr)
        return 2
    except FileExistsError as e:
        print(f"agent: {e}; give --dir a new or empty directory", file=sys.stderr)
        return 2
    except SimBuildError as e:
        print(f"agent: {e}", file=sys.stderr)
        return 1
    say(f"  host `sim`, in a sandbox; its files lie in {sim.root}")

    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL") or args.base_url:
        model = make_model(args.model, args.base_url, args.model_timeout)
        say(f"Model: {model.name} at {getattr(model, 'base_url', '?')} (live)")
    else:
        recording = packaged("transcripts", RECORDING)
        model = RecordedTurns(recording)
        say("Model: none configured (set OPENAI_API_KEY or OPENAI_BASE_URL for a live one), so the model turns "
            f"recorded in transcripts/{RECORDING} are played again. The tools, the safety gate and the host are "
            "real.")
    view = JsonLines() if args.json else make_view()
    if args.ask:
        approver = TerminalApprover(view=view if hasattr(view, "card") else None)
        mode = "interactive"
        say("Approvals: you will be asked for every step that changes the host (--ask).")
    else:
        approver, mode = None, "scripted"
        say("Approvals: only what goals/demo.yaml authorizes may change the host:")
        for a in goal.authorizations:
            say("  - " + json.dumps(a.model_dump(exclude_defaults=True)))
    transcript = work / "demo.jsonl"
    built = build_session(hosts=goal.hosts, model=model, mode=mode, approver=approver,
                          authorizations=goal.authorizations, budget=goal_budget(goal), transcript=transcript,
                          listeners=[view], sims={"sim": sim},
                          start_info={"goal": goal.goal, "goal_file": "goals/demo.yaml", "command": "demo"})
    if approver is not None:
        approver.record_in(built.session)
    with busy(view):
        code = execute_goal(goal, built.session)
    report = _write_report(transcript)
    if not args.json:
        _print_table(built.session.store.get("run_bench", {}))
        say(f"\nTranscript: {transcript}\nReport:     {report}")
        say(f"Replay it:  agent replay {transcript}")
        say(f"Done in {time.monotonic() - started:.1f} s, exit code {code}.")
    return code


def _write_report(transcript: Path) -> Path:
    return write_report(transcript)


def _print_table(results: dict) -> None:
    before, after = results.get("before"), results.get("after")
    if not before or not after:
        print("\nNo before/after benchmark was completed.", file=sys.stderr)
        return
    unit = after.get("unit") or ""
    ratio = after["median"] / before["median"] if before["median"] else float("nan")
    rows = [("", "before", "after"),
            (f"{after['metric']} median ({unit})", f"{before['median']:.2f}", f"{after['median']:.2f}"),
            ("runs", ", ".join(f"{v:.2f}" for v in before["values"]), ", ".join(f"{v:.2f}" for v in after["values"])),
            ("spread (max-min)", f"{before['max'] - before['min']:.2f}", f"{after['max'] - after['min']:.2f}")]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print("\nThroughput, sglang.bench_serving on the simulated host:")
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)))
    comparison = after.get("comparison") or {}
    print(f"  ratio after/before: {ratio:.3f}" + (f"  ({comparison.get('verdict')})" if comparison.get("verdict") else ""))
