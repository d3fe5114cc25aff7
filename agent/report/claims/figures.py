"""Benchmark figures: a throughput or latency under a label, a before -> after pair, a change in % or a ratio.

Each figure is compared with the recorded figure of the same unit (tok/s with tok/s, ms with ms; a
change with the comparison of the same measure: a latency's % with a latency comparison) and of the
host its words name; a figure whose words name no host is compared with every host's record of its
label, and one of a label only one host measured with that host's. A figure in a unit the session
never measured under that label speaks of something else and gives no finding.

    "before 89.16, after 96.11 tok/s"   "89.16 -> 96.11 tok/s"   "566.2 tok/s before"
    "before/after: 566.2/563.8 tok/s"   "Before: gpu1 566.2 tok/s, gpu2 564.3 tok/s"
    "7.8% faster", "+7.8%", "ratio 1.078", "1.08x faster"
"""

from __future__ import annotations

import re
from typing import Iterator

from agent.report.claims.answer import Reading
from agent.report.claims.findings import Finding
from agent.report.claims.record import Record, arg, close, median, num, outcome
from agent.report.data import Step

N = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"  # 96.11, and 1,250 as an answer may write it
_BENCH_CONTEXT = re.compile(r"tok/s|tokens?/s|req/s|throughput|\bbench|\bmedian|latency|\bttft|\btpot", re.I)
_NOT_A_FIGURE = re.compile(r"\s*(?:%|x\b|×|runs?\b|turns?\b|times\b|minutes?\b|seconds?\b|GPUs?\b|calls?\b|steps?\b"
                           r"|of\b|GiB|GB|MiB|MB|s\b|h\b|min\b)", re.I)
_UNIT = r"(?:tok/s|tokens?/s|req/s|ms\b)"
_IMPROVES = {"faster": True, "better": True, "improvement": True, "speedup": True, "speed-up": True, "gain": True,
             "slower": False, "worse": False, "regression": False}
_RISES = {"higher": True, "more": True, "increase": True, "up": True,
          "lower": False, "less": False, "decrease": False, "drop": False, "down": False}
_CHANGE_WORD = "|".join(sorted(map(re.escape, {**_IMPROVES, **_RISES}), key=len, reverse=True))
_PERCENT = re.compile(rf"(?<![\w.])(?P<sign>[+\-−])?(?P<n>{N})\s*%(?:\s+(?P<word>{_CHANGE_WORD})\b)?", re.I)
_TIMES = re.compile(rf"(?<![\w.])(?P<n>{N})(?:x|×)\s+(?P<word>faster|slower|speed-?up)\b|"
                    rf"(?<![\w.])(?P<n2>{N})\s+(?:x|×|times)\s+(?P<word2>faster|slower)\b", re.I)
_RATIO = re.compile(rf"\bratio\b(?:\s+(?:after/before|of\s+the\s+medians?))?\s*(?:[:=]|\bis\b|\bof\b)?\s*(?P<n>{N})"
                    rf"(?![\d.]*\s*%)", re.I)
_ARROW = re.compile(rf"(?:\bfrom\s+)?(?P<a>{N})\s*(?:{_UNIT}\s*)?(?:->|→|=>|\bto\b)\s*(?P<b>{N})\s*(?P<unit>{_UNIT})",
                    re.I)
_FIGURE = re.compile(rf"(?<![\w.,])(?P<n>{N})\s*(?P<unit>{_UNIT})", re.I)
_LATENCY_WORDS = re.compile(r"latency|\bttft|\btpot|\bitl\b|\be2el|\bms\b|time to first", re.I)
_THROUGHPUT_WORDS = re.compile(r"throughput|tok/s|tokens?/s|req/s|tokens? per second", re.I)


# --------------------------------------------------------------------------- units


def unit_name(text: str | None) -> str | None:
    """The answer's way of writing a unit, as run_bench names it: `tokens/s` is tok/s."""
    if not text:
        return None
    t = text.lower()
    return "tok/s" if t.startswith("tok") else t


def record_unit(s: Step) -> str | None:
    """The unit of a benchmark result: the parser's, else what its metric's name says (decode_tok_s)."""
    if s.data.get("unit"):
        return unit_name(str(s.data["unit"]))
    metric = str(s.data.get("metric") or "")
    if re.search(r"(?:tok|tokens)_(?:per_)?s$", metric):
        return "tok/s"
    if metric.endswith("_ms"):
        return "ms"
    return None


