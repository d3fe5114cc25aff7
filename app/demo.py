"""`agent demo`: the upgrade this project comes from, on a fresh simulated GPU host.

CUDA 12.8 -> 13.0 side by side, PyTorch cu128 -> cu130, benchmark before and after, under the
authorizations of goals/demo.yaml. The model is the real one when an endpoint is configured
(OPENAI_API_KEY or OPENAI_BASE_URL); otherwise the model turns recorded in
transcripts/cuda13-upgrade.jsonl are played again, and the screen says so. Either way the tools,
the safety gate and the host are real, and a fresh transcript and report are written.

A played-again session closes with an answer written from this run's own record (its benchmark
medians, what was installed or declined), not the recording's words, which were true of another
run. Either way the final answer is checked against the record at the end, and the screen says
what differs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Callable

from agent.goal import Goal, load_goal
from agent.model import AssistantTurn, ModelError
from agent.record.replay import turn_from_event
from agent.record.transcript import iter_events
from agent.report import build_report, check_claims, write_report
from agent.report.data import Report, Step
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
    Its closing answer states the figures of the run it was recorded from; `final_answer`, when
    given, writes the closing answer instead, from what this run did.
    """

    def __init__(self, path: Path, final_answer: Callable[[], str] | None = None):
        self.name = "recorded turns of " + path.name
        self._turns = [e for e in iter_events(path) if e["type"] == "model_response"]
        self._i = 0
        self._final_answer = final_answer

    def complete(self, messages, tools, on_text=None) -> AssistantTurn:
        if self._i >= len(self._turns):
            raise ModelError("the recorded session has no more model turns")
        turn = turn_from_event(self._turns[self._i])
        self._i += 1
        if _a_recorded_call_did_not_run(messages):
            # Past a step that was declined or refused here, the recording's next turns speak of what that step did
            # ("nvcc 13.0 is in place"): the demo ends with the answer this run's record gives instead.
            self._i = len(self._turns)
            turn = AssistantTurn(text="", finish_reason="stop")
        if not turn.tool_calls and self._final_answer is not None:
            turn = dataclasses.replace(turn, text=self._final_answer())
        if on_text and turn.text:
            on_text(turn.text)
        return turn


def _a_recorded_call_did_not_run(messages) -> bool:
    """Whether a call of the last turn was declined or refused: its tool message, the gate's words."""
    for m in reversed(messages):
        if m.get("role") != "tool":
            return False
        if str(m.get("content") or "").startswith("refused by the safety layer"):
            return True
    return False


def demo(args) -> int:
    say = (lambda *a: None) if args.json else (lambda *a: print(*a, file=sys.stderr, flush=True))
    quiet = getattr(args, "verbosity", None) == "quiet"
    # --quiet: the setting up and the tables give way to the steps' summaries, the verdict and where things are.
    aside = (lambda *a: None) if quiet else say
    started = time.monotonic()
    goal: Goal = load_goal(packaged("goals", "demo.yaml"))
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="upgrade-agent-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    aside("Building a simulated GPU host: 8x NVIDIA RTX PRO 6000 Blackwell, driver 590.48.01 (CUDA 13.1), "
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
    aside(f"  host `sim`, in a sandbox; its files lie in {sim.root}")

    transcript = work / "demo.jsonl"
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL") or args.base_url:
        model = make_model(args.model, args.base_url, args.model_timeout)
        aside(f"Model: {model.name} at {getattr(model, 'base_url', '?')} (live)")
    else:
        recording = packaged("transcripts", RECORDING)
        model = RecordedTurns(recording, final_answer=lambda: answer_from_record(build_report(transcript)))
        aside("Model: none configured (set OPENAI_API_KEY or OPENAI_BASE_URL for a live one), so the model turns "
            f"recorded in transcripts/{RECORDING} are played again. The tools, the safety gate and the host are "
            "real.")
    view = JsonLines() if args.json else make_view(verbosity=getattr(args, "verbosity", None))
    if args.ask:
        approver = TerminalApprover(view=view if hasattr(view, "card") else None)
        mode = "interactive"
        say("Approvals: you will be asked for every step that changes the host (--ask).")
    else:
        approver, mode = None, "scripted"
        aside("Approvals: only what goals/demo.yaml authorizes may change the host:")
        for a in goal.authorizations:
            aside("  - " + json.dumps(a.model_dump(exclude_defaults=True)))
    built = build_session(hosts=goal.hosts, model=model, mode=mode, approver=approver,
                          authorizations=goal.authorizations, baselines=goal.baselines(), budget=goal_budget(goal),
                          transcript=transcript,
                          listeners=[view], sims={"sim": sim},
                          start_info={"goal": goal.goal, "goal_file": "goals/demo.yaml", "command": "demo"})
    if approver is not None:
        approver.record_in(built.session)
    with busy(view):
        code, unreached = execute_goal(goal, built.session)
    report = _write_report(transcript)
    for problem in unreached:
        print(f"agent: {problem.problem}", file=sys.stderr)
    if not args.json:
        if not quiet:
            _print_table(built.session.store.get("run_bench", {}))
        claims = check_claims(transcript)
        (say if claims.differences else aside)("\n" + "\n".join(claims.lines()))
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


