"""Reading a transcript into a Report: one pass over its events, then the views both renderers share.

`build_report(path)` pairs each tool call with its decision, approvals and result, finds the
copy of each backup beside the transcript, and derives the package diff (first backup of each
interpreter against the recorded final state), the CUDA toolkit view (first inspection against
the final state or the installs) and the benchmark comparisons. What the transcript does not
hold stays None, to be reported as missing, never guessed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.model.protocol import CUT_OFF_REASONS
from agent.record.transcript import iter_events, verify
from agent.report.data import Backup, Comparison, PackageChange, PackageDiff, Report, Step, ToolkitRow, ToolkitView
from tools.pip_freeze_backup import parse_freeze


def build_report(path: Path) -> Report:
    """Read the transcript once and collect what the report states."""
    path = Path(path)
    start: dict = {}
    user_messages: list[str] = []
    steps: dict[tuple[int, int], Step] = {}
    ordered: list[Step] = []
    pending_approvals: list[dict] = []
    final_answer = final_turn = None
    answered = False
    end = goal_result = None
    cut_pieces: list[str] = []
    final_states: dict[str, dict] = {}
    checks: list[dict] = []
    timeline: list[tuple[str, Any]] = []

    for ev in iter_events(path):
        t = ev.get("type")
        if t == "session_start":
            start = {k: v for k, v in ev.items() if k not in ("tools", "system_prompt", "prev")}
        elif t == "note":
            if ev.get("kind") == "user":
                user_messages.append(ev.get("text", ""))
            timeline.append(("note", ev))
        elif t == "model_response":
            # The answer is what the model said when it stopped calling tools; failing that, its last words.
            # A reply cut off by a token limit is no answer: the model was asked to go on, and its
            # pieces make one answer with what it said next.
            text = ev.get("text") or ""
            if ev.get("finish_reason") in CUT_OFF_REASONS:
                cut_pieces.append(text)
            else:
                text, cut_pieces = "".join(cut_pieces) + text, []
                if text.strip() and (not ev.get("tool_calls") or not answered):
                    final_answer, final_turn, answered = text, ev.get("turn"), not ev.get("tool_calls")
            timeline.append(("model", ev))
        elif t == "model_error":
            timeline.append(("model_error", ev))
        elif t == "tool_call":
            step = Step(turn=ev["turn"], index=ev["index"], tool=ev["tool"], arguments=ev.get("arguments"),
                        error=ev.get("error"))
            if ev.get("error"):
                step.verdict = step.status = "malformed"
            steps[(step.turn, step.index)] = step
            ordered.append(step)
            timeline.append(("call", step))
        elif t == "approval":
            # The operator answers while the gate decides, so the answer precedes its decision.
            pending_approvals.append(ev)
        elif t == "decision":
            step = steps.get((ev.get("turn"), ev.get("index")))
            if step is None:
                continue
            step.host, step.subject, step.risk = ev.get("host"), ev.get("subject") or "", ev.get("risk")
            step.verdict, step.rule, step.reason = ev.get("verdict"), ev.get("rule"), ev.get("reason")
            step.approved_by, step.backup_id = ev.get("approved_by"), ev.get("backup_id")
            step.approvals = [a for a in pending_approvals
                              if a.get("host") == step.host and a.get("subject") == step.subject]
            pending_approvals = [a for a in pending_approvals if a not in step.approvals]
        elif t == "tool_result":
            step = steps.get((ev.get("turn"), ev.get("index")))
            if step is None:
                continue
            step.status, step.ok = ev.get("status"), bool(ev.get("ok"))
            step.content, step.data, step.error = ev.get("content") or "", ev.get("data"), ev.get("error")
            step.duration_s = ev.get("duration_s")
        elif t == "final_state":
            final_states[ev.get("host")] = ev
            timeline.append(("final_state", ev))
        elif t == "check":
            checks.append(ev)
            timeline.append(("check", ev))
        elif t == "goal_result":
            goal_result = ev
            timeline.append(("goal_result", ev))
        elif t == "session_end":
            end = ev
            timeline.append(("end", ev))

    backups = [_backup(path, s) for s in ordered if s.tool == "pip_freeze_backup" and s.succeeded]
    report = Report(
        transcript=path, verification=verify(path), start=start,
        goal=start.get("goal") or (user_messages[0] if user_messages else None), user_messages=user_messages,
        steps=ordered, final_answer=final_answer, final_answer_turn=final_turn,
        final_answer_done=answered, end=end,
        final_states=final_states, checks=checks, goal_result=goal_result, backups=backups, timeline=timeline)
    report.packages = _package_diffs(report)
    report.toolkits = _toolkit_views(report)
    report.benchmarks = [s for s in ordered if s.tool == "run_bench" and s.succeeded]
    report.comparisons = _comparisons(report.benchmarks)
    return report


def _backup(transcript: Path, step: Step) -> Backup:
    d = step.data
    backup_id = d["backup_id"]
    # The copy beside the transcript: as recorded (absolute, or relative to the transcript's
    # folder), else where the writer puts it, for a transcript moved with its artifacts.
    candidates = []
    if d.get("local_dir"):
        recorded = Path(d["local_dir"])
        candidates.append(recorded if recorded.is_absolute() else transcript.parent / recorded)
    candidates.append(transcript.with_name(transcript.stem + ".artifacts") / f"backup-{backup_id}")
    local = next((c for c in candidates if (c / "freeze.txt").is_file()), None)
    freeze = missing = None
    if local is not None:
        freeze = parse_freeze((local / "freeze.txt").read_text(encoding="utf-8", errors="replace"))
    else:
        missing = ("no copy of the backup was found beside the transcript (looked in "
                   + ", ".join(str(c) for c in dict.fromkeys(candidates)) + f"); it is on {d['host']} at "
                   f"{d['remote_dir']}")
    return Backup(step=step, backup_id=backup_id, host=d["host"], python=d["python"], remote_dir=d["remote_dir"],
                  local_dir=local, freeze=freeze, missing=missing, indexes=d.get("local_version_indexes") or {},
                  package_count=d.get("package_count"))


def _first_backups(report: Report) -> list[Backup]:
    """The first backup of each (host, interpreter): the state before the session changed it."""
    seen: dict[tuple[str, str], Backup] = {}
    for b in report.backups:
        seen.setdefault((b.host, b.python), b)
    return list(seen.values())


def _package_diffs(report: Report) -> list[PackageDiff]:
    out = []
    for b in _first_backups(report):
        state = report.final_states.get(b.host)
        after = None
        source = None
        if state and state.get("freeze") is not None and state.get("python") in (None, b.python):
            after = parse_freeze(state["freeze"])
            source = "the final state recorded at the end of the session (pip freeze --all)"
        changes = None
        if after is not None and b.freeze is not None:
            changes = [PackageChange(name, b.freeze.get(name), after.get(name))
                       for name in sorted(set(b.freeze) | set(after)) if b.freeze.get(name) != after.get(name)]
        out.append(PackageDiff(host=b.host, python=b.python, backup=b, after_source=source, changes=changes,
                               after=after))
    return out


def _toolkit_views(report: Report) -> list[ToolkitView]:
    hosts: list[str] = []
    first_inspect: dict[str, Step] = {}
    installs: dict[str, list[Step]] = {}
    for s in report.steps:
        if not s.succeeded or s.host is None:
            continue
        if s.tool == "inspect_host":
            first_inspect.setdefault(s.host, s)
        elif s.tool == "install_runfile":
            installs.setdefault(s.host, []).append(s)
        else:
            continue
        if s.host not in hosts:
            hosts.append(s.host)
    views = []
    for host in hosts:
        before_step = first_inspect.get(host)
        before = before_step.data if before_step else None
        before_kits = {t["path"]: t.get("version") for t in (before or {}).get("toolkits", [])}
        final = (report.final_states.get(host) or {}).get("inspect")
        done = installs.get(host, [])
        if final:
            after_kits: dict[str, str | None] | None = {t["path"]: t.get("version") for t in final.get("toolkits", [])}
            link_after = final.get("cuda_symlink")
            on_path_after = toolkit_name(final.get("toolkit_on_path"))
            source = "the final state recorded at the end of the session (inspect_host)"
        elif done:
            # install_runfile refuses a target that exists, so what it installed was not there before.
            after_kits = dict(before_kits)
            after_kits.update({s.data["toolkit_path"]: s.data.get("nvcc_version") for s in done})
            link_after = done[-1].data.get("symlink_after")
            on_path_after = None
            source = ("the first inspect_host and " if before else "") + \
                "the install_runfile results (no final state was recorded)"
        else:
            after_kits, link_after, on_path_after, source = None, None, None, None
        paths = list(before_kits) + [p for p in (after_kits or {}) if p not in before_kits]
        rows = [ToolkitRow(path=p, version=(after_kits or {}).get(p) or before_kits.get(p), before=p in before_kits,
                           after=None if after_kits is None else p in after_kits) for p in paths]
        link_before = before.get("cuda_symlink") if before else (done[0].data.get("symlink_before") if done else None)
        views.append(ToolkitView(host=host, before_step=before_step, after_source=source, rows=rows,
                                 link_before=link_before, link_after=link_after,
                                 on_path_before=toolkit_name((before or {}).get("toolkit_on_path")),
                                 on_path_after=on_path_after, installs=done))
    return views


def toolkit_name(t: dict | None) -> str | None:
    """An inspected toolkit as `12.8 (/usr/local/cuda-12.8)`; None for none."""
    return f"{t.get('version')} ({t.get('path')})" if t else None


def _comparisons(benchmarks: list[Step]) -> list[Comparison]:
    out = []
    for i, s in enumerate(benchmarks):
        c = s.data.get("comparison")
        if not c:
            continue
        # The baseline is the latest result under that label before this one, on the same host.
        baseline = next((b for b in reversed(benchmarks[:i])
                         if b.data.get("label") == c.get("baseline_label") and b.host == s.host), None)
        out.append(Comparison(step=s, baseline=baseline))
    return out
