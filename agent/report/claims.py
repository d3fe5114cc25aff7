"""The model's final answer, checked against the record.

The final answer is the model's words; the transcript is what happened. `check_report(report)`
reads the answer with regular expressions for what it states that the record can speak to,
and compares each statement with the typed fields of the tool results:

    throughput   "before 89.16, after 96.11 tok/s", "89.16 -> 96.11 tok/s"   run_bench's medians, by label
    change       "7.8% faster", "+7.8%", "ratio 1.078", "1.08x faster"        run_bench's comparisons
    versions     driver, the CUDA the driver supports, nvcc, the toolkit on   inspect_host, pip_install's
                 PATH, torch or any package the record knows (`torch==X`,     changes, the backups'
                 `torch X -> Y`, "torch is now X")                           freezes, the final state
    toolkits     "toolkit 13.0.1 installed", "CUDA 13.0 was NOT installed"    install_runfile, inspect_host
    steps        "restored", "upgrade done", "the cuda symlink unchanged",    restore_backup, the goal's
                 a backup id                                                  result, the backups

Each statement becomes a Finding that agrees with the record or differs from it, in plain
words ("the model says 96.02 tok/s after; measured 95.91 (median of 3 runs, turn 5, call 1)").
What the answer states that the record cannot speak to is left alone: a finding that is wrong
would teach the reader to ignore them all, so every pattern asks for the words that make a
statement checkable, and a package, label or toolkit the record never saw gives no finding.
Deterministic: the same transcript always gives the same findings, and no model is asked.

    check = check_claims(Path("session.jsonl"))
    check.differences, check.confirmed, check.lines()
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from agent.report.build import build_report
from agent.report.data import Report, Step
from tools.pip_freeze_backup import normalize, parse_freeze


@dataclass(frozen=True)
class Finding:
    """One statement of the answer and what the record says about it."""

    kind: str  # throughput | change | version | toolkit | step
    quote: str  # the words of the answer it checks
    says: str  # "the model says 96.02 tok/s after"
    record: str  # "measured 95.91 (median of 3 runs, turn 5, call 1)"
    agrees: bool

    @property
    def text(self) -> str:
        return f"{self.says}; {self.record}"


@dataclass
class ClaimCheck:
    """The findings about one final answer."""

    answer: str | None
    answer_turn: int | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def differences(self) -> list[Finding]:
        return [f for f in self.findings if not f.agrees]

    @property
    def confirmed(self) -> list[Finding]:
        return [f for f in self.findings if f.agrees]

    @property
    def headline(self) -> str:
        """`Checked against the record: 2 claims differ, 3 confirmed`, and the like."""
        if not self.answer:
            return "Checked against the record: the model gave no final answer"
        if not self.findings:
            return "Checked against the record: the answer states nothing the record can confirm or contradict"
        n, ok = len(self.differences), len(self.confirmed)
        if not n:
            return f"Checked against the record: {_count(ok, 'claim')} confirmed, none differ"
        return (f"Checked against the record: {_count(n, 'claim')} {'differs' if n == 1 else 'differ'}"
                + (f", {ok} confirmed" if ok else ""))

    def lines(self, confirmed: bool = False) -> list[str]:
        """Short lines for a terminal: the headline, each difference, and each confirmation if asked."""
        out = [self.headline] + [f"  differs: {f.text}" for f in self.differences]
        return out + ([f"  confirmed: {f.text}" for f in self.confirmed] if confirmed else [])


def check_claims(transcript: Path) -> ClaimCheck:
    """The claims of a transcript's final answer, checked against the same transcript."""
    return check_report(build_report(Path(transcript)))


def check_report(report: Report) -> ClaimCheck:
    check = ClaimCheck(answer=report.final_answer, answer_turn=report.final_answer_turn)
    if not report.final_answer:
        return check
    record = _Record(report)
    seen: set[tuple[str, str]] = set()
    placed: list[tuple[int, Finding]] = []
    for start, sentence in _sentences(report.final_answer):
        for finding in _line_findings(sentence, record):
            if (finding.says, finding.record) not in seen:
                seen.add((finding.says, finding.record))
                placed.append((start + max(sentence.find(finding.quote), 0), finding))
    # In the answer's order, so that the findings read along with it.
    check.findings = [f for _, f in sorted(placed, key=lambda p: p[0])]
    return check


def _sentences(text: str) -> Iterator[tuple[int, str]]:
    """(offset, text) of each sentence: a figure and the words that say what it is stay in one, and a claim
    of one sentence does not borrow the context of the next."""
    start = 0
    for m in re.finditer(r"(?<=[.!?])[ \t]+|\n", text):
        yield start, text[start:m.start()]
        start = m.end()
    yield start, text[start:]


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------- what the record holds