def fits(unit: str | None, s: Step) -> bool:
    """Whether a figure written in `unit` may state this result (a result of unknown unit may be any)."""
    return unit is None or record_unit(s) in (None, unit)


def _measure(s: Step) -> str | None:
    """throughput or latency: which way the comparison's metric goes."""
    better_higher = (s.data.get("comparison") or {}).get("higher_is_better")
    return None if better_higher is None else "throughput" if better_higher else "latency"


def _measure_named(line: str) -> str | None:
    lat, thr = bool(_LATENCY_WORDS.search(line)), bool(_THROUGHPUT_WORDS.search(line))
    return None if lat == thr else "latency" if lat else "throughput"


def _one_unit(steps: list[Step]) -> str:
    units = {record_unit(s) for s in steps}
    return (next(iter(units)) or "") if len(units) == 1 else ""


# --------------------------------------------------------------------------- reading the sentence


def figures(rd: Reading) -> Iterator[Finding]:
    line, rec = rd.line, rd.rec
    context = bool(_BENCH_CONTEXT.search(line)) or any(w in line for w in rec.bench_words())
    used: list[tuple[int, int]] = []

    def free(m: re.Match, group: str = "n") -> bool:
        return not any(a <= m.start(group) < b for a, b in used)

    for m in _ARROW.finditer(line):
        used.append(m.span())
        if (finding := _arrow_finding(m, rd)) is not None:
            yield finding
    labels = {label.lower(): label for label in rec.labels()}
    alternation = "|".join(re.escape(label) for label in sorted(labels.values(), key=len, reverse=True))
    # "before/after: 566.2/563.8 tok/s": each figure to its label.
    pair = rf"(?<![\w-])(?P<l1>{alternation})\s*/\s*(?P<l2>{alternation})(?![\w-])[^\d\n]{{0,24}}?" \
           rf"(?P<n>{N})\s*(?P<u1>{_UNIT})?\s*/\s*(?P<n2>{N})(?!\d|\.\d)\s*(?P<unit>{_UNIT})?"
    for m in re.finditer(pair, line, re.I):
        used.append(m.span())
        unit = m.group("unit") or m.group("u1")
        if not unit and not context:
            continue
        for label, n in ((m.group("l1"), m.group("n")), (m.group("l2"), m.group("n2"))):
            if (finding := _label_finding(labels[label.lower()], n, m.group(0), rd, m.start(), unit)) is not None:
                yield finding
    # "before 89.16", "after: 96.11 tok/s"
    for label in sorted(labels.values(), key=len, reverse=True):
        pattern = rf"(?<![\w-]){re.escape(label)}(?![\w-])(?:\s*(?::|=|\bis\b|\bwas\b|\bat\b|\bmedian\b))*\s*" \
                  rf"(?P<n>{N})(?!\d|\.\d)(?:\s*(?P<unit>{_UNIT}))?"
        for m in re.finditer(pattern, line, re.I):
            if not free(m):
                continue
            if not m.group("unit") and (not context or _NOT_A_FIGURE.match(line, m.end("n"))):
                continue
            used.append(m.span())
            if (finding := _label_finding(label, m.group("n"), m.group(0), rd, m.start(), m.group("unit"))):
                yield finding
    # "566.2 tok/s before", "from 566.2 tok/s before to 563.8 tok/s after"
    for m in re.finditer(rf"(?<![\w.,])(?P<n>{N})\s*(?P<unit>{_UNIT})\s+\(?(?P<label>{alternation})(?![\w-])", line,
                         re.I):
        if free(m):
            used.append(m.span())
            finding = _label_finding(labels[m.group("label").lower()], m.group("n"), m.group(0), rd, m.start(),
                                     m.group("unit"))
            if finding is not None:
                yield finding
    yield from _under_heading(rd, labels, alternation, free, used)
    yield from _changes(rd, context)


def _under_heading(rd: Reading, labels: dict[str, str], alternation: str, free, used) -> Iterator[Finding]:
    """"Before: gpu1 566.2 tok/s, gpu2 564.3 tok/s": a label followed by a colon names the figures after it,
    up to the next label."""
    line = rd.line
    mentions = [(m.start(), m.end(), m.group("label"), line[m.end():m.end() + 2].lstrip().startswith(":"))
                for m in re.finditer(rf"(?<![\w-])(?P<label>{alternation})(?![\w-])", line, re.I)]
    for m in _FIGURE.finditer(line):
        if not free(m):
            continue
        before = [x for x in mentions if x[1] <= m.start()]
        if before and before[-1][3]:
            used.append(m.span())
            finding = _label_finding(labels[before[-1][2].lower()], m.group("n"), m.group(0), rd, m.start(),
                                     m.group("unit"))
            if finding is not None:
                yield finding


