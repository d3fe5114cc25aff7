"""Reports of a session, built from its transcript alone: Markdown beside it, or one HTML page.

    report = build_report(Path("session.jsonl"))   # one pass over the events
    render_markdown(report)                        # the report `run` and `chat` leave behind
    render_html(report, Path("session.html"))      # timeline, folded outputs, benchmark chart

Every figure comes from an event of the transcript (or from the backup copy it names), and
each statement cites the step it comes from ("turn 3, call 1"). What the transcript does not
hold is reported as missing, never guessed. Text from the transcript is untrusted (command
output, web pages, the model's words): the Markdown keeps it in code spans or escapes it, the
HTML escapes all of it and forbids scripts outright.
"""

from __future__ import annotations

import html
import json
import math
import re
import shlex
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.record.transcript import VerifyReport, iter_events, verify
from tools.pip_freeze_backup import parse_freeze
from tools.restore_backup import KEEP

# --------------------------------------------------------------------------- what is collected


@dataclass
class Step:
    """One tool call with everything recorded about it: arguments, decision, approvals, result."""

    turn: int
    index: int
    tool: str
    arguments: Any
    host: str | None = None
    subject: str = ""
    risk: str | None = None
    verdict: str | None = None  # allow | deny | skip | malformed
    rule: str | None = None
    reason: str | None = None
    approved_by: str | None = None
    backup_id: str | None = None
    approvals: list[dict] = field(default_factory=list)  # the operator's answers (approval events)
    status: str | None = None  # ok | error | refused | skipped | malformed | cancelled | crashed
    ok: bool = False
    content: str = ""
    data: dict | None = None
    error: str | None = None
    duration_s: float | None = None

    @property
    def where(self) -> str:
        return f"turn {self.turn}, call {self.index + 1}"

    @property
    def succeeded(self) -> bool:
        return self.ok and self.status == "ok" and isinstance(self.data, dict)


@dataclass
class Backup:
    """A pip_freeze_backup result and the freeze it holds (read from the copy beside the transcript)."""

    step: Step
    backup_id: str
    host: str
    python: str
    remote_dir: str
    local_dir: Path | None  # the copy that was found, None if none was
    freeze: dict[str, str] | None  # normalized name -> requirement line
    missing: str | None  # why `freeze` is None
    indexes: dict[str, str | None]
    package_count: int | None


@dataclass
class PackageChange:
    name: str
    before: str | None  # the requirement line, None when absent
    after: str | None

    @property
    def change(self) -> str:
        return "added" if self.before is None else "removed" if self.after is None else "changed"


@dataclass
class PackageDiff:
    host: str
    python: str
    backup: Backup
    after_source: str | None  # where the after state comes from; None when there is none
    changes: list[PackageChange] | None  # None when before or after is unknown


@dataclass
class ToolkitRow:
    path: str
    version: str | None
    before: bool
    after: bool | None  # None: not known

    @property
    def change(self) -> str:
        if self.after is None:
            return "unknown"
        return "added" if self.after and not self.before else "removed" if self.before and not self.after \
            else "unchanged"


@dataclass
class ToolkitView:
    host: str
    before_step: Step | None
    after_source: str | None
    rows: list[ToolkitRow]
    link_before: str | None
    link_after: str | None
    on_path_before: str | None
    on_path_after: str | None
    installs: list[Step]


@dataclass
class Comparison:
    """A run_bench result with compare_to, and the baseline result it was compared with."""

    step: Step
    baseline: Step | None


@dataclass
class Report:
    transcript: Path
    verification: VerifyReport
    start: dict
    goal: str | None
    user_messages: list[str]
    steps: list[Step]
    final_answer: str | None
    final_answer_turn: int | None
    final_answer_done: bool  # False: the model never stopped calling tools; `final_answer` is its last text
    end: dict | None
    final_states: dict[str, dict]
    checks: list[dict]
    goal_result: dict | None
    backups: list[Backup]
    timeline: list[tuple[str, Any]]  # (kind, payload) in transcript order
    # Derived from the above, so both renderers tell the same story.
    packages: list[PackageDiff] = field(default_factory=list)
    toolkits: list[ToolkitView] = field(default_factory=list)
    benchmarks: list[Step] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)

    @property
    def approved(self) -> list[Step]:
        """Steps that ran because someone approved them (not read-only, not the backup rule)."""
        return [s for s in self.steps if s.verdict == "allow" and (s.approved_by or s.approvals)]

    @property
    def refused(self) -> list[Step]:
        return [s for s in self.steps if s.verdict == "deny"]

    @property
    def failed(self) -> list[Step]:
        return [s for s in self.steps if s.status in ("error", "crashed", "malformed", "cancelled")]

    @property
    def changing(self) -> list[Step]:
        """Steps that ran and could change a host."""
        return [s for s in self.steps if s.verdict == "allow" and s.risk not in ("read-only", None)
                and s.status not in ("refused", "skipped", None)]


# --------------------------------------------------------------------------- building


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
            if (ev.get("text") or "").strip() and (not ev.get("tool_calls") or not answered):
                final_answer, final_turn, answered = ev["text"], ev.get("turn"), not ev.get("tool_calls")
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
        out.append(PackageDiff(host=b.host, python=b.python, backup=b, after_source=source, changes=changes))
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
            on_path_after = _toolkit_name(final.get("toolkit_on_path"))
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
                                 on_path_before=_toolkit_name((before or {}).get("toolkit_on_path")),
                                 on_path_after=on_path_after, installs=done))
    return views


