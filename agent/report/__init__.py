"""Reports of a session, built from its transcript alone: Markdown beside it, or one HTML page.

    report = build_report(Path("session.jsonl"))   # one pass over the events
    render_markdown(report)                        # the report `run` and `chat` leave behind
    render_html(report, Path("session.html"))      # timeline, folded outputs, benchmark chart
    check_claims(Path("session.jsonl"))            # the final answer's claims against the record

Every figure comes from an event of the transcript (or from the backup copy it names), and
each statement cites the step it comes from ("turn 3, call 1"). What the transcript does not
hold is reported as missing, never guessed. The model's final answer is shown with each claim
it makes that the record can check (a figure, a version, an install) marked as confirmed or as
differing from what the record holds. Text from the transcript is untrusted (command
output, web pages, the model's words): the Markdown keeps it in code spans or escapes it, the
HTML escapes all of it and forbids scripts outright.

The layers, each importing only those above it in this list:

    data.py       the dataclasses a report is made of (Step, Backup, PackageDiff, Report, ...)
    build.py      transcript -> Report: build_report(path)
    claims/       Report -> the final answer's claims, confirmed or differing: check_report, check_claims(path)
    rollback.py   Report -> the rollback commands (the packages' are restore_backup's own plan)
    document.py   Report -> format-neutral blocks (Heading, Para, Table, Block, Chart, Steps, ...)
    markdown.py   blocks -> Markdown; write_report puts it beside the transcript
    chart.py      benchmark results -> an SVG bar chart
    html.py       blocks -> one self-contained HTML page, with the chart and the timeline
"""

from __future__ import annotations

from agent.report.build import build_report
from agent.report.chart import CHART_COLOURS
from agent.report.claims import ClaimCheck, Finding, check_claims, check_report
from agent.report.html import render_html
from agent.report.markdown import render_markdown, report_path, write_report

__all__ = ["CHART_COLOURS", "ClaimCheck", "Finding", "build_report", "check_claims", "check_report", "render_html",
           "render_markdown", "report_path", "write_report"]
