"""Words after quote removal: unquoting, ANSI-C strings, brace expansion, word splitting."""

from __future__ import annotations

import itertools
import re
import shlex

from tree_sitter import Node

from agent.safety.classifier.command import _MAX_ALTERNATIVES, Arg, _Seg

# --------------------------------------------------------------------------- word helpers


def _unquote_word(raw: str) -> tuple[str, bool]:
    """Backslash removal for an unquoted word, and whether an unescaped glob character is left."""
    if "\\" not in raw:
        return raw, any(c in raw for c in "*?[")
    out: list[str] = []
    glob = False
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "\\" and index + 1 < len(raw):
            if raw[index + 1] != "\n":
                out.append(raw[index + 1])
            index += 2
            continue
        glob = glob or char in "*?["
        out.append(char)
        index += 1
    return "".join(out), glob


def _unquote_double(raw: str) -> str:
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), raw)


_ANSI_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "?": "?",
}


def _ansi_c(body: str, echo_octal: bool = False) -> str:
    """Decode `$'...'` escapes (also used for `echo -e` and printf formats)."""
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\" or index + 1 >= len(body):
            out.append(char)
            index += 1
            continue
        code = body[index + 1]
        if code in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[code])
            index += 2
        elif code in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[code]
            digits = re.match(rf"[0-9a-fA-F]{{1,{width}}}", body[index + 2:])
            if digits and int(digits.group(), 16) <= 0x10FFFF:
                out.append(chr(int(digits.group(), 16)))
                index += 2 + len(digits.group())
            else:
                out.append("\\" + code)
                index += 2
        elif code in "01234567":
            start = index + 2 if echo_octal and code == "0" else index + 1
            digits = re.match(r"[0-7]{1,3}", body[start:])
            value = digits.group() if digits else "0"
            out.append(chr(int(value, 8) & 0xFF))
            index = start + (len(digits.group()) if digits else 0)
        elif code == "c" and index + 2 < len(body):
            out.append(chr(ord(body[index + 2]) & 0x1F))
            index += 3
        else:
            out.append("\\" + code)
            index += 2
    return "".join(out)


def _product(parts: list[list[tuple[_Seg, ...]]]) -> list[tuple[_Seg, ...]]:
    total = 1
    for alternatives in parts:
        total *= len(alternatives)
    if total > _MAX_ALTERNATIVES:
        return [(_Seg(None),)]
    return [tuple(itertools.chain.from_iterable(combo)) for combo in itertools.product(*parts)]


def _combine(expanded: list[list[list[Arg]]]) -> list[list[Arg]]:
    """Every full word list a command can become; words with too many possibilities become unknown."""
    total = 1
    for alternatives in expanded:
        total *= len(alternatives)
    if total > _MAX_ALTERNATIVES:
        expanded = [alts if len(alts) == 1 else [[Arg(None)]] for alts in expanded]
    return [list(itertools.chain.from_iterable(combo)) for combo in itertools.product(*expanded)]


_BRACE_PATTERN = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")


def _arg_from(segments: list[_Seg], node: Node, braces: bool = True) -> list[Arg]:
    """The word (or, after brace expansion, words) that pieces make."""
    text = "".join(s.text or "" for s in segments)
    unquoted = "".join(s.text or "" if not s.quoted else "x" * len(s.text or "") for s in segments)
    glob = any(s.glob and not s.quoted for s in segments)
    if braces and _BRACE_PATTERN.search(unquoted):
        return [Arg(t, glob or any(c in t for c in "*?["), node) for t in _expand_braces(text)]
    return [Arg(text, glob, node)]


def _expand_braces(text: str, budget: int = 64) -> list[str]:
    """Bash brace expansion: `a{b,c}` -> ab ac, `{1..3}` -> 1 2 3; capped, for obfuscation like `{rm,-rf,/}`."""
    depth, start = 0, -1
    for index, char in enumerate(text):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth:
                continue
            options = _brace_options(text[start + 1: index])
            if options is None:
                continue
            results: list[str] = []
            for option in options:
                results.extend(_expand_braces(text[:start] + option + text[index + 1:], budget - len(results)))
                if len(results) >= budget:
                    break
            return results[:budget] or [text]
    return [text]


def _brace_options(body: str) -> list[str] | None:
    parts, depth, current = [], 0, ""
    for char in body:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += char == "{"
        depth -= char == "}" and depth > 0
        current += char
    parts.append(current)
    if len(parts) > 1:
        return parts
    numeric = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?", body)
    if numeric:
        first, last = int(numeric.group(1)), int(numeric.group(2))
        step = abs(int(numeric.group(3) or 1)) or 1
        values = range(first, last + 1, step) if first <= last else range(first, last - 1, -step)
        return [str(v) for v in values[:64]]
    letters = re.fullmatch(r"([A-Za-z])\.\.([A-Za-z])", body)
    if letters:
        first, last = ord(letters.group(1)), ord(letters.group(2))
        return [chr(c) for c in (range(first, last + 1) if first <= last else range(first, last - 1, -1))][:64]
    return None


def _split_ifs(text: str, separators: str) -> list[str]:
    if not separators:
        return [text]
    blanks = "".join(c for c in separators if c in " \t\n")
    others = "".join(c for c in separators if c not in " \t\n")
    if not others:
        return re.split(f"[{re.escape(blanks)}]+", text)
    blank = f"[{re.escape(blanks)}]*" if blanks else ""
    return re.split(f"{blank}[{re.escape(others)}]{blank}" + (f"|[{re.escape(blanks)}]+" if blanks else ""), text)


def _join(args: list[Arg]) -> str:
    return " ".join(shlex.quote(a.text) if a.text is not None else "..." for a in args)


def _may_become_option(arg: Arg) -> bool:
    """An unquoted pattern whose expansion could start with '-': `*`, `?x`, `{-r,x}`."""
    return arg.pattern and bool(arg.text) and arg.text[0] in "*?[{-"  # type: ignore[index]