_ALIASES = {"pytorch": "torch"}  # names the answer may use for a package


@dataclass
class _Version:
    host: str | None
    version: str
    where: str


class _Record:
    """The facts of the transcript that the answer's statements are checked against."""

    def __init__(self, r: Report):
        self.report = r
        self.bench_calls = [s for s in r.steps if s.tool == "run_bench"]
        self.benches = [s for s in self.bench_calls if s.succeeded]
        self.comparisons = [s for s in self.benches if s.data.get("comparison")]
        self.installs = [s for s in r.steps if s.tool == "install_runfile"]
        self.restores = [s for s in r.steps if s.tool == "restore_backup"]
        self.inspections = [(s.host, s.data, f"inspect_host, {s.where}") for s in r.steps
                            if s.tool == "inspect_host" and s.succeeded]
        self.inspections += [(host, st["inspect"], f"the final state of {host}")
                             for host, st in r.final_states.items() if isinstance(st.get("inspect"), dict)]
        self.backup_ids = {s.data.get("backup_id") for s in r.steps if s.tool == "pip_freeze_backup" and s.succeeded}
        self.packages = self._package_history()
        self.package_names = {n: n for n in self.packages} | {a: n for a, n in _ALIASES.items() if n in self.packages}
        self.package_pattern = _package_pattern(list(self.package_names)) if self.package_names else None

    def call_labels(self) -> set[str]:
        """The labels the session's benchmark calls gave, finished or not."""
        return {str(label) for s in self.bench_calls if (label := (s.data or {}).get("label") or _arg(s, "label"))}

    def labels(self) -> set[str]:
        """Labels a figure of the answer may name: the calls', and before/after, which an answer may use for
        figures that no benchmark of the session measured."""
        return self.call_labels() | {"before", "after"}

    def bench_words(self) -> list[str]:
        """Words that mark a sentence as one about the session's benchmarks: their metrics and units."""
        words = {str(s.data.get(k)) for s in self.benches for k in ("metric", "unit") if s.data.get(k)}
        return sorted(words, key=len, reverse=True)

    def _package_history(self) -> dict[str, list[_Version]]:
        """Every version of each package the record shows, in the order the record shows them."""
        hist: dict[str, list[_Version]] = {}

        def add(name: str, version: str | None, host: str | None, where: str) -> None:
            if version and not version.startswith("@"):
                hist.setdefault(normalize(name), []).append(_Version(host, version, where))

        backups = {b.backup_id: b for b in self.report.backups}
        for s in self.report.steps:
            if not s.succeeded:
                continue
            d = s.data
            if s.tool == "inspect_host":
                py = d.get("python") or {}
                for name, version in (py.get("packages") or {}).items():
                    add(name, version, s.host, f"inspect_host, {s.where}")
                add("torch", py.get("torch"), s.host, f"inspect_host, {s.where}")
            elif s.tool == "pip_freeze_backup" and backups.get(d.get("backup_id")):
                for name, line in (backups[d["backup_id"]].freeze or {}).items():
                    add(name, _pinned(line), s.host, f"backup {d['backup_id']}, {s.where}")
            elif s.tool == "pip_install":
                for c in d.get("changes") or []:
                    add(c.get("package", ""), _pinned(c.get("before")), s.host, f"pip_install, {s.where}")
                    add(c.get("package", ""), _pinned(c.get("after")), s.host, f"pip_install, {s.where}")
            elif s.tool == "restore_backup" and d.get("restored") and backups.get(d.get("backup_id")):
                for name, line in (backups[d["backup_id"]].freeze or {}).items():
                    add(name, _pinned(line), s.host, f"restore_backup, {s.where}")
        for host, st in self.report.final_states.items():
            where = f"the final state of {host}"
            for name, version in (((st.get("inspect") or {}).get("python") or {}).get("packages") or {}).items():
                add(name, version, host, where)
            if isinstance(st.get("freeze"), str):
                for name, line in parse_freeze(st["freeze"]).items():
                    add(name, _pinned(line), host, where)
        return hist

    def final_versions(self, package: str) -> list[_Version]:
        """The latest version the record shows of a package, one per host."""
        last: dict[str | None, _Version] = {}
        for v in self.packages.get(package, []):
            last[v.host] = v
        return list(last.values())

    def toolkits_at_start(self) -> set[str]:
        first: dict[str | None, dict] = {}
        for host, d, _ in self.inspections:
            first.setdefault(host, d)
        return {t.get("version") for d in first.values() for t in d.get("toolkits") or [] if t.get("version")}

    def toolkits_at_end(self) -> tuple[set[str], str] | None:
        """The toolkit versions of the latest inspection of each host, and where that was read."""
        last: dict[str | None, tuple[dict, str]] = {}
        for host, d, where in self.inspections:
            last[host] = (d, where)
        if not last:
            return None
        versions = {t.get("version") for d, _ in last.values() for t in d.get("toolkits") or [] if t.get("version")}
        return versions, ", ".join(w for _, w in last.values())


