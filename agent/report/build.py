"""Reading a transcript into a Report: one pass over its events, then the views both renderers share.

`build_report(path)` reads the whole session: a resumed transcript links to the part it resumes
(`resumes` in its session_start), and the parts are read oldest first as one story, so a backup, a
benchmark or an inspection of an earlier part counts. It pairs each tool call with its decision,
approvals and result, finds the copy of each backup beside the transcript, and derives the package
diff (first backup of each interpreter against the recorded final state), the CUDA toolkit view (the
state before, from the first inspection or the first backup's system reading, whichever came first,
against the final state, else the installs and restores) and the benchmark comparisons. What the
record does not hold stays None, to be reported as missing, never guessed.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from agent.model.protocol import CUT_OFF_REASONS
from agent.record.transcript import first_event, iter_events, linked_part, read_part, verify
from agent.report.data import (Backup, Comparison, PackageChange, PackageDiff, PartInfo, Report, Step, ToolkitRow,
                               ToolkitView)
from tools.pip_freeze_backup import parse_freeze
from tools.system_state import CUDA_LINK, parse_system_state


MAX_PARTS = 1000  # a chain longer than this is not a session anyone resumed by hand


def session_chain(path: Path) -> tuple[list[Path], str | None]:
    """The files of one session, oldest first and ending with `path`, and why an earlier part was left out
    (None: every link holds). Each link is checked as `agent show --verify` checks it (its hash, its seq,
    the earlier file's own chain); a part whose link does not hold is not read as part of the story."""
    chain = [Path(path)]
    while len(chain) < MAX_PARTS:
        start = first_event(chain[0])
        earlier, problem = linked_part(chain[0], start) if start is not None else (None, None)
        if earlier is None:
            return chain, None
        if problem is not None:
            return chain, problem
        if any(earlier.resolve() == p.resolve() for p in chain):
            return chain, f"the earlier part {earlier} links back to a later one: the chain is read from there on"
        chain.insert(0, earlier)
    return chain, f"more than {MAX_PARTS} parts: the oldest are left out"


def build_report(path: Path) -> Report:
    """Read every part of the session once and collect what the report states."""
    path = Path(path)
    chain, link_problem = session_chain(path)
    several = len(chain) > 1
    start: dict = {}
    user_messages: list[str] = []
    steps: dict[tuple[int, int, int], Step] = {}
    ordered: list[Step] = []
    final_answer = final_turn = None
    answered = False
    end = goal_result = None
    final_states: dict[str, dict] = {}
    checks: list[dict] = []
    timeline: list[tuple[str, Any]] = []
    parts: list[PartInfo] = []
    beside: dict[int, Path] = {}  # each step's own transcript, beside which its artifacts lie

    for number, part_path in enumerate(chain, 1):
        # An earlier part may end where a kill left it (a last line cut short): read_part leaves that out.
        evs = iter_events(part_path) if part_path is chain[-1] else read_part(part_path).events
        part = PartInfo(number=number, path=part_path, verification=verify(part_path))
        parts.append(part)
        pending_approvals: list[dict] = []  # answers given in one part belong to its own decisions
        cut_pieces: list[str] = []
        for ev in evs:
            t = ev.get("type")
            if t == "session_start":
                part.start = {k: v for k, v in ev.items() if k not in ("tools", "system_prompt", "prev")}
                start = start or part.start
                if several:
                    timeline.append(("part", part))
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
                            error=ev.get("error"), part=number if several else None)
                if ev.get("error"):
                    step.verdict = step.status = "malformed"
                steps[(number, step.turn, step.index)] = step
                beside[id(step)] = part_path
                ordered.append(step)
                timeline.append(("call", step))
            elif t == "approval":
                # The operator answers while the gate decides, so the answer precedes its decision.
                pending_approvals.append(ev)
            elif t == "decision":
                step = steps.get((number, ev.get("turn"), ev.get("index")))
                if step is None:
                    continue
                step.host, step.subject, step.risk = ev.get("host"), ev.get("subject") or "", ev.get("risk")
                step.verdict, step.rule, step.reason = ev.get("verdict"), ev.get("rule"), ev.get("reason")
                step.approved_by, step.backup_id = ev.get("approved_by"), ev.get("backup_id")
                step.approvals = [a for a in pending_approvals
                                  if a.get("host") == step.host and a.get("subject") == step.subject]
                pending_approvals = [a for a in pending_approvals if a not in step.approvals]
            elif t == "tool_result":
                step = steps.get((number, ev.get("turn"), ev.get("index")))
                if step is None:
                    continue
                step.status, step.ok = ev.get("status"), bool(ev.get("ok"))
                step.content, step.data, step.error = ev.get("content") or "", ev.get("data"), ev.get("error")
                step.duration_s = ev.get("duration_s")
            elif t == "final_state":
                final_states[ev.get("host")] = ev  # a later part's reading is the later state
                timeline.append(("final_state", ev))
            elif t == "check":
                if part.checks == 0:
                    checks = []  # the checks of the part that judged last: the end of the whole session
                part.checks += 1
                checks.append(ev)
                timeline.append(("check", ev))
            elif t == "goal_result":
                goal_result = ev
                timeline.append(("goal_result", ev))
            elif t == "session_end":
                end = part.end = ev
                timeline.append(("end", ev))
    end = parts[-1].end  # the session's status is that of its last part

    backups = [_backup(beside[id(s)], s) for s in ordered if s.tool == "pip_freeze_backup" and s.succeeded]
    report = Report(
        transcript=path, verification=parts[-1].verification, start=start,
        goal=start.get("goal") or (operator_request(user_messages[0]) if user_messages else None),
        user_messages=user_messages, steps=ordered, final_answer=final_answer, final_answer_turn=final_turn,
        final_answer_done=answered, end=end,
        final_states=final_states, checks=checks, goal_result=goal_result, backups=backups, timeline=timeline,
        parts=parts, link_problem=link_problem)
    report.packages = _package_diffs(report)
    report.toolkits = _toolkit_views(report)
    report.benchmarks = [s for s in ordered if s.tool == "run_bench" and s.succeeded]
    report.comparisons = _comparisons(report.benchmarks)
    return report