def _toolkit_name(t: dict | None) -> str | None:
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


# --------------------------------------------------------------------------- rollback


def package_rollback(diff: PackageDiff) -> list[str]:
    """The shell commands that put the environment back to the backup, as restore_backup would run them.

    With the final state known: uninstall what the backup did not have, then reinstall the
    changed pins with --no-deps, grouped by the index each local version needs. Without it:
    reinstall the local-version pins from their indexes, then the whole freeze (pip skips
    what is already satisfied, so the local versions are not looked up on PyPI).
    """
    b = diff.backup
    py = shlex.quote(b.python)
    if diff.changes is None:
        cmds = []
        for index, pins in _by_index(list(b.indexes), b.indexes).items():
            if index:
                cmds.append(f"{py} -m pip install --no-deps --index-url {shlex.quote(index)} "
                            + " ".join(shlex.quote(p) for p in pins))
        cmds.append(f"{py} -m pip install --no-deps -r {shlex.quote(b.remote_dir + '/freeze.txt')}")
        return cmds
    cmds = []
    extras = sorted(c.name for c in diff.changes if c.before is None and c.name not in KEEP)
    if extras:
        cmds.append(f"{py} -m pip uninstall -y " + " ".join(shlex.quote(n) for n in extras))
    pins = [c.before for c in diff.changes if c.before is not None]
    for index, lines in sorted(_by_index(pins, b.indexes).items(), key=lambda kv: kv[0] or ""):
        cmds.append(f"{py} -m pip install --no-deps " + (f"--index-url {shlex.quote(index)} " if index else "")
                    + " ".join(shlex.quote(x) for x in sorted(lines)))
    return cmds


def _by_index(pins: list[str], indexes: dict[str, str | None]) -> dict[str | None, list[str]]:
    out: dict[str | None, list[str]] = {}
    for pin in pins:
        out.setdefault(indexes.get(pin), []).append(pin)
    return out


def toolkit_rollback(report: Report, view: ToolkitView) -> list[str]:
    """Point the `cuda` link back if it moved (first, so it never dangles), then remove what was installed."""
    cmds = []
    before = view.link_before
    moved = [s for s in view.installs if s.data.get("symlink_after") != s.data.get("symlink_before")]
    if before and (moved or (view.link_after and view.link_after != before)):
        cmds.append(f"ln -sfn {shlex.quote(before)} {shlex.quote(_cuda_link(report, view))}")
    return cmds + [f"rm -rf {shlex.quote(s.data['toolkit_path'])}" for s in view.installs]


def _cuda_link(report: Report, view: ToolkitView) -> str:
    """Where the host's `cuda` link lies: under the host's sysroot when the session recorded one."""
    for spec in report.start.get("host_specs") or []:
        if spec.get("name") == view.host and spec.get("sysroot") not in (None, "", "/"):
            return spec["sysroot"].rstrip("/") + "/usr/local/cuda"
    for s in view.installs:
        m = re.fullmatch(r"(.*)/usr/local/cuda-[\d.]+", s.data["toolkit_path"])
        if m:
            return m.group(1) + "/usr/local/cuda"
    return "/usr/local/cuda"


# --------------------------------------------------------------------------- the document both formats render
#
# The report is built once as a list of blocks; Markdown and HTML render the same blocks, so
# the two always say the same thing. Inline text is a str (untrusted, escaped by each
# renderer), Code (a code span) or Mark (a word that carries a verdict), or a list of them.


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Mark:
    text: str
    tone: str  # ok | bad


Inline = Any  # str | Code | Mark | list[Inline]


@dataclass
class Heading:
    level: int
    text: Inline


@dataclass
class Para:
    text: Inline


@dataclass
class Bullets:
    items: list[Inline]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[Inline]]
    numeric: frozenset[int] = frozenset()  # columns aligned right


@dataclass
class Facts:
    """Label and value pairs: the summary at the top."""

    rows: list[tuple[str, Inline]]


@dataclass
class Block:
    """Preformatted text: a fenced block in Markdown, <pre> in HTML."""

    text: str
    lang: str = "text"


@dataclass
class Chart:
    """The benchmark chart: drawn in HTML; the tables beside it carry the same figures in Markdown."""

    groups: list[list[Step]]


@dataclass
class Steps:
    """Every tool call in order: a table in Markdown, the folded timeline in HTML."""


def num(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.2f}%"


def secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def stamp(t: float | None) -> str:
    return "unknown" if t is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def version_of(line: str | None) -> str:
    """`torch==2.10.0+cu128` -> `2.10.0+cu128`; `x @ file:///...` -> `@ file:///...`."""
    if line is None:
        return "-"
    if "==" in line:
        return line.split("==", 1)[1]
    if " @ " in line:
        return "@ " + line.split(" @ ", 1)[1]
    return line


def spec_text(spec: Any) -> str:
    if isinstance(spec, dict):
        return ", ".join(f"{k}={v}" for k, v in spec.items() if v is not None)
    return str(spec)