def _pinned(line: str | None) -> str | None:
    """`torch==2.10.0+cu128` -> `2.10.0+cu128`; anything else (a URL, no pin) -> None."""
    if line and "==" in line:
        return line.split("==", 1)[1].split(";", 1)[0].strip()
    return None


def _outcome(s: Step) -> str:
    """What became of a step, in a few words: `turn 3, call 1: refused (the operator declined it)`."""
    if s.status == "refused" or s.verdict == "deny":
        why = (s.reason or "").split(";")[0]
        return f"{s.where}: refused" + (f" ({why})" if why else "")
    if s.verdict == "skip":
        return f"{s.where}: not run (dry run)"
    text = (s.error or s.content or s.status or "no result").strip().splitlines()[0]
    text = text.removeprefix("error: ")
    return f"{s.where}: {s.status or 'no result'}" + (f" ({_short(text)})" if text != s.status else "")


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.6g}"


def _close(claimed: str, value: float | None, units: float = 0.5) -> bool:
    """Whether a figure written with the answer's precision states `value` (within `units` of its last digit)."""
    if value is None:
        return False
    decimals = len(claimed.partition(".")[2])
    return abs(float(claimed) - value) <= units * 10 ** -decimals + 1e-9


def _same_version(claimed: str, known: str) -> bool:
    """`2.10.0+cu130` states `2.10.0+cu130`; `2.10` and `2.10.0` state `2.10.0+cu128` too; `+cu130` or `cu130`
    states any version built for cu130."""
    c, k = claimed.lower().lstrip("v"), known.lower().lstrip("v")
    k_public, _, k_local = k.partition("+")
    if c.startswith("+") or re.fullmatch(r"cu\d+", c):
        return k_local == c.lstrip("+")
    c_public, _, c_local = c.partition("+")
    if c_local and c_local != k_local:
        return False
    parts = c_public.split(".")
    return k_public.split(".")[: len(parts)] == parts


def _version_any(claimed: str, known: set[str]) -> bool:
    return any(_same_version(claimed, k) for k in known)


# --------------------------------------------------------------------------- reading the answer

_N = r"\d+(?:\.\d+)?"
_VERSION = r"(?:\d+(?:\.\d+)+(?:(?:a|b|rc|\.post|\.dev)\d+)?(?:\+[A-Za-z0-9.]*[A-Za-z0-9])?|\+?cu\d{2,3}\b)"
_BENCH_CONTEXT = re.compile(r"tok/s|tokens?/s|req/s|throughput|\bbench|\bmedian|latency|\bttft|\btpot", re.I)
_NOT_A_FIGURE = re.compile(r"\s*(?:%|x\b|×|runs?\b|turns?\b|times\b|minutes?\b|seconds?\b|GPUs?\b|calls?\b|steps?\b"
                           r"|of\b|GiB|GB|MiB|MB|s\b|h\b|min\b)", re.I)
_UNIT = r"(?:tok/s|tokens/s|req/s|ms\b)"
_IMPROVES = {"faster": True, "better": True, "improvement": True, "speedup": True, "speed-up": True, "gain": True,
             "slower": False, "worse": False, "regression": False}
_RISES = {"higher": True, "more": True, "increase": True, "up": True,
          "lower": False, "less": False, "decrease": False, "drop": False, "down": False}
_CHANGE_WORD = "|".join(sorted(map(re.escape, {**_IMPROVES, **_RISES}), key=len, reverse=True))
_PERCENT = re.compile(rf"(?<![\w.])(?P<sign>[+\-−])?(?P<n>{_N})\s*%(?:\s+(?P<word>{_CHANGE_WORD})\b)?", re.I)
_TIMES = re.compile(rf"(?<![\w.])(?P<n>{_N})(?:x|×)\s+(?P<word>faster|slower|speed-?up)\b|"
                    rf"(?<![\w.])(?P<n2>{_N})\s+(?:x|×|times)\s+(?P<word2>faster|slower)\b", re.I)
_RATIO = re.compile(rf"\bratio\b(?:\s+(?:after/before|of\s+the\s+medians?))?\s*(?:[:=]|\bis\b|\bof\b)?\s*(?P<n>{_N})"
                    rf"(?![\d.]*\s*%)", re.I)
_ARROW = re.compile(rf"(?:\bfrom\s+)?(?P<a>{_N})\s*(?:{_UNIT}\s*)?(?:->|→|=>|\bto\b)\s*(?P<b>{_N})\s*(?P<unit>{_UNIT})",
                    re.I)
