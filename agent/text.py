"""Text cut to a width for a person to read: at a word's end, with an ellipsis that says something was cut."""

from __future__ import annotations

ELLIPSIS = "…"


def clip(text: str, width: int) -> str:
    """`text` if it fits in `width` characters; else its start, ended at the last whole word that fits, and `…`
    (a word longer than the whole width is cut inside, still with the mark)."""
    if len(text) <= width:
        return text
    room = max(1, width - 1)  # one character for the mark
    end = room if text[room] == " " else text.rfind(" ", 0, room)  # the end of the last word that fits whole
    cut = text[:end] if end >= width // 2 else text[:room]  # one long word (a path, a URL): cut inside it
    return cut.rstrip(" ,;:") + ELLIPSIS