def _names_labels(line: str, rec: Record) -> bool:
    named = [label for label in rec.call_labels() if re.search(rf"(?<![\w-]){re.escape(label)}(?![\w-])", line, re.I)]
    return len(named) >= 2


# --------------------------------------------------------------------------- a figure under a label


def _measured(s: Step, several: bool) -> str:
    """`96.11 (median of 3 runs, turn 5, call 1)`; with the unit and host where the run has several hosts."""
    where = f"median of {len(s.data.get('values') or [])} runs, {s.where}"
    if not several:
        return f"{num(median(s))} ({where})"
    unit = record_unit(s)
    return f"{num(median(s))}{' ' + unit if unit else ''} on {s.host} ({where})"


def _latest_per_host(steps: list[Step]) -> list[Step]:
    last: dict[str | None, Step] = {}
    for s in steps:
        last[s.host] = s
    return list(last.values())


def _label_finding(label: str, n: str, quote: str, rd: Reading, pos: int, claimed_unit: str | None
                   ) -> Finding | None:
    rec, host = rd.rec, rd.host(pos)
    unit = unit_name(claimed_unit)
    results = [s for s in rec.benches if s.data.get("label") == label]
    fitting = [s for s in results if fits(unit, s)]
    if results and not fitting:
        return None  # a figure in another unit than this label's speaks of something else
    shown = unit or _one_unit(fitting) or _one_unit(rec.benches)
    says = f"the model says {n}{' ' + shown if shown else ''} " + (f"for {host}'s {label}" if host else label)
    mine = [s for s in fitting if host is None or s.host == host]
    if not mine:
        if fitting:  # measured, but on other hosts: never this host's figure
            others = ", ".join(dict.fromkeys(str(s.host) for s in fitting))
            return Finding("throughput", quote, says, f"no benchmark labelled {label} finished on {host} "
                           f"(it finished on {others})", False)
        calls = rec.at(host).bench_calls
        tried = [s for s in calls if ((s.data or {}).get("label") or arg(s, "label")) == label]
        done = rec.at(host).benches
        why = ("; ".join(outcome(s) for s in tried) if tried else
               "no benchmark finished in this session" if not done else
               "labels measured: " + ", ".join(sorted({str(s.data.get('label')) for s in done})))
        return Finding("throughput", quote, says, f"no benchmark labelled {label} finished"
                       + (f" on {host}" if host else "") + f" ({why})", False)
    match = next((s for s in mine if close(n, median(s))), None)
    shown_runs = [match] if match else _latest_per_host(mine)
    record = "measured " + ", ".join(_measured(s, rec.several_hosts) for s in shown_runs)
    return Finding("throughput", quote, says, record, match is not None)


# --------------------------------------------------------------------------- comparisons


def _baseline(rec: Record, s: Step) -> Step | None:
    """The result a comparison was made with: the latest of its baseline label before it, on its host."""
    c = s.data["comparison"]
    earlier = rec.benches[: rec.benches.index(s)]
    return next((b for b in reversed(earlier) if b.data.get("label") == c.get("baseline_label") and b.host == s.host),
                None)


def _medians(rec: Record, s: Step) -> tuple[float | None, float | None]:
    """(baseline median, median) of a comparison, from the recorded values where both are at hand."""
    base = _baseline(rec, s)
    return (median(base) if base else s.data["comparison"].get("baseline_median")), median(s)


def _compared(rec: Record, s: Step) -> str:
    base, med = _medians(rec, s)
    c, unit = s.data["comparison"], record_unit(s)
    return (f"{s.data.get('label')} {num(med)} vs {c.get('baseline_label')} {num(base)}"
            f"{' ' + unit if unit else ''}{' on ' + str(s.host) if rec.several_hosts else ''}, {s.where}")


def _no_comparison(rec: Record, host: str | None, unit: str | None) -> str:
    what = f"no before/after comparison{' in ' + unit if unit else ''} finished"
    return f"{what} on {host}" if host and rec.comparisons else f"{what} in this session"