_DRIVER = re.compile(r"\bdriver(?:\s+version)?\s*:?\s+(?P<v>\d{3}\.\d{1,3}(?:\.\d{1,3})?)\b", re.I)
_DRIVER_CUDA = re.compile(r"\bdriver\b[^;\n]{0,60}?\bsupport(?:s|ing)?\s+CUDA\s+(?P<v>\d+\.\d+)\b", re.I)
_NVCC = re.compile(r"\bnvcc\b(?:\s+(?:on\s+PATH|reports|says|is|now))*\s+(?:release\s+|version\s+)?(?P<v>\d+\.\d+)\b",
                   re.I)
_ON_PATH = re.compile(r"\btoolkit\s+on\s+PATH\s+(?:is\s+)?(?P<v>\d+\.\d+)\b", re.I)
_INSTALLED = re.compile(
    r"\b(?:CUDA|toolkit)(?:\s+toolkit)?\s+(?P<v>\d+\.\d+(?:\.\d+)?)(?:\s+toolkit)?\s+"
    r"(?:(?:was|is|has\s+been|got|now)\s+)?(?P<neg>(?:not|never)\s+)?(?P<verb>installed|in\s+place)\b"
    r"|\b(?P<neg2>(?:not|never)\s+(?:yet\s+)?)?installed\s+(?:the\s+)?(?:CUDA\s+toolkit|CUDA|toolkit)\s+"
    r"(?P<v2>\d+\.\d+(?:\.\d+)?)\b", re.I)
_CUDA_ARROW = re.compile(r"\bCUDA(?:\s+toolkit)?\s+(?P<a>\d+\.\d+)\s*(?:->|→|=>|\bto\b)\s*(?P<b>\d+\.\d+(?:\.\d+)?)\b",
                         re.I)
_SYMLINK = re.compile(r"\bsymlink\s+(?:(?:is|are|was|were|stays|stayed|remains|remained|has\s+been|have\s+been)\s+)?"
                      r"(?P<state>unchanged|untouched|left\s+alone|not\s+moved|moved)\b", re.I)
_RESTORED = re.compile(r"\b(?P<neg>not\s+|never\s+)?(?:restored|rolled\s+back)\b", re.I)
_NEGATED = re.compile(r"(?:\b(?:not|never|nothing|no|none)\b|n't)\s+(?:\w+\s+){0,2}$", re.I)
_MAYBE = re.compile(r"\b(?:can|could|will|would|to|may|might|should|must)\s+(?:not\s+)?(?:be\s+)?$", re.I)
_DONE = re.compile(r"\b(?:upgrade|installation|migration|update)\s+(?:is\s+|was\s+|has\s+been\s+)?"
                   r"(?P<neg>not\s+)?(?:done|complete|completed|finished|successful|succeeded)\b", re.I)
_BACKUP_ID = re.compile(r"(?<![\w.-])(?P<id>[A-Za-z0-9][\w.-]*-\d{8}-\d{6}-[0-9a-f]{4})(?![\w-])")


def _line_findings(line: str, rec: _Record) -> Iterator[Finding]:
    yield from _throughput(line, rec)
    yield from _versions(line, rec)
    yield from _toolkits(line, rec)
    yield from _steps(line, rec)


# --------------------------------------------------------------------------- throughput


def _bench_line(line: str, rec: _Record) -> bool:
    return bool(_BENCH_CONTEXT.search(line)) or any(w in line for w in rec.bench_words())


def _throughput(line: str, rec: _Record) -> Iterator[Finding]:
    context = _bench_line(line, rec)
    used: list[tuple[int, int]] = []
    for m in _ARROW.finditer(line):
        used.append(m.span())
        yield _arrow_finding(m, rec)
    for label in sorted(rec.labels(), key=len, reverse=True):
        pattern = rf"(?<![\w-]){re.escape(label)}(?![\w-])(?:\s*(?::|=|\bis\b|\bwas\b|\bat\b|\bmedian\b))*\s*" \
                  rf"(?P<n>{_N})(?!\d|\.\d)(?:\s*(?P<unit>{_UNIT}))?"
        unit = _unit_of(rec, label)
        for m in re.finditer(pattern, line, re.I):
            if any(a <= m.start("n") < b for a, b in used):
                continue
            if m.group("unit") and unit and m.group("unit").lower() != unit.lower():
                continue  # a figure in another unit than this benchmark's speaks of something else
            if not m.group("unit") and (not context or _NOT_A_FIGURE.match(line, m.end("n"))):
                continue
            used.append(m.span())
            yield _label_finding(label, m.group("n"), m.group(0), rec, m.group("unit"))
    # A change speaks of this session's benchmarks in a sentence about them or naming two of their labels
    # ("after is 50% faster than before"); "after the update, kernels are 20% faster" is left alone.
    if not (context or _names_labels(line, rec)):
        return
    for m in _PERCENT.finditer(line):
        word = (m.group("word") or "").lower()
        if word in _IMPROVES or ((word or m.group("sign")) and context):
            yield _change_finding(m.group(0), line, rec, percent=m.group("n"), sign=m.group("sign"), word=word)
    for m in _TIMES.finditer(line):
        word = (m.group("word") or m.group("word2") or "").lower()
        yield _change_finding(m.group(0), line, rec, ratio=m.group("n") or m.group("n2"), word=word)
    if context:
        for m in _RATIO.finditer(line):
            yield _change_finding(m.group(0), line, rec, ratio=m.group("n"))


