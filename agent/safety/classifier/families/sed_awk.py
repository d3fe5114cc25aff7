"""sed and awk: scripts that write files or run commands."""

from __future__ import annotations

import re

from agent.safety.classifier.command import MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import _getopt
from agent.safety.classifier.registry import _handles


@_handles("sed", "gsed")
def _sed(an: Analysis, cmd: _Cmd) -> None:
    opts = _getopt(
        cmd.args,
        short_value="efl",
        long_value={"--expression", "--file", "--line-length"},
        short_flags="nsuzErb",
        long_flags={"--quiet", "--silent", "--separate", "--unbuffered", "--null-data", "--regexp-extended",
                    "--posix", "--debug", "--sandbox", "--binary", "--follow-symlinks", "--in-place", "--help",
                    "--version", "--zero-terminated"},
        permute=True,
        short_optional="i",
    )
    problems = 0
    if opts.has("-i", "--in-place"):
        an.add(MUTATING, "sed:-i", "`sed -i` edits files in place")
        problems += 1
    if opts.has("-f", "--file"):
        an.add(MUTATING, "sed:-f", "`sed -f` reads its script from a file the classifier cannot see")
        problems += 1
    if opts.unsure:
        an.add(MUTATING, "sed:option", "`sed` is given an option the classifier does not accept as read-only")
        problems += 1
    scripts = opts.values("-e", "--expression") or opts.operands[:1]
    for script in scripts:
        if script.text is None:
            continue
        for kind, detail in _scan_sed(script.text):
            problems += 1
            if kind == "w":
                an.add(MUTATING, "sed:w", f"the sed script writes to the file {detail or '(unnamed)'}")
                if detail:
                    an.write(Arg(detail), "the sed `w` command", "sed")
            elif kind == "e":
                an.add(MUTATING, "sed:e", "the sed script runs shell commands (`e`)")
                if detail:
                    an.inner_source(detail, "sed e")
            else:
                an.add(MUTATING, "sed:script", f"the sed script uses `{detail}`, which is not accepted as read-only")
    if not problems:
        an.allow(cmd)


def _scan_sed(script: str) -> list[tuple[str, str]]:
    """Commands in a sed script that write files (w) or run programs (e); ("unknown", ...) for the rest."""
    problems: list[tuple[str, str]] = []
    size = len(script)

    def end_of_regex(start: int, delimiter: str) -> int | None:
        position = start
        while position < size:
            char = script[position]
            if char == "\\":
                position += 2
                continue
            if char == delimiter:
                return position + 1
            if char == "\n":
                return None
            position += 1
        return None

    def rest_of_line(start: int) -> tuple[str, int]:
        stop = script.find("\n", start)
        stop = size if stop < 0 else stop
        return script[start:stop].strip(), stop

    def address(position: int) -> int | None:
        if position >= size:
            return position
        char = script[position]
        if char.isdigit():
            while position < size and (script[position].isdigit() or script[position] == "~"):
                position += 1
            return position
        if char == "$":
            return position + 1
        if char in "+~" and position + 1 < size and script[position + 1].isdigit():
            position += 1
            while position < size and script[position].isdigit():
                position += 1
            return position
        if char == "/" or (char == "\\" and position + 1 < size):
            delimiter = "/" if char == "/" else script[position + 1]
            end = end_of_regex(position + (1 if char == "/" else 2), delimiter)
            if end is None:
                return None
            while end < size and script[end] in "IM":
                end += 1
            return end
        return position

    position = 0
    while position < size:
        char = script[position]
        if char in " \t\n;{}":
            position += 1
            continue
        if char == "#":
            _, position = rest_of_line(position)
            continue
        after = address(position)
        if after is not None and after < size and script[after] == ",":
            after = address(after + 1)
        if after is None:
            return problems + [("unknown", "an unterminated address")]
        position = after
        while position < size and script[position] in " \t!":
            position += 1
        if position >= size:
            return problems + [("unknown", "an address without a command")]
        command = script[position]
        position += 1
        if command in "{}=dDgGhHnNpPxzF":
            continue
        if command in "lqQL":
            while position < size and (script[position].isdigit() or script[position] in " \t"):
                position += 1
            continue
        if command in ":btT":
            while position < size and script[position] not in ";\n}":
                position += 1
            continue
        if command in "aic":
            while True:  # text to the end of the line, continued by a trailing backslash
                line_end = script.find("\n", position)
                if line_end < 0:
                    position = size
                    break
                if line_end > 0 and script[line_end - 1] == "\\":
                    position = line_end + 1
                    continue
                position = line_end
                break
            continue
        if command in "rR":
            _, position = rest_of_line(position)
            continue
        if command in "wW":
            name, position = rest_of_line(position)
            problems.append(("w", name))
            continue
        if command == "e":
            text, position = rest_of_line(position)
            problems.append(("e", text))
            continue
        if command in "sy":
            if position >= size or script[position] in "\n\\":
                return problems + [("unknown", command)]
            delimiter = script[position]
            middle = end_of_regex(position + 1, delimiter)
            end = end_of_regex(middle, delimiter) if middle is not None else None
            if end is None:
                return problems + [("unknown", f"an unterminated {command} command")]
            position = end
            while command == "s" and position < size and script[position] in "gpiImMe0123456789w":
                flag = script[position]
                if flag == "e":
                    problems.append(("e", ""))
                if flag == "w":
                    name, position = rest_of_line(position + 1)
                    problems.append(("w", name))
                    break
                position += 1
            continue
        return problems + [("unknown", command)]
    return problems