# What app/resume.py's resume_message starts a resumed part with, up to its last sentence.
_RESUME_NOTE = re.compile(r"\[This (run|chat) (was stopped|ended) .*? and goes on now\..*?"
                          r"(already succeeded\.|The operator's request follows\.)\]\s*", re.DOTALL)


def operator_request(text: str) -> str:
    """A user message without the note a resumed session starts with: what the operator asked."""
    m = _RESUME_NOTE.match(text)
    return text[m.end():] if m and text[m.end():].strip() else text


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
    freeze = missing = system = None
    if local is not None:
        freeze = parse_freeze((local / "freeze.txt").read_text(encoding="utf-8", errors="replace"))
        if (local / "system.txt").is_file():
            reading = parse_system_state((local / "system.txt").read_text(encoding="utf-8", errors="replace"))
            system = reading if reading.complete else None  # one that stopped half-way says nothing of what was absent
    else:
        missing = ("no copy of the backup was found beside the transcript (looked in "
                   + ", ".join(str(c) for c in dict.fromkeys(candidates)) + f"); it is on {d['host']} at "
                   f"{d['remote_dir']}")
    return Backup(step=step, backup_id=backup_id, host=d["host"], python=d["python"], remote_dir=d["remote_dir"],
                  local_dir=local, freeze=freeze, missing=missing, indexes=d.get("local_version_indexes") or {},
                  package_count=d.get("package_count"), system=system)


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
    """Per host, the toolkits and the `cuda` link before (the first inspection or the first backup's system
    reading, whichever came first) and after (the last final state; failing that, what the installs and the
    restores did, unless a shell command touched the toolkits)."""
    hosts: list[str] = []
    befores: dict[str, Step] = {}
    installs: dict[str, list[Step]] = {}
    system_of = {id(b.step): b.system for b in report.backups if b.system is not None}
    for s in report.steps:
        if not s.succeeded or s.host is None:
            continue
        if s.tool == "inspect_host" or (s.tool == "pip_freeze_backup" and id(s) in system_of):
            befores.setdefault(s.host, s)
        elif s.tool == "install_runfile":
            installs.setdefault(s.host, []).append(s)
        else:
            continue
        if s.host not in hosts:
            hosts.append(s.host)
    views = []
    for host in hosts:
        before_step = befores.get(host)
        done = installs.get(host, [])
        link_path = _cuda_link_path(done)
        before_kits: dict[str, str | None] = {}
        link_before = on_path_before = before_source = None
        if before_step is not None and before_step.tool == "inspect_host":
            d = before_step.data
            before_kits = {t["path"]: t.get("version") for t in d.get("toolkits", [])}
            link_before = d.get("cuda_symlink")
            on_path_before = toolkit_name(d.get("toolkit_on_path")) or "none"
            before_source = f"{before_step.where} (inspect_host)"
        elif before_step is not None:
            system = system_of[id(before_step)]
            before_kits = {p: None for p, target in system.toolkits.items() if not target}  # a link is no toolkit
            link_before = system.cuda_link or None
            before_source = (f"the system reading of backup {before_step.data.get('backup_id')} "
                             f"({before_step.where}, system.txt)")
        elif done:
            link_before = done[0].data.get("symlink_before")
        later = [s for s in report.steps if s.host == host and _after(report, s, before_step)]
        by_hand = [s for s in later if _touches_toolkits(s, link_path)]
        restores = [s for s in later if s.tool == "restore_backup" and s.succeeded]
        final = (report.final_states.get(host) or {}).get("inspect")
        if final:
            after_kits: dict[str, str | None] | None = {t["path"]: t.get("version") for t in final.get("toolkits", [])}
            link_after = final.get("cuda_symlink")
            on_path_after = toolkit_name(final.get("toolkit_on_path")) or "none"
            source = "the final state recorded at the end of the session (inspect_host)"
        elif by_hand:
            after_kits, link_after, on_path_after = None, None, None
            source = (f"unknown: {by_hand[-1].where} ran a command on the toolkits and no final state was recorded")
        elif done or restores:
            # install_runfile refuses a target that exists, so what it installed was not there before; a restore
            # with `system: true` says what it ran.
            after_kits, link_after = dict(before_kits), link_before
            for s in [s for s in later if s in done or s in restores]:
                if s.tool == "install_runfile":
                    after_kits[s.data["toolkit_path"]] = s.data.get("nvcc_version")
                    link_after = s.data.get("symlink_after")
                else:
                    after_kits, link_after = _restored(s, after_kits, link_after)
            on_path_after = None
            source = (f"{before_source} and " if before_source else "") + \
                "the install_runfile and restore_backup results (no final state was recorded)"
        else:
            after_kits, link_after, on_path_after, source = None, None, None, None
        paths = list(before_kits) + [p for p in (after_kits or {}) if p not in before_kits]
        rows = [ToolkitRow(path=p, version=(after_kits or {}).get(p) or before_kits.get(p), before=p in before_kits,
                           after=None if after_kits is None else p in after_kits) for p in paths]
        views.append(ToolkitView(host=host, before_step=before_step, after_source=source, rows=rows,
                                 link_before=link_before, link_after=link_after, on_path_before=on_path_before,
                                 on_path_after=on_path_after, installs=done, before_source=before_source,
                                 link_path=link_path, changed_by_hand=by_hand, after_known=after_kits is not None))
    return views