# --------------------------------------------------------------------------- the closing answer


def answer_from_record(r: Report) -> str:
    """The demo's closing answer, written from what this run's transcript holds so far.

    Every figure is this run's (the benchmark medians the table prints), and a step that was
    declined, refused or failed is said to be so, with its reason.
    """
    inspect = next((s for s in r.steps if s.tool == "inspect_host" and s.succeeded), None)
    install = _last(r, "install_runfile")
    pip = _last(r, "pip_install")
    comparison = r.comparisons[-1] if r.comparisons else None
    facts = inspect.data if inspect else {}
    old = (facts.get("toolkit_on_path") or {}).get("version") or "?"
    new = str(_argument(install, "version") or "13.0")
    changes = (pip.data.get("changes") or []) if _ok(pip) else []
    torch = next((c for c in changes if c.get("package") == "torch"), None)
    lines = [_heading(old, new, install, torch, comparison), ""]
    if inspect:
        driver = facts.get("driver") or {}
        lines.append(f"- Driver {driver.get('version')} (supports CUDA {driver.get('cuda_version')}) was left alone "
                     f"({inspect.where}).")
    lines.append(_toolkit_line(new, install))
    lines.append(_packages_line(pip, changes, facts, install))
    lines.append(_throughput_line(r, comparison))
    if r.backups:
        b = r.backups[0]
        lines.append(f"- Backup {b.backup_id} of the environment ({b.step.where}); roll back with restore_backup and "
                     "its id" + (f", then remove {install.data['toolkit_path']}." if _ok(install) else "."))
    if _ok(install):
        lines.append(f"- Jobs that build CUDA code must set CUDA_HOME={install.data['toolkit_path']} (or move the "
                     "symlink, which is a separate, destructive step I did not take).")
    return "\n".join(lines)


def _last(r: Report, tool: str) -> Step | None:
    return next((s for s in reversed(r.steps) if s.tool == tool), None)


def _ok(step: Step | None) -> bool:
    return step is not None and step.succeeded


def _argument(step: Step | None, key: str):
    return step.arguments.get(key) if step is not None and isinstance(step.arguments, dict) else None


def _why_not(step: Step) -> str:
    """Why a step did not do its work, in a few words: the gate's reason, or the first line of its error."""
    if step.status == "refused" or step.verdict == "deny":
        if (step.reason or "").startswith("the operator declined"):
            return "was declined by you"
        return f"was refused ({(step.reason or 'by the safety layer').split(';')[0]})"
    text = (step.error or step.content or step.status or "no result").strip().splitlines()[0].removeprefix("error: ")
    return f"failed ({text.split(' after ', 1)[0].split(': ', 1)[0]})"