def who(step: Step) -> Inline:
    """Who approved a step: the decision's approved_by, and the operator's recorded answers."""
    parts: list[Inline] = [Code(step.approved_by)] if step.approved_by else []
    parts += [f"{a.get('by') or 'unknown'} answered {a.get('answer')!r}" for a in step.approvals]
    return _join(parts, "; ") or "-"


def _join(items: list[Inline], sep: str) -> list[Inline]:
    out: list[Inline] = []
    for i, item in enumerate(items):
        out += [sep, item] if i else [item]
    return out


def bench_ratio(c: Comparison) -> tuple[float | None, float | None]:
    """(ratio, change %) of the medians, from the recorded values when both sides are at hand."""
    cmp = c.step.data["comparison"]
    values = c.step.data.get("values") or []
    base_values = (c.baseline.data.get("values") if c.baseline else None) or []
    if values and base_values and statistics.median(base_values) != 0:
        ratio = statistics.median(values) / statistics.median(base_values)
        return ratio, (ratio - 1) * 100
    return cmp.get("ratio"), cmp.get("change_percent")


def bench_spread(step: Step | None, fallback: tuple[float, float] | None = None) -> str:
    if step is not None:
        return f"{num(step.data.get('spread'))} ({pct(step.data.get('relative_spread'))})"
    if fallback:
        return num(round(fallback[1] - fallback[0], 9))
    return "n/a"


def _metric(d: dict) -> str:
    return f"{d.get('metric')} ({d.get('unit') or 'no unit'})"


def verified_facts(report: Report) -> list[tuple[str, str]]:
    """(statement, where) for what the session checked, in the order it checked it."""
    out: list[tuple[str, str]] = []
    for s in report.steps:
        if not s.succeeded:
            continue
        d = s.data
        if s.tool == "inspect_host":
            drv = d.get("driver") or {}
            gpus = d.get("gpus") or []
            py = d.get("python") or {}
            driver = (f"driver {drv.get('version')} (supports CUDA {drv.get('cuda_version')})" if drv
                      else "no NVIDIA driver answered")
            parts = [f"host {d.get('host')}: {driver}"]
            if gpus:
                parts.append(f"{len(gpus)} x {', '.join(sorted({g.get('name') for g in gpus}))}")
            parts.append(f"toolkit on PATH {_toolkit_name(d.get('toolkit_on_path')) or 'none'}")
            if d.get("cuda_symlink"):
                parts.append(f"the cuda link points to {d['cuda_symlink']}")
            if py.get("torch"):
                parts.append(f"torch {py['torch']} built for CUDA {py.get('torch_cuda')}, CUDA available: "
                             f"{'yes' if py.get('cuda_available') else 'no'}")
            out.append(("; ".join(parts + list(d.get("notes") or [])), s.where))
        elif s.tool == "pip_freeze_backup":
            out.append((f"backup {d['backup_id']} of {d['python']} on {d['host']}: {d.get('package_count')} packages, "
                        f"checked by sha256 on the host" + (" and beside the transcript" if d.get("local_dir") else "")
                        + (f"; warnings: {'; '.join(d['warnings'])}" if d.get("warnings") else ""), s.where))
        elif s.tool == "install_runfile":
            out.append((f"runfile {d.get('runfile')}: checksum {d.get('checksum')} "
                        f"{'matched' if d.get('checksum_ok') else 'did not match'}; {d.get('toolkit_path')}/bin/nvcc "
                        f"reports {d.get('nvcc_version')} ({d.get('nvcc_build')})", s.where))
        elif s.tool == "restore_backup":
            out.append((f"restore of backup {d.get('backup_id')}: "
                        + ("the freeze matches the backup again" if d.get("restored") else
                           f"{len(d.get('remaining_diff') or [])} differences remain"), s.where))
    return out


