"""The report as a format-neutral document: a list of blocks that Markdown and HTML both render.

`document(report)` turns a Report into headings, paragraphs, tables and code blocks in
reading order (summary, goal and outcome, benchmarks, what was verified, what changed,
approvals and refusals, rollback, the model's answer with its claims checked against the
record, every step). Inline text is a str (untrusted, escaped by each renderer), Code (a code
span) or Mark (a word that carries a verdict), or a list of them; the small formatting helpers
here keep both formats' figures the same.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any

from agent.report.build import toolkit_name
from agent.report.claims import ClaimCheck, check_report
from agent.report.data import Comparison, PartInfo, Report, Step
from agent.report.rollback import package_rollback, toolkit_rollback



# Control characters but the newline and the tab: in text a person sees, shown as `cat -v` shows them.
# With them the characters that change how text reads without being seen: bidi embeddings, overrides and
# isolates (a command shown for approval could read backwards from what runs), zero-width spaces and joiners'
# kin, the byte-order mark, the line and paragraph separators some terminals break lines at, and the tag
# characters (invisible letters that carry hidden instructions).
# And a lone surrogate (a byte that was not UTF-8, kept by surrogateescape, or a model's "\\udc9b"): no
# terminal or file can take it as it is.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064"
                       "\u2066-\u2069\ud800-\udfff\ufeff\U000e0000-\U000e007f]")


def inert(text: str) -> str:
    """Text from hosts, models and the web as a screen shows it: its control characters written out (ESC as
    `^[`, BEL as `^G`, the C1 set as `M-^[`...), so that no sequence in it moves the cursor, erases a line,
    colours a fake verdict or sets the window's title. Every view's lines pass through here (`inert_console`
    for the terminal), the model's answer and the commands' output among them."""
    return _CONTROLS.sub(_caret, text)


def _caret(m: "re.Match[str]") -> str:
    code = ord(m.group())
    if code > 0xFF:
        return f"<U+{code:04X}>"
    return "^?" if code == 0x7F else f"^{chr(code + 64)}" if code < 0x20 else f"M-^{chr(code - 0x80 + 64)}"


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Mark:
    text: str
    tone: str  # ok | bad | warn


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


def chart_groups(benchmarks: list[Step]) -> list[list[Step]]:
    """Results that can share an axis (same host, metric and unit); the latest result per label."""
    groups: dict[tuple, dict[str, Step]] = {}
    for s in benchmarks:
        by_label = groups.setdefault((s.host, s.data.get("metric"), s.data.get("unit")), {})
        by_label.pop(s.data["label"], None)  # a label measured again: its latest result, in its new place
        by_label[s.data["label"]] = s
    return [list(g.values()) for g in groups.values()]


def metric_text(d: dict) -> str:
    """A benchmark result's metric and unit, as the tables and the chart name it."""
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
            parts.append(f"toolkit on PATH {toolkit_name(d.get('toolkit_on_path')) or 'none'}")
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
            done = [f"removed packages: {', '.join(d['uninstalled'])}"] if d.get("uninstalled") else []
            done += [f"reinstalled: {', '.join(d['installed'])}"] if d.get("installed") else []
            done += [f"ran on the system state: {'; '.join(d['system_commands'])}"] if d.get("system_commands") else []
            left = d.get("system_diff") or []
            out.append((f"restore of backup {d.get('backup_id')}: "
                        + ("the freeze matches the backup again" if d.get("restored") else
                           f"{len(d.get('remaining_diff') or [])} differences remain")
                        + "".join(f"; {x}" for x in done)
                        + (f"; the system state still differs: {'; '.join(left)}" if left else ""), s.where))
    return out


def document(r: Report) -> list[Any]:
    """The report as blocks, in reading order."""
    title = _shorten(r.goal.strip().splitlines()[0], 100) if r.goal and r.goal.strip() else "session"
    claims = check_report(r)
    doc: list[Any] = [Heading(1, f"Session report: {title}"), _summary(r, claims), Heading(2, "Goal")]
    doc.append(Block(r.goal) if r.goal else Para("The transcript states no goal."))
    if r.goal_result or r.checks:
        doc.append(Heading(3, "Outcome"))
        if r.goal_result:
            g = r.goal_result
            head = {"met": Mark("Goal met", "ok"), "unverified": Mark("Goal unverified", "warn"),
                    "dry run": Mark("Dry run", "warn"), "held": Mark("Host held: nothing changed", "warn")}.get(g.get("verdict") or ("met" if g.get("met") else ""),
                                                             Mark("Goal NOT met", "bad"))
            doc.append(Para([head, f" (exit code {num(g.get('exit_code'))}): {g.get('reason') or ''}"]))
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
                           error_cause(s.error or s.content or "", 400)] for s in r.failed]))

    doc += _rollback(r)

    doc.append(Heading(2, "The model's final answer"))
    if r.final_answer:
        doc += _claims(claims)
        doc += [Para(f"Turn {r.final_answer_turn}:" if r.final_answer_done else
                     f"The model never gave one; the last thing it said (turn {r.final_answer_turn}):"),
                Block(r.final_answer)]
    else:
        doc.append(Para("The model gave no final answer."))
    doc += [Heading(2, "Steps"), Steps()]
    return doc