def _names_labels(line: str, rec: _Record) -> bool:
    named = [label for label in rec.call_labels() if re.search(rf"(?<![\w-]){re.escape(label)}(?![\w-])", line, re.I)]
    return len(named) >= 2


def _median(s: Step) -> float | None:
    values = s.data.get("values") or []
    return statistics.median(values) if values else s.data.get("median")


def _unit_of(rec: _Record, label: str | None = None) -> str:
    units = {s.data.get("unit") for s in rec.benches if label is None or s.data.get("label") == label}
    return (next(iter(units)) or "") if len(units) == 1 else ""


def _label_finding(label: str, n: str, quote: str, rec: _Record, claimed_unit: str | None) -> Finding:
    unit = _unit_of(rec, label) or _unit_of(rec) or claimed_unit
    says = f"the model says {n}{' ' + unit if unit else ''} {label}"
    results = [s for s in rec.benches if s.data.get("label") == label]
    if not results:
        tried = [s for s in rec.bench_calls if ((s.data or {}).get("label") or _arg(s, "label")) == label]
        why = ("; ".join(_outcome(s) for s in tried) if tried else
               "no benchmark finished in this session" if not rec.benches else
               "labels measured: " + ", ".join(sorted({str(s.data.get('label')) for s in rec.benches})))
        return Finding("throughput", quote, says, f"no benchmark labelled {label} finished ({why})", False)
    match = next((s for s in results if _close(n, _median(s))), None)
    s = match or results[-1]
    record = f"measured {_num(_median(s))} (median of {len(s.data.get('values') or [])} runs, {s.where})"
    return Finding("throughput", quote, says, record, match is not None)


def _arg(s: Step, key: str):
    return s.arguments.get(key) if isinstance(s.arguments, dict) else None


def _baseline(rec: _Record, s: Step) -> Step | None:
    c = s.data["comparison"]
    earlier = rec.benches[: rec.benches.index(s)]
    return next((b for b in reversed(earlier) if b.data.get("label") == c.get("baseline_label") and b.host == s.host),
                None)


def _medians(rec: _Record, s: Step) -> tuple[float | None, float | None]:
    """(baseline median, median) of a comparison, from the recorded values where both are at hand."""
    base = _baseline(rec, s)
    return (_median(base) if base else s.data["comparison"].get("baseline_median")), _median(s)


def _compared(rec: _Record, s: Step) -> str:
    base, med = _medians(rec, s)
    c, unit = s.data["comparison"], s.data.get("unit")
    return (f"{s.data.get('label')} {_num(med)} vs {c.get('baseline_label')} {_num(base)}"
            f"{' ' + unit if unit else ''}, {s.where}")


def _arrow_finding(m: re.Match, rec: _Record) -> Finding:
    a, b = m.group("a"), m.group("b")
    says = f"the model says {a} -> {b} {m.group('unit')}"
    if not rec.comparisons:
        return Finding("throughput", m.group(0), says, "no before/after comparison finished in this session", False)
    match = next((s for s in rec.comparisons if _close(a, _medians(rec, s)[0]) and _close(b, _medians(rec, s)[1])),
                 None)
    s = match or rec.comparisons[-1]
    base, med = _medians(rec, s)
    return Finding("throughput", m.group(0), says,
                   f"measured {_num(base)} -> {_num(med)} ({s.data['comparison'].get('baseline_label')} -> "
                   f"{s.data.get('label')}, {s.where})", match is not None)