def document(r: Report) -> list[Any]:
    """The report as blocks, in reading order."""
    title = _shorten(r.goal.strip().splitlines()[0], 100) if r.goal and r.goal.strip() else "session"
    doc: list[Any] = [Heading(1, f"Session report: {title}"), _summary(r), Heading(2, "Goal")]
    doc.append(Block(r.goal) if r.goal else Para("The transcript states no goal."))
    if r.goal_result or r.checks:
        doc.append(Heading(3, "Outcome"))
        if r.goal_result:
            g = r.goal_result
            doc.append(Para([Mark("Goal met", "ok") if g.get("met") else Mark("Goal NOT met", "bad"),
                             f" (exit code {num(g.get('exit_code'))}): {g.get('reason') or ''}"]))
        if r.checks:
            doc.append(Table(["No.", "Check", "Spec", "Result", "Detail"],
                             [[num(c.get("index")), str(c.get("kind")), Code(spec_text(c.get("spec"))),
                               Mark("passed", "ok") if c.get("ok") else Mark("FAILED", "bad"), c.get("detail") or ""]
                              for c in r.checks]))
    doc += _benchmarks(r)

    doc.append(Heading(2, "Verified"))
    facts = verified_facts(r)
    doc.append(Bullets([f"{text} ({where})" for text, where in facts]) if facts else
               Para("Nothing was verified: no inspection, backup or install result is in the transcript."))

    doc += _changes(r)

    doc.append(Heading(2, "Approvals"))
    doc.append(Table(["Step", "Tool", "Host", "Risk", "What", "Approved by", "Backup", "Result"],
                     [[s.where, Code(s.tool), Code(s.host or "-"), s.risk or "-", Code(s.subject), who(s),
                       Code(s.backup_id) if s.backup_id else "-", s.status or "not run"] for s in r.approved])
               if r.approved else Para("No step needed an approval."))
    doc.append(Heading(2, "Refused steps"))
    doc.append(Table(["Step", "Tool", "Host", "Risk", "What", "Rule", "Reason"],
                     [[s.where, Code(s.tool), Code(s.host or "-"), s.risk or "-", Code(s.subject), Code(s.rule or "-"),
                       [s.reason or ""] + ([" (", who(s), ")"] if s.approvals else [])] for s in r.refused])
               if r.refused else Para("The safety layer refused nothing."))
    skipped = [s for s in r.steps if s.verdict == "skip"]
    if skipped:
        doc.append(Para("Not run because this was a dry run:"))
        doc.append(Bullets([[f"{s.where}: ", Code(s.subject), f" ({s.risk}; {s.reason})"] for s in skipped]))
    if r.failed:
        doc.append(Heading(2, "Failed steps"))
        doc.append(Table(["Step", "Tool", "Host", "Status", "Error"],
                         [[s.where, Code(s.tool), Code(s.host or "-"), s.status or "-",
                           (s.error or s.content or "")[:400]] for s in r.failed]))

    doc += _rollback(r)

    doc.append(Heading(2, "The model's final answer"))
    if r.final_answer:
        doc += [Para(f"Turn {r.final_answer_turn}:" if r.final_answer_done else
                     f"The model never gave one; the last thing it said (turn {r.final_answer_turn}):"),
                Block(r.final_answer)]
    else:
        doc.append(Para("The model gave no final answer."))
    doc += [Heading(2, "Steps"), Steps()]
    return doc


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " ..."


def _summary(r: Report) -> Facts:
    v = r.verification
    integrity = ([Mark("hash chain verified", "ok"), f", {v.events} events"] if v.ok else
                 [Mark("DAMAGED", "bad"), f" ({v.events} events): " + "; ".join(v.problems[:5])])
    rows: list[tuple[str, Inline]] = [("Transcript", Code(str(r.transcript))), ("Integrity", integrity)]
    if r.start.get("goal_file"):
        rows.append(("Goal file", Code(r.start["goal_file"])))
    rows += [("Command", r.start.get("command") or "-"), ("Model", Code(r.start.get("model") or "-")),
             ("Hosts", _join([Code(h) for h in r.start.get("hosts") or []], ", ") or "-"),
             ("Started", stamp(r.start.get("t")))]
    e = r.end
    if e:
        rows += [("Ended", stamp(e.get("t"))),
                 ("Status", [Mark(str(e.get("status")), "ok" if e.get("status") == "done" else "bad"),
                             f": {e['reason']}" if e.get("reason") else ""]),
                 ("Totals", f"{e.get('turns')} turns, {e.get('tool_calls')} tool calls run, {e.get('refused')} "
                            f"refused, {e.get('failed')} failed, {e.get('tokens')} tokens, "
                            f"{num(e.get('duration_s'))} s")]
    else:
        rows.append(("Status", Mark("no end event: the session did not close its transcript", "bad")))
    if r.goal_result:
        rows.append(("Goal", Mark("met", "ok") if r.goal_result.get("met") else Mark("NOT met", "bad")))
    return Facts(rows)


def _benchmarks(r: Report) -> list[Any]:
    doc: list[Any] = [Heading(2, "Benchmarks")]
    if not r.benchmarks:
        return doc + [Para("No benchmark finished in this session.")]
    doc.append(Chart(_chart_groups(r.benchmarks)))
    if r.comparisons:
        rows = []
        for c in r.comparisons:
            d, cmp = c.step.data, c.step.data["comparison"]
            ratio, change = bench_ratio(c)
            rows.append([_metric(d), f"{cmp['baseline_label']}: {num(cmp['baseline_median'])}",
                         f"{d['label']}: {num(d['median'])}", "n/a" if ratio is None else f"{ratio:.4f}",
                         "n/a" if change is None else f"{change:+.2f}%",
                         bench_spread(c.baseline, (cmp["baseline_min"], cmp["baseline_max"])), bench_spread(c.step),
                         Mark("yes", "ok") if cmp.get("significant") else "no", cmp.get("verdict") or "",
                         f"{c.baseline.where if c.baseline else '?'} / {c.step.where}"])
        doc.append(Para("Before and after: medians; the ratio is after / before; the spread is max - min over the "
                        "measured runs (and its share of the median)."))
        doc.append(Table(["Metric", "Before median", "After median", "Ratio", "Change", "Spread before",
                          "Spread after", "Significant", "Verdict", "Steps"], rows, frozenset({3, 4})))
    doc.append(Para("Every measured result:"))
    doc.append(Table(["Label", "Host", "Metric", "Runs", "Values", "Median", "Min", "Max", "Spread", "Step"],
                     [[Code(s.data["label"]), Code(s.host or "-"), _metric(s.data),
                       str(len(s.data.get("values") or [])),
                       ", ".join(num(v) for v in s.data.get("values") or []), num(s.data.get("median")),
                       num(s.data.get("min")), num(s.data.get("max")), bench_spread(s), s.where] for s in r.benchmarks],
                     frozenset({3, 5, 6, 7})))
    commands = sorted({(s.host or "-", s.data.get("command") or "") for s in r.benchmarks})
    doc.append(Para(["Commands: " if len(commands) > 1 else "Command: "]
                    + _join([[Code(c), " on ", Code(h)] for h, c in commands], "; ")))
    return doc


