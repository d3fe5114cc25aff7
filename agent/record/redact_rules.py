"""The redactor's rules: each takes a text and gives it back with what one kind of pattern
(redact_patterns.py) found redacted, less what the match shows is no secret (a figure, a placeholder,
a reference to a secret kept elsewhere, prose)."""

from __future__ import annotations

import base64
import re

from agent.record.redact_patterns import (
    REDACTED, _ANSI_BEFORE, _ASSIGNMENT_ANYWHERE, _ASSIGNMENT_AT, _AUTHORIZATION, _AWS_SECRET, _B64_BEFORE, _BEARER,
    _COMMAND_JOIN, _COOKIE_HEADER, _COOKIE_NEXT, _COOKIE_PAIR, _CRYPT_HASH, _FIGURE, _HTPASSWD, _INI_PASSWORD,
    _JSON_ENV_PAIR, _JSON_SECRET, _KEY_MARK, _LINE_REST_BLANK, _LOGIN, _MAILGUN, _MAX_BLOCK, _NAME_CHARS,
    _NAME_CHAR_SET, _NEEDS_LOGIN, _NETRC_ALONE, _NETRC_LINE, _NETRC_PASSWORD, _NOT_A_SECRET, _NPMRC_AUTH,
    _PEM_IN_BASE64, _PEM_REST, _PGPASS_HINT, _PGPASS_LINE, _POSITIONAL, _PROGRAM_AFTER, _PROGRAM_FIRST,
    _PROGRAM_FLAGS, _PUBLIC_BEFORE, _PUTTY_REST, _REPR_SECRET, _SECRET_FLAG, _SECRET_WORD, _SET_BEFORE, _SHA_HASH,
    _SIGNATURE, _TOKENS, _URL_AUTH, _URL_PASSWORD,
)


# --------------------------------------------------------------------------- private-key blocks


def _private_keys(s: str) -> str:
    """Every private-key block of `s` as one REDACTED."""
    marks = list(_KEY_MARK.finditer(s))
    if not marks:
        return s
    pieces: list[str] = []
    pos = 0
    for i, m in enumerate(marks):
        if m.start() < pos:  # inside a block already taken
            continue
        kind = m.group(1)
        if kind == "BEGIN":
            after = marks[i + 1] if i + 1 < len(marks) else None
            start = m.start()
            if after is not None and after.group(1) == "END" and after.start() - m.end() <= _MAX_BLOCK:
                stop = after.end()
            else:  # cut off (no END, or another block begins first): its body lines go with it
                stop = _PEM_REST.match(s, m.end()).end()
                if stop == m.end():  # a BEGIN line alone ("it should begin with -----BEGIN ..."): no secret
                    continue
        elif kind == "END":  # its BEGIN was cut off: the base64 lines before it go too
            start, stop = _base64_before(s, m.start(), pos), m.end()
            if start == m.start():
                continue
        else:
            start, stop = m.start(), _PUTTY_REST.match(s, m.end()).end()
        pieces += (s[pos:start], REDACTED)
        pos = stop
    pieces.append(s[pos:])
    return "".join(pieces)


def _base64_pem(s: str) -> str:
    return _PEM_IN_BASE64.sub(_private_base64_pem, s)