def _arrow_finding(m: re.Match, rd: Reading) -> Finding | None:
    rec, host, unit = rd.rec, rd.host(m.start()), unit_name(m.group("unit"))
    a, b = m.group("a"), m.group("b")
    says = f"the model says {a} -> {b} {m.group('unit')}" + (f" on {host}" if host else "")
    if not rec.comparisons:
        return Finding("throughput", m.group(0), says, _no_comparison(rec, host, None), False)
    fitting = [s for s in rec.comparisons if fits(unit, s)]
    if not fitting:
        return None  # a pair in a unit no comparison measured: another thing than this session's benchmarks
    mine = [s for s in fitting if host is None or s.host == host]
    if not mine:
        return Finding("throughput", m.group(0), says, _no_comparison(rec, host, unit), False)
    match = next((s for s in mine if close(a, _medians(rec, s)[0]) and close(b, _medians(rec, s)[1])), None)
    s = match or mine[-1]
    base, med = _medians(rec, s)
    return Finding("throughput", m.group(0), says,
                   f"measured {num(base)} -> {num(med)} ({s.data['comparison'].get('baseline_label')} -> "
                   f"{s.data.get('label')}{', ' + str(s.host) if rec.several_hosts else ''}, {s.where})",
                   match is not None)


def _changes(rd: Reading, context: bool) -> Iterator[Finding]:
    # A change speaks of this session's benchmarks in a sentence about them or naming two of their labels
    # ("after is 50% faster than before"); "after the update, kernels are 20% faster" is left alone.
    line = rd.line
    if not (context or _names_labels(line, rd.rec)):
        return
    found: list[Finding | None] = []
    for m in _PERCENT.finditer(line):
        word = (m.group("word") or "").lower()
        if word in _IMPROVES or ((word or m.group("sign")) and context):
            found.append(_change_finding(m.group(0), m.start(), rd, percent=m.group("n"), sign=m.group("sign"),
                                         word=word))
    for m in _TIMES.finditer(line):
        word = (m.group("word") or m.group("word2") or "").lower()
        found.append(_change_finding(m.group(0), m.start(), rd, ratio=m.group("n") or m.group("n2"), word=word))
    if context:
        for m in _RATIO.finditer(line):
            found.append(_change_finding(m.group(0), m.start(), rd, ratio=m.group("n")))
    yield from (f for f in found if f is not None)


def _change_finding(quote: str, pos: int, rd: Reading, percent: str | None = None, ratio: str | None = None,
                    sign: str | None = None, word: str = "") -> Finding | None:
    rec, line, host = rd.rec, rd.line, rd.host(pos)
    says = f"the model says {quote.strip()}" + (f" on {host}" if host else "")
    mine = [s for s in rec.comparisons if host is None or s.host == host]
    if not mine:
        tried = [s for s in rec.at(host).bench_calls if not s.succeeded]
        why = f" ({'; '.join(outcome(s) for s in tried)})" if tried else ""
        return Finding("change", quote, says, _no_comparison(rec, host, None) + why, False)
    # A change of a latency is one of a latency comparison; one the words do not say may be either.
    measure = _measure_named(line)
    mine = [s for s in mine if measure is None or _measure(s) in (None, measure)]
    if not mine:
        return None
    # A line that names both labels of a comparison speaks of that comparison.
    named = [s for s in mine
             if all(re.search(rf"(?<![\w-]){re.escape(str(x))}(?![\w-])", line)
                    for x in (s.data.get("label"), s.data["comparison"].get("baseline_label")))]
    candidates = named or mine

    def agrees(s: Step) -> bool:
        base, med = _medians(rec, s)
        if base in (None, 0) or med is None:
            return False
        measured_ratio = med / base
        if ratio is not None:
            slower = word in ("slower",)
            return close(ratio, 1 / measured_ratio if slower else measured_ratio, units=1)
        change = (measured_ratio - 1) * 100
        if word in _IMPROVES:
            improved = (change > 0) == (s.data["comparison"].get("higher_is_better") is not False)
            if change != 0 and improved != _IMPROVES[word]:
                return False
        elif word in _RISES or sign:
            rises = _RISES.get(word, sign != "-" and sign != "−")
            if (change > 0) != rises and change != 0:
                return False
        return close(percent, abs(change), units=1)

    match = next((s for s in candidates if agrees(s)), None)
    s = match or candidates[-1]
    base, med = _medians(rec, s)
    if base in (None, 0) or med is None:
        return Finding("change", quote, says, f"the comparison of {s.where} has no ratio", False)
    measured = f"ratio {med / base:.4f}" if ratio is not None else f"{(med / base - 1) * 100:+.2f}%"
    return Finding("change", quote, says, f"measured {measured} ({_compared(rec, s)})", match is not None)