def _changes(r: Report) -> list[Any]:
    doc: list[Any] = [Heading(2, "What changed")]
    if r.changing:
        doc.append(Para("Steps that could change a host and ran:"))
        doc.append(Table(["Step", "Tool", "Host", "Risk", "What", "Result"],
                         [[s.where, Code(s.tool), Code(s.host or "-"), s.risk or "-", Code(s.subject), s.status or "-"]
                          for s in r.changing]))
    else:
        doc.append(Para("No step that changes a host ran."))
    for d in r.packages:
        b = d.backup
        doc.append(Heading(3, ["Python packages on ", Code(d.host), " (", Code(d.python), ")"]))
        doc.append(Para(["Before: backup ", Code(b.backup_id), f" ({b.step.where})"]
                        + ([", copy at ", Code(str(b.local_dir))] if b.local_dir else []) + ["."]))
        if b.freeze is None:
            doc.append(Para([Mark("The before state is missing", "bad"), f": {b.missing}."]))
        doc.append(Para(f"After: {d.after_source}." if d.after_source else
                        [Mark("The after state is unknown", "bad"), ": the transcript holds no final state of this "
                                                                    "environment."]))
        if d.changes:
            doc.append(Table(["Package", "Before", "After", "Change"],
                             [[Code(c.name), Code(version_of(c.before)), Code(version_of(c.after)), c.change]
                              for c in d.changes]))
        elif d.changes == []:
            doc.append(Para("No package changed."))
    for v in r.toolkits:
        doc.append(Heading(3, ["CUDA toolkits on ", Code(v.host)]))
        doc.append(Para(f"Before: {v.before_step.where + ' (inspect_host)' if v.before_step else 'not inspected'}; "
                        f"after: {v.after_source or 'unknown'}."))
        if v.rows:
            doc.append(Table(["Toolkit", "Version", "Before", "After", "Change"],
                             [[Code(t.path), Code(t.version or "?"), "yes" if t.before else "no",
                               "?" if t.after is None else ("yes" if t.after else "no"), t.change] for t in v.rows]))
        moved = ("unchanged" if v.link_after == v.link_before else "moved") if v.link_after else "unknown"
        doc.append(Para([Code("cuda"), " symlink: ", Code(v.link_before or "none"), " before, ",
                         Code(v.link_after or "unknown"), f" after ({moved})."]))
        if v.on_path_before or v.on_path_after:
            doc.append(Para(["nvcc on PATH: ", Code(v.on_path_before or "none"), " before, ",
                             Code(v.on_path_after or "not recorded"), " after."]))
        if v.installs:
            doc.append(Bullets([[f"{s.where}: installed CUDA ", Code(s.data.get("nvcc_version")), " into ",
                                 Code(s.data.get("toolkit_path")), " with ", Code(s.data.get("installer_command")),
                                 "; symlink ", Code(s.data.get("symlink_before")), " before, ",
                                 Code(s.data.get("symlink_after")), " after"]
                                + ([f"; warnings: {'; '.join(s.data['warnings'])}"] if s.data.get("warnings") else [])
                                for s in v.installs]))
    return doc


def _rollback(r: Report) -> list[Any]:
    doc: list[Any] = [Heading(2, "Rollback")]
    if not r.packages and not any(v.installs for v in r.toolkits):
        return doc + [Para("Nothing the session changed has a recorded way back: no backup was taken and no "
                           "toolkit was installed.")]
    for d in r.packages:
        b = d.backup
        doc.append(Heading(3, ["Python packages on ", Code(d.host)]))
        doc.append(Para(["Backup ", Code(b.backup_id), f" ({b.step.where}) is on ", Code(d.host), " at ",
                         Code(b.remote_dir)] + (["; a copy is beside the transcript at ", Code(str(b.local_dir))]
                                                if b.local_dir else []) + ["."]))
        doc.append(Para("In a session, call the tool (destructive: it needs an approval):"))
        doc.append(Block(f"restore_backup {json.dumps({'host': d.host, 'backup_id': b.backup_id})}"))
        if d.changes == []:
            doc.append(Para("The packages are as the backup left them: nothing to roll back."))
            continue
        doc.append(Para("The same by hand, on the host" + (":" if d.changes is not None else
                                                           " (the after state is unknown, so these reinstall the "
                                                           "whole freeze; packages added since the backup stay):")))
        doc.append(Block("\n".join(package_rollback(d)), "sh"))
    for v in r.toolkits:
        cmds = toolkit_rollback(r, v)
        if cmds:
            doc += [Heading(3, ["CUDA toolkits on ", Code(v.host)]), Block("\n".join(cmds), "sh")]
    return doc