def _after(report: Report, step: Step, before: Step | None) -> bool:
    """Whether `step` ran after the state before was read (every step, when it never was)."""
    return before is None or report.steps.index(step) > report.steps.index(before)


def _touches_toolkits(step: Step, link_path: str) -> bool:
    """A shell command that ran, could change the host and names the toolkits' tree (an `ln -sfn` of the link,
    an `rm -rf` of a toolkit): after it, no tool's result says what the toolkits are."""
    if step.tool != "ssh_exec" or step.verdict != "allow" or step.risk in ("read-only", None):
        return False
    if step.status in ("refused", "skipped", None) or not isinstance(step.arguments, dict):
        return False
    command = str(step.arguments.get("command", ""))
    return CUDA_LINK in command or link_path in command


def _restored(step: Step, kits: dict[str, str | None], link: str | None) -> tuple[dict[str, str | None], str | None]:
    """The toolkits and link after a restore, from the commands it ran on the system state."""
    kits = dict(kits)
    for command in step.data.get("system_commands") or []:
        words = shlex.split(command) if command.strip() else []
        if words[:1] == ["rm"] and len(words) >= 3:
            kits.pop(words[-1], None)
        elif words[:2] == ["ln", "-sfn"] and len(words) == 4:
            link = words[2]
    return kits, link


def _cuda_link_path(installs: list[Step]) -> str:
    """Where the host's `cuda` link lies: beside the installed toolkit (a host may keep its tree under a root)."""
    for s in installs:
        m = re.fullmatch(r"(.*)/usr/local/cuda-[\d.]+", s.data.get("toolkit_path") or "")
        if m:
            return m.group(1) + CUDA_LINK
    return CUDA_LINK


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
