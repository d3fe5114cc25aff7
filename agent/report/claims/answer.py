"""Reading the answer: its sentences (a table's rows among them) and which host each part of one speaks of.

A sentence keeps a figure and the words that say what it is together, and a claim of one sentence does
not borrow the context of the next. A Markdown table row is read as the sentence its header makes of it:
`| gpu1 | 566.16 | 563.84 |` under `| host | before (tok/s) | after (tok/s) |` reads
"host gpu1; before 566.16 tok/s; after 563.84 tok/s".
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterator

from agent.report.claims.record import Record

_SENTENCE_END = re.compile(r"(?<=[.!?])[ \t]+")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_HEADER_UNIT = re.compile(r"\s*\(([^)]*)\)\s*$")
_BARE_FIGURE = re.compile(r"[+\-−]?\d[\d,]*(?:\.\d+)?")
# A host named after a figure by these words is the host of that figure ("566 tok/s on gpu1").
_AFTER_FIGURE = re.compile(r"\b(?:on|at|for|of|from|in)\s+(?:the\s+)?(?:host\s+|node\s+)?$", re.I)


def sentences(text: str, hosts: list[str]) -> Iterator[tuple[int, str]]:
    """(offset in the answer, text) of each sentence, each table row as its header reads it."""
    lines: list[tuple[int, str]] = []
    offset = 0
    for line in text.split("\n"):
        lines.append((offset, line))
        offset += len(line) + 1
    i = 0
    while i < len(lines):
        start, line = lines[i]
        if _is_row(line) and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1][1].strip()):
            header = _cells(line)
            i += 2
            while i < len(lines) and _is_row(lines[i][1]):
                yield lines[i][0], _row_sentence(header, _cells(lines[i][1]), hosts)
                i += 1
            continue
        at = 0
        for m in _SENTENCE_END.finditer(line):
            yield start + at, line[at:m.start()]
            at = m.end()
        yield start + at, line[at:]
        i += 1


def _is_row(line: str) -> bool:
    return line.strip().startswith("|")


def _cells(line: str) -> list[str]:
    return [c.strip().strip("*").strip() for c in line.strip().strip("|").split("|")]


def _row_sentence(header: list[str], row: list[str], hosts: list[str]) -> str:
    """A row with its column names: "host gpu1; before 566.16 tok/s" (or, when the columns are hosts,
    "before: gpu1 566.16 tok/s, gpu2 564.31 tok/s")."""
    columns = []
    for name in header:
        m = _HEADER_UNIT.search(name)
        columns.append((name[: m.start()].strip(), m.group(1).strip()) if m else (name, ""))
    parts = []
    for (name, unit), cell in zip(columns, row):
        figure = f"{cell} {unit}" if unit and _BARE_FIGURE.fullmatch(cell) else cell
        parts.append((name, figure))
    if len(parts) > 1 and all(name in hosts for name, _ in parts[1:]):
        m = _HEADER_UNIT.search(row[0])  # "before (tok/s)": the row names the unit of its figures
        what, unit = (row[0][: m.start()].strip(), m.group(1).strip()) if m else (row[0], "")
        return f"{what}: " + ", ".join(f"{name} {figure}{' ' + unit if unit and _BARE_FIGURE.fullmatch(figure) else ''}"
                                       for name, figure in parts[1:])
    return "; ".join(f"{name} {figure}".strip() for name, figure in parts)


@dataclass(frozen=True)
class Scope:
    """Which host each stretch of a sentence speaks of: `spans` are (start, host), in order."""

    starts: tuple[int, ...] = ()
    hosts: tuple[str | None, ...] = ()

    def host_at(self, pos: int) -> str | None:
        i = bisect_right(self.starts, pos) - 1
        return self.hosts[i] if i >= 0 else None

    @property
    def named(self) -> set[str]:
        return {h for h in self.hosts if h}


def scope(sentence: str, hosts: list[str]) -> Scope:
    """The hosts a sentence names, each over the words it governs.

    A host opens a stretch that runs to the next host named ("gpu1: before 89, after 96; gpu2: ..."), unless
    it is named after a figure that no host holds yet, by "on", "at", "for"...: then it is that figure's host
    ("89 tok/s on gpu1 and 88 tok/s on gpu2"). Words before the first host named speak of none.
    """
    if len(hosts) < 2:
        return Scope()
    names = "|".join(re.escape(h) for h in sorted(hosts, key=len, reverse=True))
    starts: list[int] = [0]
    owners: list[str | None] = [None]
    open_at = 0  # where the words since the last host named begin
    for m in re.finditer(rf"(?<![\w.-])(?:{names})(?![\w-])", sentence):
        host = m.group(0)
        since = sentence[open_at:m.start()]
        if owners[-1] is None and re.search(r"\d", since) and _AFTER_FIGURE.search(since):
            owners[-1] = host  # the stretch before it was this host's; the next one is no host's yet
            starts.append(m.end())
            owners.append(None)
        else:
            starts.append(m.start())
            owners.append(host)
        open_at = m.end()
    if len({h for h in owners if h}) == 1:  # a sentence about one host speaks of it throughout
        return Scope((0,), (next(h for h in owners if h),))
    return Scope(tuple(starts), tuple(owners))


@dataclass(frozen=True)
class Reading:
    """One sentence being checked: its words, the run's record, and which host each stretch speaks of."""

    line: str
    rec: Record
    scope: Scope

    def host(self, pos: int) -> str | None:
        """The host the words at `pos` speak of, None when they name none (or the run has one host)."""
        return self.scope.host_at(pos) if self.rec.several_hosts else None

    def at(self, pos: int) -> Record:
        """The record those words are checked against: their host's, else the whole run's."""
        return self.rec.at(self.host(pos))

    def conditional(self, pos: int) -> bool:
        """Whether the words just before `pos` make what follows a condition ("If torch moved to cu130 while ...",
        "once the toolkit is installed"): what would follow, not the state the session left, so no claim."""
        return bool(HYPOTHETICAL.search(self.line[max(0, pos - 32):pos]))


# Words of the answer that more than one kind of claim reads.
VERSION = r"(?:\d+(?:\.\d+)+(?:(?:a|b|rc|\.post|\.dev)\d+)?(?:\+[A-Za-z0-9.]*[A-Za-z0-9])?|\+?cu\d{2,3}\b)"
NEGATED = re.compile(r"(?:\b(?:not|never|nothing|no|none)\b|n't)\s+(?:\w+\s+){0,2}$", re.I)  # just before a claim
# Words just before a claim that make it a condition (Reading.conditional)
HYPOTHETICAL = re.compile(r"\b(?:if|unless|once|when|whether|until|were)\s+(?:\w+\s+){0,3}$", re.I)