@_handles("awk", "gawk", "mawk", "nawk", "busybox-awk")
def _awk(an: Analysis, cmd: _Cmd) -> None:
    opts = _getopt(
        cmd.args,
        short_value="FvfEilWe",
        long_value={"--field-separator", "--assign", "--file", "--exec", "--include", "--load", "--source"},
        short_flags="bcCgIhkMnNOPrsStV",
        long_flags={"--sandbox", "--posix", "--traditional", "--characters-as-bytes", "--re-interval", "--lint",
                    "--optimize", "--no-optimize", "--use-lc-numeric", "--bignum", "--non-decimal-data",
                    "--copyright", "--version", "--help", "--pretty-print", "--profile", "--dump-variables",
                    "--debug", "--gen-pot"},
        short_optional="dDLop",
    )
    problems = 0
    for names, rule, why in (
        (("-f", "-E", "--file", "--exec"), "awk:-f", "reads its program from a file the classifier cannot see"),
        (("-i", "-l", "--include", "--load"), "awk:-i", "loads extra awk code or extensions"),
        (("-o", "-p", "-d", "-D", "--pretty-print", "--profile", "--dump-variables", "--debug"), "awk:-o",
         "writes a profile, dump or listing file"),
        (("-W",), "awk:-W", "passes implementation options the classifier does not check"),
    ):
        if opts.has(*names):
            an.add(MUTATING, rule, f"`{cmd.prog}` {why}")
            problems += 1
    if opts.unsure:
        an.add(MUTATING, "awk:option", f"`{cmd.prog}` is given an option the classifier does not accept as read-only")
        problems += 1
    programs = opts.values("-e", "--source")
    if not programs and not opts.has("-f", "-E", "--file", "--exec"):
        programs = opts.operands[:1]
    for program in programs:
        if program.text is None:
            continue
        text = program.text
        if "system" in text:
            an.add(MUTATING, "awk:system", "the awk program calls system(), which runs shell commands")
            for command in re.findall(r'system\s*\(\s*"((?:[^"\\]|\\.)*)"', text):
                an.inner_source(command.replace('\\"', '"'), "awk system()")
            problems += 1
        if "|" in text.replace("||", ""):
            an.add(MUTATING, "awk:pipe", "the awk program pipes to or from a command (`|`)")
            problems += 1
        if re.search(r"\bprintf?\b", text) and ">" in text:
            an.add(MUTATING, "awk:print-to-file", "the awk program may print into a file (`print > file`)")
            for target in re.findall(r'>>?\s*"((?:[^"\\]|\\.)*)"', text):
                an.write(Arg(target), "the awk program", "awk")
            problems += 1
        if "@" in text:
            an.add(MUTATING, "awk:indirect-call", "the awk program uses `@` (indirect calls or directives)")
            problems += 1
    if not problems:
        an.allow(cmd)