# Lines that say a step failed but not why: the exit status, pip's and make's closing boilerplate.
_GENERIC_LINE = re.compile(
    r"(error: )?(exit (status|code):? -?\d+|(command|process) exited with (status|code) -?\d+"
    r"|(error: )?command .* (failed|errored out) with exit (status|code) -?\d+|\[end of output\]"
    r"|note: this error originates from a subprocess.*|error: subprocess-exited-with-error"
    r"|× .* did not run successfully\.?|╰─> .*|hint: see above.*|make(\[\d+\])?: \*\*\* .*error \d+"
    r"|ninja: build stopped.*|error: metadata-generation-failed|error: failed-wheel-build-for-install"
    r"|failed building wheel for .*|error: could not build wheels for .*)\.?",
    re.IGNORECASE)
_BOX_EDGE = re.compile(r"^[│|]\s*")  # pip indents a subprocess's output in a box


def error_cause(text: str, width: int = 400, lines: int = 3) -> str:
    """A long error told by its cause: the last `lines` lines that say something, within `width`.

    Tools end an error with its cause (pip's resolver, nvcc, a traceback's last line); its first
    characters are mostly the command and its progress. Blank lines and generic trailers
    ("exit status 1", pip's "note: This error originates from a subprocess") are skipped; when the
    lines do not fit, the earliest go first, then the start of the one left.
    """
    meaningful = []
    for raw in str(text).splitlines():
        line = " ".join(_BOX_EDGE.sub("", raw.strip()).split())
        if line and not _GENERIC_LINE.fullmatch(line):
            meaningful.append(line)
    if not meaningful:  # only boilerplate: that is all there is to say
        meaningful = [" ".join(x.split()) for x in str(text).splitlines() if x.strip()][-1:]
    picked = meaningful[-lines:]
    while len(picked) > 1 and len(" | ".join(picked)) > width:
        picked.pop(0)
    shown = " | ".join(picked)
    return shown if len(shown) <= width else "…" + shown[-(width - 1):]


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " ..."


def claims_mark(c: ClaimCheck) -> Mark:
    """The headline of the claim check, in the tone of its worst finding."""
    return Mark(c.headline, "bad" if c.differences else "ok" if c.findings else "")


def _claims(c: ClaimCheck) -> list[Any]:
    """The findings about the answer, above it, so that its words are read against the record."""
    doc: list[Any] = [Para([claims_mark(c), ". What follows the findings is the model's own text; the figures and "
                                            "steps above are the record's."])]
    items = [[Mark("differs", "bad"), ": ", f.text] for f in c.differences]
    items += [[Mark("confirmed", "ok"), ": ", f.text] for f in c.confirmed]
    return doc + ([Bullets(items)] if items else [])


def _summary(r: Report, claims: ClaimCheck) -> Facts:
    v = r.verification
    # The chain alone proves no more than that nobody edited it carelessly: the seal says whether it is this
    # machine's key that wrote it (agent/record/seal.py), and the report says which.
    sealed = getattr(v, "seal", None) == "sealed"
    integrity = ([Mark("hash chain verified", "ok"), f", {v.events} events; "]
                 + [Mark(v.seal_summary(), "ok" if sealed else "warn")] if v.ok else
                 [Mark("DAMAGED", "bad"), f" ({v.events} events): " + "; ".join(v.problems[:5])])
    rows: list[tuple[str, Inline]] = [("Transcript", Code(str(r.transcript))), ("Integrity", integrity)]
    if len(r.parts) > 1 or r.link_problem:
        rows.append(("Parts", _join([_part_line(p) for p in r.parts], "; ")
                     + ([", ", Mark("an earlier part was not read", "bad"), f": {r.link_problem}"]
                        if r.link_problem else [])))
    if r.start.get("goal_file"):
        rows.append(("Goal file", Code(r.start["goal_file"])))
    rows += [("Command", r.start.get("command") or "-"), ("Model", Code(r.start.get("model") or "-")),
             ("Hosts", _join([Code(h) for h in r.start.get("hosts") or []], ", ") or "-"),
             ("Started", stamp(r.start.get("t")))]
    e = r.end
    if e:
        t = _totals(r)
        rows += [("Ended", stamp(e.get("t"))),
                 ("Status", [Mark(str(e.get("status")), "ok" if e.get("status") == "done" else "bad"),
                             f": {e['reason']}" if e.get("reason") else ""]),
                 ("Totals", f"{t['turns']} turns, {t['calls']} calls proposed "
                            f"({t['tool_calls']} run, {t['refused']} refused, {t['malformed']} malformed, "
                            f"{t['failed']} failed), {t['tokens']} tokens"
                            f"{' (estimated: the model server reported no usage)' if t['tokens_estimated'] else ''}, "
                            f"{num(t['duration_s'])} s" + (f", over {len(r.parts)} parts" if len(r.parts) > 1 else ""))]
    else:
        rows.append(("Status", Mark("no end event: the session did not close its transcript", "bad")))
    if r.goal_result:
        rows.append(("Goal", _goal_mark(r.goal_result)))
    if r.final_answer:
        rows.append(("Final answer", claims_mark(claims)))
    return Facts(rows)