def _change_finding(quote: str, line: str, rec: _Record, percent: str | None = None, ratio: str | None = None,
                    sign: str | None = None, word: str = "") -> Finding:
    says = f"the model says {quote.strip()}"
    # A line that names both labels of a comparison speaks of that comparison.
    named = [s for s in rec.comparisons
             if all(re.search(rf"(?<![\w-]){re.escape(str(x))}(?![\w-])", line)
                    for x in (s.data.get("label"), s.data["comparison"].get("baseline_label")))]
    candidates = named or rec.comparisons
    if not candidates:
        tried = [s for s in rec.bench_calls if not s.succeeded]
        why = f" ({'; '.join(_outcome(s) for s in tried)})" if tried else ""
        return Finding("change", quote, says, f"no before/after comparison finished in this session{why}", False)

    def agrees(s: Step) -> bool:
        base, med = _medians(rec, s)
        if base in (None, 0) or med is None:
            return False
        measured_ratio = med / base
        if ratio is not None:
            slower = word in ("slower",)
            return _close(ratio, 1 / measured_ratio if slower else measured_ratio, units=1)
        change = (measured_ratio - 1) * 100
        if word in _IMPROVES:
            improved = (change > 0) == (s.data["comparison"].get("higher_is_better") is not False)
            if change != 0 and improved != _IMPROVES[word]:
                return False
        elif word in _RISES or sign:
            rises = _RISES.get(word, sign != "-" and sign != "−")
            if (change > 0) != rises and change != 0:
                return False
        return _close(percent, abs(change), units=1)

    match = next((s for s in candidates if agrees(s)), None)
    s = match or candidates[-1]
    base, med = _medians(rec, s)
    if base in (None, 0) or med is None:
        return Finding("change", quote, says, f"the comparison of {s.where} has no ratio", False)
    measured = f"ratio {med / base:.4f}" if ratio is not None else f"{(med / base - 1) * 100:+.2f}%"
    return Finding("change", quote, says, f"measured {measured} ({_compared(rec, s)})", match is not None)


# --------------------------------------------------------------------------- versions


def _versions(line: str, rec: _Record) -> Iterator[Finding]:
    yield from _inspected(line, _DRIVER, "driver", rec,
                          lambda d: {(d.get("driver") or {}).get("version")})
    yield from _inspected(line, _DRIVER_CUDA, "the driver supports CUDA", rec,
                          lambda d: {(d.get("driver") or {}).get("cuda_version")})
    yield from _inspected(line, _ON_PATH, "the toolkit on PATH is", rec,
                          lambda d: {(d.get("toolkit_on_path") or {}).get("version")})
    nvcc = {s.data.get("nvcc_version") for s in rec.installs if s.succeeded}
    yield from _inspected(line, _NVCC, "nvcc reports", rec,
                          lambda d: {(d.get("toolkit_on_path") or {}).get("version")}
                          | {t.get("version") for t in d.get("toolkits") or []}, also=nvcc)
    yield from _package_versions(line, rec)


def _inspected(line: str, pattern: re.Pattern, what: str, rec: _Record, facts, also: set | None = None
               ) -> Iterator[Finding]:
    """A fact of inspect_host (or of the final state) that the answer states."""
    known: dict[str, str] = {}
    for _, d, where in rec.inspections:
        for v in facts(d):
            if v:
                known.setdefault(str(v), where)
    for v in also or ():
        if v:
            known.setdefault(str(v), "install_runfile")
    if not known:
        return
    for m in pattern.finditer(line):
        v = m.group("v")
        says = f"the model says {what} {v}"
        hit = next((k for k in known if _same_version(v, k)), None)
        if hit:
            yield Finding("version", m.group(0), says, f"the record shows {hit} ({known[hit]})", True)
        else:
            yield Finding("version", m.group(0), says,
                          "the record shows " + ", ".join(f"{k} ({w})" for k, w in known.items()), False)


def _name_pattern(name: str) -> str:
    return r"[-_.]".join(re.escape(part) for part in name.split("-"))


