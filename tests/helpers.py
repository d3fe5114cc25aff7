"""Small readers the tests share."""

from __future__ import annotations

import re
from pathlib import Path

from agent.record.transcript import iter_events


def events(path: Path, type_: str | None = None) -> list[dict]:
    """A transcript's events, or those of one type."""
    return [e for e in iter_events(path) if type_ is None or e["type"] == type_]


def flat(text: str) -> str:
    """Screen text without spaces, line breaks and box edges: what survives folding in a narrow terminal."""
    return re.sub(r"[\s│╭╮╰╯─]+", "", text)
