"""The report in Markdown: the document's blocks as GitHub-flavoured Markdown, written beside the transcript.

Text from the transcript is kept inert: special characters are escaped, code spans and
fenced blocks grow their fences past any backticks inside, and pipes are escaped in table
cells. `write_report` puts `<transcript stem>.report.md` next to the transcript it reads.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent.errors import RecordWriteError
from agent.record.transcript import write_failure_line
from agent.report.build import build_report
from agent.report.data import Report
from agent.report.document import (Block, Bullets, Code, Facts, Heading, Inline, Mark, Para, Steps, Table, document,
                                   inert, secs)

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
    return inert("\n\n".join(out)) + "\n"  # `cat report.md` in a terminal runs no sequence of a host's


def report_path(transcript: Path) -> Path:
    transcript = Path(transcript)
    return transcript.with_name(transcript.stem + ".report.md")


def write_report(transcript: Path, report: Report | None = None) -> Path:
    """Write `<transcript stem>.report.md` beside the transcript and return its path; `report` is the
    one already built from that transcript, where the caller has it (reading it again costs as long as
    the session was)."""
    out = report_path(transcript)
    text = render_markdown(report if report is not None else build_report(Path(transcript)))
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as e:  # a full disk under the report is one line, as under the transcript
        raise RecordWriteError(write_failure_line(f"the report {out}", out, e)) from None
    return out
