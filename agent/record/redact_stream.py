"""`StreamRedactor`: text that arrives in pieces, released a line at a time, redacted, with the
state a key block or a wrapped token needs across lines."""

from __future__ import annotations

import re
from typing import Protocol

from agent.record.redact_patterns import (
    REDACTED, _B64_ONLY, _BLOCK_LINE, _ECHO_ARGUMENT, _ENDS_IN_BASE64, _KEY_BODY_LINE, _KEY_MARK, _LAST_WORD,
    _PEM_END, _PUTTY_LAST,
)
from agent.record.redact_wrapped import _Wrap


class TextRedactor(Protocol):
    """What a stream needs of its redactor (agent.record.redact.Redactor): whole text redacted."""

    def text(self, s: str) -> str: ...


class StreamRedactor:
    """Redacts text that arrives in pieces split anywhere: a command's live output, a model's stream.

    `feed` gives back the whole lines it completed, redacted; a line is what a terminal leaves of
    it, the part after its last carriage return. A key block spans lines: the lines that go on one
    opened earlier are dropped, and lines of base64 are held back until a line that is not base64
    releases them or an END line shows they were the tail of a key whose BEGIN line was never seen.
    A line that ends inside a token (a terminal wrapped it) is held back with the lines that go on
    with it. Lines held back are redacted together, as the same text whole would be.
    `preview` is the line still arriving, as far as it is safe to show: redacted, and without its
    last word while that may be a secret still coming in.
    """

    MAX_LINE = 16_384  # a line without a newline is broken here (at a space if it has one)
    MAX_HELD = 400  # base64 lines held back at most (a PGP key with subkeys is ~200): more are not a key
    HOLD = 6  # a last word this long may be the start of a secret: shown once it has ended

    def __init__(self, redactor: TextRedactor):
        self.redactor = redactor
        self.partial = ""
        self._block: str | None = None  # "pem" or "putty" while inside a key block
        self._held: list[str] = []  # base64 lines that may be the tail of a key, lines of a wrapped token
        self._wrap: _Wrap | None = None  # the last held line ends inside this token

    def feed(self, text: str) -> list[str]:
        pieces = (self.partial + text).split("\n")
        self.partial = _overwritten_dropped(pieces.pop())
        if len(self.partial) > self.MAX_LINE:
            cut = self.partial.rfind(" ", 0, self.MAX_LINE) + 1 or self.MAX_LINE
            pieces.append(self.partial[:cut])
            self.partial = self.partial[cut:]
        out: list[str] = []
        for line in pieces:
            self._line(_shown(line), out)
        return out

    def preview(self) -> str:
        if self._block is not None or self._wrap is not None or not self.partial:
            return ""  # inside a key block, or the line may be the rest of a token the last one began
        line = _shown(self.partial)
        opening = _block_opening(line, ends_line=False)  # what follows it is still arriving
        if opening is not None:
            return self.redactor.text(line[:opening.start()]) + REDACTED
        shown = self.redactor.text(line)
        echo = _ECHO_ARGUMENT.search(shown)
        if echo is not None:  # what it echoes is a password if a `| sudo -S` is still to come
            shown = shown[:echo.end()]
        last = _LAST_WORD.search(shown)
        if last is not None and len(last.group()) >= self.HOLD:
            return shown[:last.start()]
        return shown

    def finish(self) -> list[str]:
        """The end of the stream: the line still open, whole, and any lines held back."""
        rest, self.partial = _shown(self.partial), ""
        out: list[str] = []
        if rest:
            self._line(rest, out)
        self._release(out)
        self._block = None
        self._wrap = None
        return out

    def _line(self, line: str, out: list[str]) -> None:
        if self._block is not None:
            if self._block == "pem" and (end := _PEM_END.search(line)) is not None:
                self._block = None
                rest = self.redactor.text(line[end.end():])
                if rest.strip():
                    out.append(REDACTED + rest)
                return
            if _BLOCK_LINE.fullmatch(line) or _ENDS_IN_BASE64.search(line):
                if self._block == "putty" and _PUTTY_LAST.match(line):
                    self._block = None
                return
            self._block = None  # a block cut off: this line is ordinary output again
        if self._wrap is not None:
            wrap, self._wrap = self._wrap, None
            if wrap.continued_by(line):
                self._held.append(line)
                if wrap.goes_on_after(line) and len(self._held) < self.MAX_HELD:
                    self._wrap = wrap
                else:
                    self._release(out)
                return
            self._release(out)  # the token ended with its line after all
        if self._held or _KEY_BODY_LINE.fullmatch(line):
            if _B64_ONLY.fullmatch(line) and len(self._held) < self.MAX_HELD:
                self._held.append(line)
                self._wrap = _Wrap.at_end_of(line)  # a JWT's first line can be base64 too
                return
            end = _PEM_END.search(line)
            if end is not None:  # the held lines were a key's: they go with its END
                self._held.clear()
                out.append(self.redactor.text(line[:end.start()]) + REDACTED + self.redactor.text(line[end.end():]))
                return
            self._release(out)
        self._wrap = _Wrap.at_end_of(line)
        if self._wrap is not None:
            self._held.append(line)
            return
        opening = _block_opening(line)
        if opening is None:
            out.append(self.redactor.text(line))
            return
        self._block = "pem" if opening.group(1) == "BEGIN" else "putty"
        out.append(self.redactor.text(line[:opening.start()]) + REDACTED)

    def _release(self, out: list[str]) -> None:
        if self._held:
            out.extend(self.redactor.text("\n".join(self._held)).split("\n"))
            self._held.clear()


def _shown(line: str) -> str:
    """What a terminal leaves of a line: the part after its last carriage return (\\r\\n ends it whole)."""
    line = line.removesuffix("\r")
    return line.rsplit("\r", 1)[-1] if "\r" in line else line


def _overwritten_dropped(partial: str) -> str:
    """A line still arriving, less what a carriage return has since sent the cursor back over."""
    cut = partial.rfind("\r", 0, len(partial) - 1)
    return partial if cut < 0 else partial[cut + 1:]


def _block_opening(line: str, ends_line: bool = True) -> re.Match | None:
    """The first line of a key block that goes on below this line, if one begins on it: a BEGIN line
    that ends the line (one with more after it is prose, or a whole block on one line), or PuTTY's."""
    if "PRIVATE KEY" not in line and "PuTTY-User-Key-File-" not in line and "Static key" not in line:
        return None
    last = None
    for last in _KEY_MARK.finditer(line):
        pass
    if last is None or last.group(1) == "END":
        return None
    if ends_line and last.group(1) == "BEGIN" and line[last.end():].strip(" \t\"'"):
        return None
    return last
