"""Tokens a terminal wrapped (or a narrow pane cut) at the end of a line, their rest beginning
the next: found in whole text (`_wrapped_tokens`) and, line by line, in a stream (`_Wrap`)."""

from __future__ import annotations

import re

from agent.record.redact_patterns import (
    REDACTED, _ALNUM_RUN, _JWT, _JWT_HEADERS, _LONGEST_JWT, _TOKEN_CHARS, _TOKEN_PIECE, _UNDERSCORE_AT_BREAK,
    _UNDERSCORE_PREFIXES, _WRAPPED_FIXED, _WRAP_AT_BREAK, _WRAP_AT_END,
)
from agent.record.redact_rules import _is_word_char


def _wrap_kind(run: str) -> str | None:
    """What token `run` is, if it is one cut before its end: "jwt", or its prefix in _WRAPPED_FIXED.
    None if it may be whole (a JWT with its signature begun, a token of its full length)."""
    if run.startswith("eyJ"):
        return "jwt" if run.startswith(_JWT_HEADERS) and run.count(".") <= 1 else None
    for prefix, (length, chars) in _WRAPPED_FIXED.items():
        if run.startswith(prefix):
            body = run[len(prefix):]
            return prefix if 4 <= len(body) < length and re.fullmatch(f"[{chars}]*", body) else None
    return None


def _wrapped_tokens(s: str) -> str:
    if "\n" not in s:
        return s
    pieces: list[str] = []
    pos = 0
    runs = [m.span() for regex in _WRAP_AT_BREAK for m in regex.finditer(s)]
    has_prefix = any(prefix in s for prefix in _UNDERSCORE_PREFIXES)  # found faster than underscores are
    for m in _UNDERSCORE_AT_BREAK.finditer(s) if has_prefix else ():  # hf_, ghp_, npm_...: one ends here
        prefix = next((p for p in _UNDERSCORE_PREFIXES if s.startswith(p, m.end() - len(p))), None)
        if prefix is not None:
            runs.append((m.end() - len(prefix), _ALNUM_RUN.match(s, m.end()).end()))
    looked = 0  # how far the lines of a token tried already went: a line among them starts none
    for start, end in sorted(runs):
        if start < max(pos, looked) or (start and _is_word_char(s[start - 1])):
            continue
        spans, looked = _wrapped_spans(s, start, end)
        for piece_start, piece_end in spans:
            pieces += (s[pos:piece_start], REDACTED)
            pos = piece_end
    if not pieces:
        return s
    pieces.append(s[pos:])
    return "".join(pieces)


def _wrapped_spans(s: str, start: int, end: int) -> tuple[list[tuple[int, int]], int]:
    """The pieces of a token that begins at `start`, ends its line at `end` and goes on in the next
    lines (none if it does not), and how far the lines looked at went."""
    run = s[start:end]
    kind = _wrap_kind(run)
    if kind is None:
        return [], end
    next_line = s.index("\n", end) + 1
    if kind != "jwt":
        length, chars = _WRAPPED_FIXED[kind]
        rest = re.compile(f"[{chars}]{{{length - len(run) + len(kind)}}}(?![{chars}])").match(s, next_line)
        return ([(start, end), rest.span()] if rest else []), next_line
    width = end - (s.rfind("\n", 0, start) + 1)
    spans, joined, at = [(start, end)], run, next_line
    while at <= len(s) and len(joined) < _LONGEST_JWT:
        line_end = s.find("\n", at)
        line_end = len(s) if line_end < 0 else line_end
        line = s[at:line_end].removesuffix("\r")
        more = _TOKEN_PIECE.match(line) if _may_continue_token(line) else None
        if more is None:
            break
        spans.append((at, at + more.end()))
        joined += more.group()
        if more.end() != len(line) or len(line) != width:
            break
        at = line_end + 1
    looked = spans[-1][1]
    jwt = _JWT.match(joined)
    if jwt is None or jwt.end() <= len(run):
        return [], looked
    out, used = [], 0
    for start, end in spans:
        take = min(end - start, jwt.end() - used)
        if take <= 0:
            break
        out.append((start, start + take))
        used += take
    return out, looked


def _may_continue_token(line: str) -> bool:
    # A key's BEGIN line starts with dashes too: it never goes on with a token.
    return _TOKEN_PIECE.match(line) is not None and not line.startswith("-----")


class _Wrap:
    """A token a line ended in the middle of, as a stream meets it: which lines go on with it."""

    def __init__(self, kind: str, width: int):
        self.kind, self.width = kind, width

    @classmethod
    def at_end_of(cls, line: str) -> _Wrap | None:
        if "_" not in line and "eyJ" not in line and "glpat-" not in line:  # every prefix has one of them
            return None
        word = len(line)  # the token is in the line's last word: only that is searched
        while word and line[word - 1] in _TOKEN_CHARS:
            word -= 1
        while (m := _WRAP_AT_END.search(line, word)) is not None:
            if not (m.start() and _is_word_char(line[m.start() - 1])) and (kind := _wrap_kind(m.group())):
                return cls(kind, len(line))
            word = m.start() + 1
        return None

    def continued_by(self, line: str) -> bool:
        return _may_continue_token(line)

    def goes_on_after(self, line: str) -> bool:
        return self.kind == "jwt" and len(line) == self.width and _TOKEN_PIECE.fullmatch(line) is not None