def _part_line(p: PartInfo) -> Inline:
    """One part of a resumed session: its file, how it ended and whether its own chain holds."""
    v = p.verification
    how = (p.end or {}).get("status") or "no end (the process was killed)"
    chain = Mark("intact", "ok") if not v.damage() else Mark("DAMAGED", "bad")
    return [f"{p.number}. ", Code(str(p.path)), f" ({how}, {v.events} events, ", chain, ")"]


def _totals(r: Report) -> dict:
    """The end events' counts, summed over the parts of the session (each part counts its own)."""
    ends = [p.end for p in r.parts if p.end] or ([r.end] if r.end else [])
    t: dict = {"tokens_estimated": any(e.get("tokens_estimated") for e in ends)}
    for key in ("turns", "tool_calls", "refused", "malformed", "failed", "tokens", "duration_s"):
        values = [e.get(key) for e in ends if e.get(key) is not None]
        t[key] = sum(values) if values else (0 if key == "malformed" else None)
    calls = [e.get("calls", e.get("tool_calls")) for e in ends]
    t["calls"] = sum(c for c in calls if c is not None) if any(c is not None for c in calls) else None
    return t


def _benchmarks(r: Report) -> list[Any]:
    doc: list[Any] = [Heading(2, "Benchmarks")]
    if not r.benchmarks:
        return doc + [Para("No benchmark finished in this session.")]
    doc.append(Chart(chart_groups(r.benchmarks)))
    if r.comparisons:
        rows = []
        for c in r.comparisons:
            d, cmp = c.step.data, c.step.data["comparison"]
            ratio, change = bench_ratio(c)
            rows.append([metric_text(d), f"{cmp['baseline_label']}: {num(cmp['baseline_median'])}",
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
                     [[Code(s.data["label"]), Code(s.host or "-"), metric_text(s.data),
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
        doc.append(Para(f"Before: {v.before_source or 'not recorded (no inspection or backup came first)'}; "
                        f"after: {v.after_source or 'unknown'}."))
        if v.rows:
            doc.append(Table(["Toolkit", "Version", "Before", "After", "Change"],
                             [[Code(t.path), Code(t.version or "?"), "yes" if t.before else "no",
                               "?" if t.after is None else ("yes" if t.after else "no"), t.change] for t in v.rows]))
        before_known = v.before_step is not None or bool(v.installs)
        link_before = (v.link_before or "none") if before_known else "not recorded"
        link_after = (v.link_after or "none") if v.after_known else "unknown"
        moved = ("unchanged" if v.link_after == v.link_before else "moved") if v.after_known and before_known \
            else "unknown"
        doc.append(Para([Code("cuda"), " symlink: ", Code(link_before), " before, ", Code(link_after),
                         f" after ({moved})."]))
        if v.on_path_before or v.on_path_after:
            doc.append(Para(["nvcc on PATH: ", Code(v.on_path_before or "not recorded"), " before, ",
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
    toolkits = [(v, toolkit_rollback(r, v)) for v in r.toolkits]
    if not r.packages and not any(cmds for _, cmds in toolkits):
        installed = any(v.installs for v in r.toolkits)
        return doc + [Para("Nothing the session changed has a recorded way back: no backup was taken and "
                           + ("the toolkits are as they were." if installed else "no toolkit was installed."))]
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
    for v, cmds in toolkits:
        if not cmds:
            continue
        doc.append(Heading(3, ["CUDA toolkits on ", Code(v.host)]))
        if not v.after_known and v.changed_by_hand:
            doc.append(Para([Mark("The after state is unknown", "bad"), f": {v.changed_by_hand[-1].where} ran ",
                             Code(str(v.changed_by_hand[-1].subject)), " and no final state was recorded; look at ",
                             Code(v.link_path), " and the toolkits before you run these:"]))
        doc.append(Block("\n".join(cmds), "sh"))
    return doc


def _goal_mark(result: dict) -> Mark:
    """The verdict as the run judged it from the record; "unverified" when no check could prove it."""
    verdict = result.get("verdict") or ("met" if result.get("met") else "not met")
    if verdict == "met":
        return Mark("met", "ok")
    if verdict == "unverified":
        return Mark("unverified: no success check proved it", "warn")
    if verdict == "dry run":
        return Mark("dry run: nothing was changed", "warn")
    if verdict == "held":
        return Mark("held: nothing was changed", "warn")
    return Mark("NOT met", "bad")