def _package_pattern(names: list[str]) -> re.Pattern:
    """`torch==X`, `torch X`, `torch X -> Y`, `torch is now X`, `torch moved to cu130`, for the names given."""
    alternation = "|".join(_name_pattern(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(
        rf"(?<![\w.-])(?P<name>{alternation})(?![\w-])"
        rf"(?:\s*==\s*|\s+(?:(?P<is>is)\s+|was\s+)?(?P<now>now\s+)?(?:(?:at|on)\s+)?(?:version\s+)?(?:from\s+)?"
        rf"|\s+(?:was\s+|is\s+|has\s+been\s+)?(?P<moved>moved|upgraded|updated|switched|downgraded)\s+to\s+(?:the\s+)?)"
        rf"(?P<v1>{_VERSION})(?:\s*(?:->|→|=>|\bto\b)\s*(?:(?:{alternation})\s*==\s*)?(?P<v2>{_VERSION}))?"
        rf"(?P<installed>\s+(?:(?:is|was|got|has\s+been)\s+)?(?:installed|in\s+place)\b)?", re.I)


def _package_versions(line: str, rec: _Record) -> Iterator[Finding]:
    if rec.package_pattern is None:
        return
    for m in rec.package_pattern.finditer(line):
        package = rec.package_names.get(normalize(m.group("name")))
        if package is None:
            continue
        before = line[max(0, m.start() - 24):m.start()]
        if _NEGATED.search(before):
            continue  # "I did not install torch==X": what was not done is for the steps to show
        # "is", "now", "moved to", "installed X" and "X is installed" speak of the state the session left.
        after_claim = bool(m.group("is") or m.group("now") or m.group("moved") or m.group("installed")
                           or re.search(r"\b(?:installed|now)\s+$", before, re.I))
        name = m.group("name")
        if m.group("v2"):
            yield _package_any(package, name, m.group("v1"), m.group(0), rec, before_word=True)
            yield _package_moved(package, name, m.group("v1"), m.group("v2"), m.group(0), rec)
        elif after_claim:
            yield _package_final(package, name, m.group("v1"), m.group(0), rec)
        else:
            # A version named in passing ("install torch==X next", "X is the latest") states nothing about
            # this host unless the record shows it.
            finding = _package_any(package, name, m.group("v1"), m.group(0), rec)
            if finding.agrees:
                yield finding


def _package_any(package: str, name: str, v: str, quote: str, rec: _Record, before_word: bool = False) -> Finding:
    seen = rec.packages[package]
    says = f"the model says {name} {'was ' if before_word else ''}{v}{' before' if before_word else ''}"
    hit = next((k for k in seen if _same_version(v, k.version)), None)
    if hit:
        return Finding("version", quote, says, f"the record shows {package} {hit.version} ({hit.where})", True)
    versions = ", ".join(dict.fromkeys(k.version for k in seen))
    return Finding("version", quote, says, f"the record shows only {package} {versions} ({seen[-1].where})", False)


def _package_moved(package: str, name: str, v1: str, v2: str, quote: str, rec: _Record) -> Finding:
    """`torch X -> Y`: the record shows Y after it shows X (the session may have moved it again since)."""
    seen = rec.packages[package]
    first = next((i for i, k in enumerate(seen) if _same_version(v1, k.version)), 0)
    says = f"the model says {name} moved to {v2}"
    hit = next((k for k in seen[first:] if _same_version(v2, k.version)), None)
    if hit:
        return Finding("version", quote, says, f"the record shows {package} {hit.version} ({hit.where})", True)
    versions = ", ".join(dict.fromkeys(k.version for k in seen[first:]))
    return Finding("version", quote, says, f"the record shows {package} only at {versions} from then on "
                   f"({seen[-1].where})", False)


def _package_final(package: str, name: str, v: str, quote: str, rec: _Record) -> Finding:
    finals = rec.final_versions(package)
    says = f"the model says {name} is {v} after"
    hit = next((k for k in finals if _same_version(v, k.version)), None)
    k = hit or finals[-1]
    return Finding("version", quote, says, f"the record shows {package} {k.version} at the end ({k.where})",
                   hit is not None)


# --------------------------------------------------------------------------- toolkits


def _install_versions(s: Step) -> set[str]:
    d = s.data or {}
    out = {d.get("version"), d.get("nvcc_version"), _arg(s, "version")}
    for runfile in (d.get("runfile"), _arg(s, "runfile")):
        m = re.search(r"cuda_(\d+\.\d+(?:\.\d+)?)_", str(runfile or ""))
        if m:
            out.add(m.group(1))
    return {str(v) for v in out if v}


def _installed_text(s: Step) -> str:
    d = s.data
    version = max(_install_versions(s), key=len)
    return f"install_runfile installed {version} into {d.get('toolkit_path')} ({s.where})"


def _toolkits(line: str, rec: _Record) -> Iterator[Finding]:
    for m in _INSTALLED.finditer(line):
        v = m.group("v") or m.group("v2")
        negative = bool(m.group("neg") or m.group("neg2"))
        finding = _install_claim(v, negative, m.group(0), rec, state=(m.group("verb") or "").lower() != "installed")
        if finding:
            yield finding
    for m in _CUDA_ARROW.finditer(line):
        finding = _install_claim(m.group("b"), False, m.group(0), rec, state=True,
                                 says=f"the model says CUDA {m.group('a')} -> {m.group('b')}")
        if finding:
            yield finding


def _install_claim(v: str, negative: bool, quote: str, rec: _Record, state: bool, says: str | None = None
                   ) -> Finding | None:
    """A toolkit the answer says was (or was not) installed, or is in place after the session."""
    done = [s for s in rec.installs if s.succeeded]
    match = next((s for s in done if _version_any(v, _install_versions(s))), None)
    end = rec.toolkits_at_end()
    at_end = end is not None and _version_any(v, end[0])
    at_start = _version_any(v, rec.toolkits_at_start())
    says = says or f"the model says toolkit {v} " + ("was not installed" if negative else "is in place" if state
                                                     else "was installed")
    if negative:
        if match:
            return Finding("toolkit", quote, says, _installed_text(match), False)
        if at_end and not at_start:
            return Finding("toolkit", quote, says, f"the record shows toolkit {v} at the end ({end[1]})", False)
        tried = [s for s in rec.installs if _version_any(v, _install_versions(s))]
        return Finding("toolkit", quote, says, "no install_runfile call installed it"
                       + (f" ({'; '.join(_outcome(s) for s in tried)})" if tried else ""), True)
    if match:
        return Finding("toolkit", quote, says, _installed_text(match), True)
    if at_start:
        return None  # it was there before the session: "installed" may mean just that
    if at_end:
        return Finding("toolkit", quote, says, f"the record shows toolkit {v} at the end ({end[1]})", True)
    if done:
        return Finding("toolkit", quote, says, "; ".join(_installed_text(s) for s in done), False)
    why = f" ({'; '.join(_outcome(s) for s in rec.installs)})" if rec.installs else ""
    return Finding("toolkit", quote, says, f"no install_runfile call succeeded{why}", False)


# --------------------------------------------------------------------------- steps


def _steps(line: str, rec: _Record) -> Iterator[Finding]:
    for m in _SYMLINK.finditer(line):
        finding = _symlink_claim(m.group("state").lower(), m.group(0), rec)
        if finding:
            yield finding
    for m in _RESTORED.finditer(line):
        before = line[max(0, m.start() - 32):m.start()]
        if not _MAYBE.search(before):
            yield _restore_claim(bool(m.group("neg") or _NEGATED.search(before)), m.group(0), rec)
    for m in _DONE.finditer(line):
        if not m.group("neg"):
            finding = _done_claim(m.group(0), rec)
            if finding:
                yield finding
    for m in _BACKUP_ID.finditer(line):
        if m.group("id") in rec.backup_ids:
            yield Finding("step", m.group(0), f"the model says backup {m.group('id')}",
                          "pip_freeze_backup took it in this session", True)
        else:
            yield Finding("step", m.group(0), f"the model says backup {m.group('id')}",
                          "no backup with this id was taken in this session"
                          + (f" (taken: {', '.join(sorted(rec.backup_ids))})" if rec.backup_ids else ""), False)


def _symlink_claim(state: str, quote: str, rec: _Record) -> Finding | None:
    links = [(d.get("cuda_symlink"), where) for _, d, where in rec.inspections]
    done = [s for s in rec.installs if s.succeeded]
    before = links[0] if links else ((done[0].data.get("symlink_before"), done[0].where) if done else None)
    after = links[-1] if len(links) > 1 else ((done[-1].data.get("symlink_after"), done[-1].where) if done else None)
    if before is None or after is None:
        return None
    moved = before[0] != after[0]
    says = f"the model says the cuda symlink {'moved' if state == 'moved' else 'is unchanged'}"
    record = f"the record shows it at {before[0]} ({before[1]}) and at {after[0]} ({after[1]})"
    return Finding("step", quote, says, record, moved == (state == "moved"))


def _restore_claim(negative: bool, quote: str, rec: _Record) -> Finding:
    says = f"the model says the backup was {'not ' if negative else ''}restored"
    ran = [s for s in rec.restores if s.succeeded]
    full = next((s for s in ran if s.data.get("restored")), None)
    if full:
        return Finding("step", quote, says, f"restore_backup restored {full.data.get('backup_id')} ({full.where})",
                       not negative)
    if ran:
        s = ran[-1]
        left = len(s.data.get("remaining_diff") or [])
        return Finding("step", quote, says, f"restore_backup ran but {_count(left, 'difference')} remain ({s.where})",
                       negative)
    why = f" ({'; '.join(_outcome(s) for s in rec.restores)})" if rec.restores else ""
    return Finding("step", quote, says, f"no restore_backup call succeeded{why}", negative)


def _done_claim(quote: str, rec: _Record) -> Finding | None:
    says = f'the model says "{quote.strip()}"'
    g = rec.report.goal_result
    if g is not None:
        verdict = g.get("verdict") or ("met" if g.get("met") else "not met")
        if verdict == "met":
            return Finding("step", quote, says, f"the goal was met ({g.get('reason')})", True)
        if verdict in ("not met", "not started"):
            return Finding("step", quote, says, f"the goal was not met ({g.get('reason')})", False)
        return None  # unverified or a dry run: the record cannot say
    changing = [s for s in rec.report.steps if s.risk in ("mutating", "destructive") and s.rule != "backup"]
    bad = [s for s in changing if not s.succeeded]
    if bad:
        return Finding("step", quote, says, f"{_count(len(bad), 'step')} that change a host did not succeed: "
                       + "; ".join(_outcome(s) for s in bad), False)
    if not changing:
        return Finding("step", quote, says, "no step that changes a host ran", False)
    return Finding("step", quote, says, f"every step that changes a host succeeded ({len(changing)})", True)