# --------------------------------------------------------------------------- Markdown

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>&#~!])")  # `|` is escaped by md_table, where it matters


def md_text(s: Any) -> str:
    """Text from the transcript, inert in Markdown: special characters escaped, one line."""
    return _MD_SPECIAL.sub(r"\\\1", re.sub(r"\s*[\r\n]+\s*", " ", str(s)))


def md_code(s: Any) -> str:
    """An inline code span that holds any text, backticks included (one line)."""
    s = re.sub(r"\s*[\r\n]+\s*", " ", str(s))
    fence = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_inline(x: Inline) -> str:
    if isinstance(x, Code):
        return md_code(x.text)
    if isinstance(x, Mark):
        return f"**{md_text(x.text)}**"
    if isinstance(x, list):
        return "".join(md_inline(i) for i in x)
    return md_text(x)


def md_block(text: str, lang: str = "text") -> str:
    fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def md_table(headers: list[str], rows: list[list[Inline]]) -> str:
    def cell(x: Inline) -> str:
        # A pipe ends a cell even inside a code span; GFM reads `\|` as a literal one in both.
        return md_inline(x).replace("|", "\\|") or " "

    lines = ["| " + " | ".join(md_text(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows])


def render_markdown(report: Report) -> str:
    out = []
    for b in document(report):
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + md_inline(b.text))
        elif isinstance(b, Para):
            out.append(md_inline(b.text))
        elif isinstance(b, Bullets):
            out.append("\n".join("- " + md_inline(i) for i in b.items))
        elif isinstance(b, Table):
            out.append(md_table(b.headers, b.rows))
        elif isinstance(b, Facts):
            out.append(md_table(["", ""], [[Mark(k, ""), v] for k, v in b.rows]))
        elif isinstance(b, Block):
            out.append(md_block(b.text, b.lang))
        elif isinstance(b, Steps):
            out.append(md_table(["Step", "Tool", "Host", "Risk", "Decision", "Status", "Seconds"],
                                [[s.where, Code(s.tool), Code(s.host or "-"), s.risk or "-",
                                  f"{s.verdict or '-'} ({s.rule})" if s.rule else (s.verdict or "-"),
                                  s.status or "no result", secs(s.duration_s)] for s in report.steps])
                       if report.steps else "No tool was called.")
    return "\n\n".join(out) + "\n"


# --------------------------------------------------------------------------- HTML

# Colours of the benchmark labels, in order of first appearance (a colour-blind safe palette).
# Used by the chart only, so a screenshot's pixels of these colours are the chart's bars.
CHART_COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]

_CSS = """
:root { --fg: #1b1f23; --muted: #57606a; --line: #d0d7de; --soft: #f6f8fa; --ok: #1a7f37; --bad: #cf222e; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: #fff; }
main { max-width: 980px; margin: 0 auto; padding: 16px; }
h1 { font-size: 1.5em; margin: 0.2em 0 0.5em; overflow-wrap: anywhere; }
h2 { font-size: 1.2em; border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 1.6em; }
h3 { font-size: 1.02em; margin-bottom: 0.3em; }
code, pre { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
code { background: var(--soft); padding: 0 3px; border-radius: 3px; overflow-wrap: anywhere; }
code.nw { white-space: nowrap; overflow-wrap: normal; }
td:has(> code:not(.nw)) { min-width: 16em; }
pre { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
      white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0; max-height: 480px; overflow: auto; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 14px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--soft); }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
dt { font-weight: 600; color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
.ok { color: var(--ok); font-weight: 600; }
.bad { color: var(--bad); font-weight: 600; }
figure.chart { max-width: 680px; margin: 8px 0; }
figure.chart svg { width: 100%; height: auto; display: block; }
ol.timeline { list-style: none; padding: 0; margin: 0; }
ol.timeline > li { border-left: 3px solid var(--line); padding: 4px 0 6px 12px; margin: 0 0 6px; }
ol.timeline > li.user { border-color: #8250df; }
ol.timeline > li.model { border-color: #0969da; }
ol.timeline > li.deny { border-color: var(--bad); }
ol.timeline > li.fail { border-color: #9a6700; }
.meta { color: var(--muted); font-size: 13px; }
.badge { display: inline-block; border: 1px solid var(--line); border-radius: 10px; padding: 0 7px; font-size: 12px;
         margin: 0 4px 2px 0; }
details > summary { cursor: pointer; color: var(--muted); font-size: 13px; }
@media (max-width: 600px) { body { font-size: 14px; } main { padding: 10px; }
  dl { grid-template-columns: 1fr; } dd { margin-bottom: 4px; } }
@media print { main { max-width: none; padding: 0; } pre { max-height: none; overflow: visible; }
  h2 { break-after: avoid; } figure, table, li { break-inside: avoid; } }
"""


def _e(s: Any) -> str:
    return html.escape("" if s is None else str(s), quote=True)


def html_inline(x: Inline) -> str:
    if isinstance(x, Code):
        # A short name (a tool, a label, a version) reads badly broken across lines; long paths may wrap.
        short = len(str(x.text)) <= 32 and " " not in str(x.text)
        return f"<code{' class=nw' if short else ''}>{_e(x.text)}</code>"
    if isinstance(x, Mark):
        return f'<span class="{_e(x.tone)}">{_e(x.text)}</span>' if x.tone else f"<strong>{_e(x.text)}</strong>"
    if isinstance(x, list):
        return "".join(html_inline(i) for i in x)
    return _e(x)