def _local(requirement: str | None) -> str:
    """`torch==2.10.0+cu130` -> `cu130`."""
    return (requirement or "").partition("+")[2] or (requirement or "?").partition("==")[2] or "?"


def _heading(old: str, new: str, install: Step | None, torch: dict | None, comparison) -> str:
    if _ok(install) and torch and comparison:
        return (f"## Upgrade done: CUDA {old} -> {new} side by side, PyTorch {_local(torch.get('before'))} -> "
                f"{_local(torch.get('after'))}")
    missing = ([] if _ok(install) else [f"CUDA {new} was not installed"]) + \
        ([] if torch else ["PyTorch was not moved"]) + ([] if comparison else ["no before/after comparison"])
    return "## Upgrade not finished: " + "; ".join(missing)


def _toolkit_line(version: str, install: Step | None) -> str:
    if install is None:
        return f"- CUDA {version} was NOT installed: no install was attempted."
    if not _ok(install):
        return f"- CUDA {version} was NOT installed: install_runfile {_why_not(install)} ({install.where})."
    d = install.data
    link = (f"the `cuda` symlink is unchanged ({d.get('symlink_after')})" if d.get("symlink_before") ==
            d.get("symlink_after") else f"the `cuda` symlink moved from {d.get('symlink_before')} to "
                                        f"{d.get('symlink_after')}")
    runfile = Path(str(d.get("runfile") or "")).name
    release = runfile.split("_")[1] if runfile.startswith("cuda_") and runfile.count("_") >= 2 else d.get("version")
    return (f"- Toolkit {release} installed in {d.get('toolkit_path')}, nvcc reports release {d.get('nvcc_version')}; "
            f"{link} ({install.where}).")


def _packages_line(pip: Step | None, changes: list[dict], facts: dict, install: Step | None) -> str:
    torch = (facts.get("python") or {}).get("torch") or "?"
    if pip is None:
        return f"- PyTorch stays at {torch}: no package was installed."
    if not _ok(pip):
        return f"- PyTorch stays at {torch}: pip_install {_why_not(pip)} ({pip.where})."
    if not changes:
        return f"- pip_install changed no package ({pip.where})."
    moved = " and ".join(f"{c.get('package')} {_version(c.get('before'))} -> {_version(c.get('after'))}"
                         for c in changes)
    warnings = pip.data.get("warnings") or []
    # With the new toolkit missing, what pip_install warns is what the operator must know next.
    warn = f" pip_install warns: {warnings[0]}" if warnings and not _ok(install) else ""
    return f"- {moved} ({pip.where}).{warn}"


def _version(requirement: str | None) -> str:
    return (requirement or "none").partition("==")[2] or (requirement or "none")


def _unit(d: dict) -> str:
    return f" {d['unit']}" if d.get("unit") else ""


def _throughput_line(r: Report, comparison) -> str:
    if comparison is not None:
        d, base = comparison.step.data, comparison.baseline
        c = d["comparison"]
        where = f"{base.where} and {comparison.step.where}" if base else comparison.step.where
        return (f"- Throughput (sglang.bench_serving, {d.get('metric')}{_unit(d)}, median of "
                f"{len(d.get('values') or [])}): {c['baseline_label']} {c['baseline_median']:.2f}, {d['label']} "
                f"{d['median']:.2f}; {c.get('verdict')} ({where}).")
    measured = [f"{s.data['label']} {s.data['median']:.2f}{_unit(s.data)} ({s.where})" for s in r.benchmarks]
    failed = [f"the {_argument(s, 'label') or 'benchmark'} run {_why_not(s)} ({s.where})"
              for s in r.steps if s.tool == "run_bench" and not s.succeeded]
    return ("- Throughput: " + (", ".join(measured) + "; " if measured else "")
            + "no before/after comparison was made" + (": " + "; ".join(failed) if failed else "") + ".")