def _private_base64_pem(m: re.Match) -> str:
    head = m.group(0)[:120]
    try:
        text = base64.b64decode(head[: len(head) // 4 * 4]).decode("ascii", "replace")
    except ValueError:
        return m.group(0)
    return REDACTED if "PRIVATE KEY" in text or "OpenVPN Static key" in text else m.group(0)


def _base64_before(s: str, end_at: int, floor: int) -> int:
    start = end_at
    while start > floor:
        window = s[max(floor, start - 240):start]
        m = _B64_BEFORE.search(window)
        if m is None:
            break
        # The n of an escaped line break (backslash, n) belongs to the break, not to the line after it.
        begin = m.start() + (m.start() > 0 and window[m.start() - 1] == "\\")
        start -= len(window) - begin
    return start


# --------------------------------------------------------------------------- the other shapes


def _token(m: re.Match) -> str:
    at = m.start()
    if at and _is_word_char(m.string[at - 1]) and _ANSI_BEFORE.search(m.string, max(0, at - 16), at) is None:
        return m.group(0)
    return REDACTED


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _assignments(s: str) -> str:
    """The KEY=value forms of `s`. The regex alone would try every word; here it is tried only
    where a name holding a secret word and followed by `=` or `:` starts."""
    low = s.lower()
    if len(low) != len(s):  # lowering moved the positions (rare letters): the slow way
        return _ASSIGNMENT_ANYWHERE.sub(_assignment, s)
    pieces: list[str] = []
    pos, tried, skip_to = 0, -1, 0
    for hit in _SECRET_WORD.finditer(low):
        word = hit.start()
        if word < max(pos, skip_to):
            continue
        start, floor = word, max(pos, word - 41)
        while start > floor and s[start - 1] in _NAME_CHAR_SET:
            start -= 1
        if word - start > 40:  # the bounded regex matches no name this long, nor any later part of it
            skip_to = _NAME_CHARS.match(s, word).end()
            continue
        if start == tried or (start and _is_word_char(s[start - 1])):
            continue  # tried already, or not where a word starts
        tried = start
        m = _ASSIGNMENT_AT.match(s, start)
        if m is not None:
            pieces += (s[pos:start], _assignment(m))
            pos = m.end()
    if not pieces:
        return s
    pieces.append(s[pos:])
    return "".join(pieces)


def _keep_around(m: re.Match) -> str:
    return f"{m.group(1)}{REDACTED}{m.group(3)}"


def _keep_name(m: re.Match) -> str:
    return f"{m.group(1)}{REDACTED}"


def _assignment(m: re.Match) -> str:
    name, value = m.group(1), m.group(4)
    low = name.lower()
    if "token" in low and "key" not in low and _FIGURE.fullmatch(value):
        return m.group(0)
    if value.startswith(REDACTED) or _not_a_secret(value) or low.endswith("_name"):
        return m.group(0)
    if _PUBLIC_BEFORE.search(m.string, max(0, m.start() - 8), m.start()) or low.startswith(("public", "pub_")):
        return m.group(0)  # a public key, a module's signing key: published, not secret
    return f"{name}{m.group(2)}{m.group(3)}{REDACTED}"


def _not_a_secret(value: str) -> bool:
    return _NOT_A_SECRET.fullmatch(value) is not None


def _json_secret(m: re.Match) -> str:
    if _not_a_secret(m.group(4)):
        return m.group(0)
    return f"{m.group(1)}{REDACTED}{m.group(5)}"


def _secret_flag(m: re.Match) -> str:
    value = m.group(2).strip("\"'")
    if len(value) < 4 or _not_a_secret(value):  # "--password via the CLI is insecure"
        return m.group(0)
    return f"{m.group(1)}{REDACTED}"


def _authorization(m: re.Match) -> str:
    if _not_a_secret(m.group(2)):  # "Authorization: Bearer <redacted>"
        return m.group(0)
    return f"{m.group(1)}{REDACTED}"


def _json_forms(s: str) -> str:
    if '"' in s:
        s = _JSON_SECRET.sub(_json_secret, s)
    if "'" in s:
        s = _REPR_SECRET.sub(_json_secret, s)
    return s


def _json_env_pairs(s: str) -> str:
    return _JSON_ENV_PAIR.sub(_keep_around, s)


def _authorizations(s: str) -> str:
    return _AUTHORIZATION.sub(_authorization, s)


def _bearers(s: str) -> str:
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", s)


def _tokens(s: str) -> str:
    return _TOKENS.sub(_token, s)


def _mailgun_keys(s: str) -> str:
    return _MAILGUN.sub(_token, s)


def _password_hashes(s: str) -> str:
    if "$" in s:
        s = _CRYPT_HASH.sub(_token, s)
    return _SHA_HASH.sub(_token, s) if "{S" in s else s


def _secret_flags(s: str) -> str:
    return _SECRET_FLAG.sub(_secret_flag, s) if "--" in s else s


def _url_passwords(s: str) -> str:
    return _URL_PASSWORD.sub(_keep_around, s)


def _aws_secrets(s: str) -> str:
    return _AWS_SECRET.sub(_keep_name, s)


def _signatures(s: str) -> str:
    return _SIGNATURE.sub(_keep_name, s)


# --------------------------------------------------------------------------- command lines


def _command_end(s: str, start: int, line_end: int) -> int:
    for m in _COMMAND_JOIN.finditer(s, start, line_end):
        if m.group(1) is not None:
            return m.start()
    return line_end


def _redacted_argument(arg: str, part: str = "") -> str:
    """A command-line argument with its secret (all of it, or what follows `part`) redacted, quotes kept."""
    quote = arg[0] if arg[0] in "'\"" else ""
    closing = quote if len(arg) >= 2 and arg[-1] == quote else ""
    inner = arg[len(quote):len(arg) - len(closing)]
    if part == ";":
        return f"{quote}{_cookie_pairs(inner, first_only=False)}{closing}"
    kept = ""
    if part:
        cut = inner.find(part)
        if cut < 0:  # a user name alone: the program asks for the password
            return arg
        kept, inner = inner[:cut + 1], inner[cut + 1:]
    if len(inner) < 4 or inner.startswith((REDACTED, "$(", "`")) or _not_a_secret(inner):
        return arg  # a reference to a secret kept elsewhere ($DB_PASSWORD, "$(cat /run/secrets/db)")
    return f"{quote}{kept}{REDACTED}{closing}"


_LONGEST_COMMAND = 4096  # characters of a command line looked at: a line of a MB is no command


def _command_lines(s: str) -> str:
    """Passwords and tokens on the command lines of the programs that take them as arguments."""
    spans: list[tuple[int, int, str]] = []
    first = _PROGRAM_FIRST.match(s)
    hits = ([first] if first else []) + list(_PROGRAM_AFTER.finditer(s))
    for hit, after in zip(hits, [*hits[1:], None]):
        start, name = hit.start(1), hit.group(1)
        end = s.find("\n", start, start + _LONGEST_COMMAND)
        end = min(len(s), start + _LONGEST_COMMAND) if end < 0 else end
        # Its options end where the next command starts, or the next program's name (`... | sudo -S`).
        command_end = _command_end(s, hit.end(), end if after is None else min(end, after.start(1)))
        if name not in _NEEDS_LOGIN or _LOGIN.search(s, hit.end(), command_end):
            for pattern, part in _PROGRAM_FLAGS.get(name, ()):
                spans += ((m.start(1), m.end(1), part) for m in pattern.finditer(s, hit.end(), command_end))
        for pattern, part in _POSITIONAL.get(name, ()):
            m = pattern.match(s, start, end)
            if m is not None:
                spans.append((m.start(1), m.end(1), part))
        if name == "htpasswd" and (m := _HTPASSWD.match(s, start, command_end)) is not None and "b" in m.group(1):
            # -n shows the entry instead of writing a file: its arguments are USER PASSWORD
            group = 3 if "n" in m.group(1) else 4
            if m.group(group) is not None:
                spans.append((m.start(group), m.end(group), ""))
    if not spans:
        return s
    pieces: list[str] = []
    pos = 0
    for start, end, part in sorted(spans):
        if start < pos:
            continue
        pieces += (s[pos:start], _redacted_argument(s[start:end], part))
        pos = end
    pieces.append(s[pos:])
    return "".join(pieces)


# --------------------------------------------------------------------------- cookies


def _cookies(s: str) -> str:
    pieces: list[str] = []
    pos = 0
    for m in _COOKIE_HEADER.finditer(s):
        if m.start() < pos or (m.start() and _is_word_char(s[m.start() - 1])):
            continue
        first_only = _SET_BEFORE.search(s, max(0, m.start() - 4), m.start()) is not None
        end = _cookie_pairs_end(s, m.end())
        pieces += (s[pos:m.end()], _cookie_pairs(s[m.end():end], first_only))
        pos = end
    if not pieces:
        return s
    pieces.append(s[pos:])
    return "".join(pieces)


def _cookie_pairs_end(s: str, pos: int) -> int:
    while (pair := _COOKIE_PAIR.match(s, pos)) is not None:
        pos = pair.end()
        sep = _COOKIE_NEXT.match(s, pos)
        if sep is None:
            break
        pos = sep.end()
    return pos


def _cookie_pairs(text: str, first_only: bool) -> str:
    """`NAME=VALUE; NAME=VALUE` with the values redacted (with `first_only`, the first one's)."""
    pieces: list[str] = []
    kept_to = at = 0
    while (pair := _COOKIE_PAIR.match(text, at)) is not None:
        value = pair.group(2)
        if len(value) >= 4 and not value.startswith(REDACTED) and not _not_a_secret(value):
            pieces += (text[kept_to:pair.start(2)], REDACTED)
            kept_to = pair.end(2)
        sep = _COOKIE_NEXT.match(text, pair.end())
        if first_only or sep is None:
            break
        at = sep.end()
    pieces.append(text[kept_to:])
    return "".join(pieces)


# --------------------------------------------------------------------------- files by their key words


class _LineStarts:
    """Where the lines of a text start, asked for at positions that only grow (as a regex's matches
    come): each part of the text is looked at once, however many matches a long line holds."""

    def __init__(self, s: str):
        self.s, self.pos, self.start = s, 0, 0

    def at(self, pos: int) -> int:
        brk = self.s.rfind("\n", self.pos, pos)
        if brk >= 0:
            self.start = brk + 1
        self.pos = pos
        return self.start


def _netrc(s: str) -> str:
    lines = _LineStarts(s)

    def hide(m: re.Match) -> str:
        value = m.group(1)
        line_start = lines.at(m.start())
        if value.startswith(REDACTED) or _not_a_secret(value) or (m.start() and s[m.start() - 1] not in " \t\n"):
            return m.group(0)
        if _NETRC_LINE.match(s, line_start) is None and (m.start() - line_start > 200 or _NETRC_ALONE.match(
                s[line_start:m.start()]) is None or _LINE_REST_BLANK.match(s, m.end()) is None):
            return m.group(0)  # prose: "passwd: password updated successfully"
        return m.group(0)[:m.start(1) - m.start()] + REDACTED

    return _NETRC_PASSWORD.sub(hide, s)


def _pgpass(s: str) -> str:
    if _PGPASS_HINT.search(s) is None:
        return s
    pieces: list[str] = []
    pos = line_end = 0
    lines = _LineStarts(s)
    for hint in _PGPASS_HINT.finditer(s):
        if hint.start() < line_end:
            continue  # its line was tried
        line_start = lines.at(hint.start())
        line_end = s.find("\n", hint.end())
        line_end = len(s) if line_end < 0 else line_end
        if line_end - line_start > 1000:  # no .pgpass line is this long
            continue
        m = _PGPASS_LINE.fullmatch(s, line_start, line_end)
        if m is None or m.group(2).startswith(REDACTED) or _not_a_secret(m.group(2)):
            continue
        pieces += (s[pos:m.start(2)], REDACTED)
        pos = m.end(2)
    if not pieces:
        return s
    pieces.append(s[pos:])
    return "".join(pieces)


def _ini_passwords(s: str) -> str:
    lines = _LineStarts(s)

    def hide(m: re.Match) -> str:
        name, value = m.group(1), m.group(3)
        line_start = lines.at(m.start())
        if m.start() - line_start > 200 or s[line_start:m.start()].strip(" \t") or (name.startswith("passw") and not value.startswith("=")):
            return m.group(0)
        if value.startswith(REDACTED) or _not_a_secret(value.lstrip("=")):
            return m.group(0)
        if name == "pass" and not any(c.isalpha() for c in value):
            return m.group(0)
        return f"{name}{m.group(2)}{REDACTED}"

    return _INI_PASSWORD.sub(hide, s)


def _npmrc_auth(s: str) -> str:
    def hide(m: re.Match) -> str:
        if (m.start() and (_is_word_char(s[m.start() - 1]) or s[m.start() - 1] == "-")) or _not_a_secret(m.group(2)):
            return m.group(0)
        return f"{m.group(1)}{REDACTED}"

    return _NPMRC_AUTH.sub(hide, s)


def _url_auth(s: str) -> str:
    def hide(m: re.Match) -> str:
        return f"{m.group(1)}{REDACTED}" if m.start() and s[m.start() - 1] in "?&;" else m.group(0)

    return _URL_AUTH.sub(hide, s)