def html_table(t: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in t.headers)
    body = "".join("<tr>" + "".join(f"<td{' class=n' if i in t.numeric else ''}>{html_inline(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in t.rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def render_html(report: Report, path: Path) -> str:
    """One self-contained page of the session, written to `path`; returns its text.

    Inline CSS and SVG only: no script and no network, and the page's own policy forbids
    both, so text from the transcript could not run even if it slipped through escaping.
    """
    blocks = document(report)
    title = blocks[0].text
    out = ["<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
           f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>"]
    for b in blocks:
        if isinstance(b, Heading):
            anchor = f' id="{_e(re.sub(r"[^a-z0-9]+", "-", b.text.lower()).strip("-"))}"' \
                if b.level == 2 and isinstance(b.text, str) else ""
            out.append(f"<h{b.level}{anchor}>{html_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{html_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{html_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            out.append(html_table(b))
        elif isinstance(b, Facts):
            out.append("<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{html_inline(v)}</dd>" for k, v in b.rows) + "</dl>")
        elif isinstance(b, Block):
            out.append(f"<pre>{_e(b.text)}</pre>")
        elif isinstance(b, Chart):
            out += [f'<figure class="chart">{bench_chart_svg(g)}<figcaption class="meta">{_e(_group_caption(g))}: '
                    f"each measured run is a bar, the black line is the median of its label.</figcaption></figure>"
                    for g in b.groups]
        elif isinstance(b, Steps):
            out.append('<ol class="timeline">' + "".join(_timeline_item(k, ev) for k, ev in report.timeline)
                       + "</ol>")
    out.append("</main></body></html>\n")
    text = "".join(out)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text


def _chart_groups(benchmarks: list[Step]) -> list[list[Step]]:
    """Results that can share an axis (same host, metric and unit); the latest result per label."""
    groups: dict[tuple, dict[str, Step]] = {}
    for s in benchmarks:
        by_label = groups.setdefault((s.host, s.data.get("metric"), s.data.get("unit")), {})
        by_label.pop(s.data["label"], None)  # a label measured again: its latest result, in its new place
        by_label[s.data["label"]] = s
    return [list(g.values()) for g in groups.values()]


def _group_caption(group: list[Step]) -> str:
    return f"{_metric(group[0].data)} on {group[0].host}"


def _nice_ceiling(v: float) -> float:
    """The smallest round number (1, 1.2, 1.5, 2, ... 8 x 10^k) at or above v: an axis end that divides well."""
    if v <= 0:
        return 1.0
    k = math.floor(math.log10(v))
    return next(m * 10 ** k for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * 10 ** k >= v)


def bench_chart_svg(group: list[Step]) -> str:
    """A bar chart from zero: one bar per measured run, grouped by label, each label's median a line.

    Bars start at zero so their heights compare honestly; the run-to-run spread and the
    significance are in the table under it.
    """
    width, height, left, right, top, bottom = 640, 320, 64, 16, 28, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    base = top + plot_h
    values = [v for s in group for v in s.data.get("values") or []]
    y_max = _nice_ceiling(max(values) * 1.08) if values else 1.0
    caption = _group_caption(group)

    def y(v: float) -> float:
        return base - (max(v, 0.0) / y_max) * plot_h

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{_e(caption)}"><title>{_e(caption)}</title>']
    for i in range(6):
        yy = y(y_max * i / 5)
        svg.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{width - right}" y2="{yy:.1f}" stroke="#e1e4e8"/>'
                   f'<text x="{left - 6}" y="{yy + 4:.1f}" font-size="11" text-anchor="end" fill="#57606a">'
                   f"{_e(num(round(y_max * i / 5, 6)))}</text>")
    svg.append(f'<text x="14" y="{top + plot_h / 2:.1f}" font-size="11" fill="#57606a" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{_e(_metric(group[0].data))}</text>')
    slot = plot_w / len(group)
    for gi, s in enumerate(group):
        d, runs = s.data, s.data.get("values") or []
        colour = CHART_COLOURS[gi % len(CHART_COLOURS)]
        inner = slot * 0.7
        bar_w = inner / max(len(runs), 1)
        x0 = left + gi * slot + (slot - inner) / 2
        centre = left + gi * slot + slot / 2
        for ri, v in enumerate(runs):
            top_y = round(y(v), 1)  # rounded once, so every bar ends exactly on the axis
            svg.append(f'<rect x="{x0 + ri * bar_w + bar_w * 0.1:.1f}" y="{top_y:.1f}" width="{bar_w * 0.8:.1f}" '
                       f'height="{base - top_y:.1f}" fill="{colour}"><title>{_e(d["label"])} run {ri + 1}: '
                       f"{_e(num(v))}</title></rect>")
        if d.get("median") is not None:
            svg.append(f'<line x1="{x0 - 4:.1f}" y1="{y(d["median"]):.1f}" x2="{x0 + inner + 4:.1f}" '
                       f'y2="{y(d["median"]):.1f}" stroke="#1b1f23" stroke-width="2"/>'
                       f'<text x="{centre:.1f}" y="{y(max(runs or [d["median"]])) - 6:.1f}" font-size="12" '
                       f'text-anchor="middle" fill="#1b1f23">median {_e(num(d["median"]))}</text>')
        svg.append(f'<text x="{centre:.1f}" y="{base + 18}" font-size="13" text-anchor="middle" fill="#1b1f23">'
                   f'{_e(d["label"])}</text><text x="{centre:.1f}" y="{base + 34}" font-size="11" '
                   f'text-anchor="middle" fill="#57606a">{len(runs)} runs, {_e(s.where)}</text>')
    svg.append(f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="#57606a"/></svg>')
    return "".join(svg)


def _timeline_item(kind: str, ev: Any) -> str:
    """One entry of the HTML timeline; long texts are folded in <details>."""
    if kind == "note":
        label = "user" if ev.get("kind") == "user" else f"note ({ev.get('kind')})"
        return (f'<li class="user"><div class="meta">{_e(label)} &middot; {_e(stamp(ev.get("t")))}</div>'
                f"<pre>{_e(ev.get('text'))}</pre></li>")
    if kind == "model":
        n = len(ev.get("tool_calls") or [])
        text = f"<pre>{_e(ev['text'])}</pre>" if (ev.get("text") or "").strip() else ""
        return (f'<li class="model"><div class="meta">turn {_e(ev.get("turn"))} &middot; model &middot; {n} tool '
                f"call{'s' if n != 1 else ''} &middot; {_e((ev.get('usage') or {}).get('total_tokens', 0))} tokens "
                f"&middot; {_e(ev.get('latency_s'))} s</div>{text}</li>")
    if kind == "model_error":
        return (f'<li class="fail"><div class="meta">turn {_e(ev.get("turn"))} &middot; model error</div>'
                f"<pre>{_e(ev.get('error'))}</pre></li>")
    if kind == "call":
        s: Step = ev
        cls = "deny" if s.verdict == "deny" else "fail" if s.status in ("error", "crashed", "malformed") else ""
        badges = [s.tool, s.host or "-", s.risk or "-", f"{s.verdict or '-'}" + (f" ({s.rule})" if s.rule else ""),
                  s.status or "no result"] + ([f"{secs(s.duration_s)} s"] if s.duration_s is not None else [])
        approved = f'<span class="badge">approved by {html_inline(who(s))}</span>' if s.approved_by or s.approvals \
            else ""
        args = s.arguments if isinstance(s.arguments, str) else json.dumps(s.arguments, indent=2, ensure_ascii=False)
        lines = s.content.count("\n") + 1 if s.content else 0
        return (f'<li class="{cls}"><div class="meta">{_e(s.where)}</div><div>'
                + "".join(f'<span class="badge">{_e(b)}</span>' for b in badges) + approved
                + f"</div><div><code>{_e(s.subject or s.tool)}</code></div>"
                + f"<details><summary>arguments</summary><pre>{_e(args)}</pre></details>"
                + (f"<details><summary>output ({lines} line{'s' if lines != 1 else ''})</summary>"
                   f"<pre>{_e(s.content)}</pre></details>" if s.content else "")
                + (f'<p class="meta">{_e(s.reason)}</p>' if s.verdict == "deny" and s.reason else "") + "</li>")
    if kind == "final_state":
        detail = json.dumps({k: v for k, v in ev.items() if k not in ("v", "seq", "prev", "type")}, indent=2)
        return (f'<li><div class="meta">final state of {_e(ev.get("host"))}'
                + (f' &middot; <span class="bad">{_e(ev.get("error"))}</span>' if ev.get("error") else "")
                + f"</div><details><summary>recorded state</summary><pre>{_e(detail)}</pre></details></li>")
    if kind == "check":
        ok = ev.get("ok")
        return (f"<li class=\"{'' if ok else 'deny'}\"><div class=\"meta\">check {_e(ev.get('index'))} "
                f"({_e(ev.get('kind'))})</div><span class=\"{'ok' if ok else 'bad'}\">{'passed' if ok else 'failed'}"
                f"</span> <code>{_e(spec_text(ev.get('spec')))}</code> {_e(ev.get('detail'))}</li>")
    if kind == "goal_result":
        met = ev.get("met")
        return (f"<li><span class=\"{'ok' if met else 'bad'}\">goal {'met' if met else 'not met'}</span> "
                f"(exit code {_e(ev.get('exit_code'))}): {_e(ev.get('reason'))}</li>")
    if kind == "end":
        return (f'<li><div class="meta">session end &middot; {_e(stamp(ev.get("t")))}</div>'
                f"{_e(ev.get('status'))}: {_e(ev.get('reason'))}</li>")
    return ""


# --------------------------------------------------------------------------- files


def report_path(transcript: Path) -> Path:
    transcript = Path(transcript)
    return transcript.with_name(transcript.stem + ".report.md")


def write_report(transcript: Path) -> Path:
    """Write `<transcript stem>.report.md` beside the transcript and return its path."""
    out = report_path(transcript)
    out.write_text(render_markdown(build_report(Path(transcript))), encoding="utf-8")
    return out
