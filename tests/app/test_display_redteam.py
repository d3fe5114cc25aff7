"""A blind red team's display attacks (tests/data/display/redteam-2026-12-05.jsonl, 189 lines written by someone
who had not read the views): each one as a model's words, a command's output and a step shown for approval,
through the terminal view, plain lines and both reports. Nothing in it may reach a screen or a page as what
it is: no escape sequence but the view's own colours, no C1 control, no bidi or invisible character, no lone
surrogate; and rich never reads it as markup."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from agent.budget import Budget
from agent.loop import Session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter
from agent.report import build_report, render_html, render_markdown
from agent.safety.policy import ApprovalAnswer, SafetyPolicy
from app.ui import PlainPrinter, PlainView, TerminalView
from rich.console import Console
from tools.base import Registry

from fake_tools import all_fake_tools

CORPUS = Path(__file__).resolve().parents[1] / "data" / "display" / "redteam-2026-12-05.jsonl"
ATTACKS = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]

# What may not be on a screen or a page as it is: C0 but \n and \t, DEL, C1, the invisible and bidi characters,
# lone surrogates, tag characters.
HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069"
                    "\ud800-\udfff\ufeff\U000e0000-\U000e007f]")
VIEW_STYLE = re.compile(r"\x1b\[[0-9;]*m")  # the terminal view's own colours (SGR), nothing else


class Yes:
    def ask(self, request):
        return ApprovalAnswer.YES_ONCE


def _session(texts: list[str], where: Path) -> tuple[list[dict], Path]:
    """One session in which every text is said by the model, printed by a command and shown for approval."""
    turns = [turn(t, calls=[("echo", {"text": t, "host": "h1"}), ("fake_backup", {"host": "h1"}),
                            ("change", {"host": "h1", "what": t})]) for t in texts]
    turns.append(turn("\n\n".join(texts)))
    seen: list[dict] = []
    path = where / "t.jsonl"
    session = Session(model=ScriptedModel(turns), registry=Registry(all_fake_tools()),
                      gate=SafetyPolicy(scope={"h1"}, mode="interactive", approver=Yes()),
                      transcript=TranscriptWriter(path), system_prompt="test",
                      budget=Budget(turns=len(turns) + 5), listeners=[seen.append])
    session.send("show me")
    session.close("done", "test over")
    return seen, path


@pytest.fixture(scope="module")
def events(tmp_path_factory) -> list[dict]:
    return _session([a["text"] for a in ATTACKS], tmp_path_factory.mktemp("display"))[0]


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """The Markdown and HTML reports of the attacks' session, and of the same session with plain words."""
    out = {}
    for name, texts in (("hostile", [a["text"] for a in ATTACKS]), ("plain", [f"line {i}" for i in range(len(ATTACKS))])):
        _, path = _session(texts, tmp_path_factory.mktemp(name))
        report = build_report(path)
        out[name] = (render_markdown(report), render_html(report, path))
    return out


def _named(text: str) -> list[str]:
    return sorted({f"U+{ord(c):04X}" for c in HIDDEN.findall(text)})


def test_the_corpus_is_the_red_teams_and_says_what_each_line_attempts():
    assert len(ATTACKS) == 189 and all(a["id"] and a["text"] and a["goal"] for a in ATTACKS)


def test_on_the_terminal_only_the_views_own_colours_are_sequences(events):
    console = Console(width=120, record=True, force_terminal=True, file=io.StringIO(), color_system="truecolor")
    view = TerminalView(console)
    for ev in events[:-1]:
        view(ev)
    raw = console.file.getvalue()
    rest = VIEW_STYLE.sub("", raw)
    assert "\x1b" not in rest, repr(rest[max(0, rest.index("\x1b") - 80):rest.index("\x1b") + 80])
    assert not _named(rest), _named(rest)
    # rich read none of it as markup: the red team's own brackets are on the screen as written
    assert "[bold green]GOAL MET[/bold green]" in console.export_text() or not any(
        "[bold green]GOAL MET[/bold green]" in a["text"] for a in ATTACKS)


@pytest.mark.parametrize("make", [lambda out: PlainPrinter(out=out, full_text=True), lambda out: PlainView(out=out)],
                         ids=["plain-printer", "plain-view"])
def test_in_plain_lines_nothing_is_a_sequence(events, make):
    out = io.StringIO()
    printer = make(out)
    for ev in events[:-1]:
        printer(ev)
    text = out.getvalue()
    assert "\x1b" not in text and not _named(text), _named(text)


def test_in_the_markdown_and_html_reports_nothing_is_a_sequence_or_a_tag(pages):
    from html.parser import HTMLParser

    for page in pages["hostile"]:
        assert "\x1b" not in page and not _named(page), _named(page)

    def tags(html: str) -> dict[str, int]:
        counts: dict[str, int] = {}

        class Tags(HTMLParser):
            def handle_starttag(self, tag, attrs):
                counts[tag] = counts.get(tag, 0) + 1

        Tags().feed(html)
        return counts

    hostile, plain = tags(pages["hostile"][1]), tags(pages["plain"][1])
    for tag in ("script", "img", "iframe", "a", "object", "embed", "style", "link", "meta", "form", "input", "svg"):
        assert hostile.get(tag, 0) == plain.get(tag, 0), (tag, hostile.get(tag), plain.get(tag))
    # The Markdown as a CommonMark reader takes it (markdown-it, the parser rich uses): the same headings, and
    # no HTML, link or image but the report's own.
    hostile_md = _markdown_parts(pages["hostile"][0])
    # the only heading of its own: its lone surrogates made malformed calls, which the report lists
    hostile_md["headings"].remove("Failed steps")
    assert hostile_md == _markdown_parts(pages["plain"][0])


def _markdown_parts(md: str) -> dict[str, list[str]]:
    from markdown_it import MarkdownIt

    parts: dict[str, list[str]] = {"headings": [], "html": [], "links": [], "images": []}
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            parts["headings"].append(tokens[i + 1].content)
        elif tok.type == "html_block":
            parts["html"].append(tok.content)
        for child in tok.children or []:
            if child.type == "html_inline":
                parts["html"].append(child.content)
            elif child.type == "link_open":
                parts["links"].append(child.attrGet("href"))
            elif child.type == "image":
                parts["images"].append(child.attrGet("src"))
    parts["headings"] = [h for h in parts["headings"] if not h.startswith("Session report")]  # its title: the request
    return parts
