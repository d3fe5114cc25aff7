"""sed and awk: their options, and scripts that write files, run commands or read files."""

from __future__ import annotations

import re

from agent.safety.classifier.command import MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import Effect, Parsed, Spec
from agent.safety.classifier.paths import read_risk
from agent.safety.classifier.registry import _handles


def _judge_options(an: Analysis, cmd: _Cmd, spec: Spec, parsed: Parsed, rules: dict[str, str]) -> int:
    """Record the options that are not read-only (every one, each under its rule), and the unknown
    ones; return how many findings. Unlike judge_by_spec, the caller goes on to read the program."""
    problems = 0
    if parsed.unknown:
        an.add(MUTATING, f"{cmd.prog}:unknown-option",
               f"`{cmd.prog}` with `{parsed.unknown[0]}`: an option the classifier's spec of `{cmd.prog}` does not "
               f"list (or a prefix of more than one), so what it does cannot be told")
        problems += 1
    for used in parsed.effects:
        key = used.option.effect or ""
        effect = spec.effects[key]
        meaning = "" if used.written == used.option.shown else f" (`{used.option.shown}`)"
        an.add(effect.cls, rules.get(key, f"{cmd.prog}:{used.option.shown}"),
               f"`{cmd.prog} {used.written}`{meaning} {effect.what}")
        problems += 1
    return problems


def _reads(an: Analysis, cmd: _Cmd, files: list[Arg], how: str) -> int:
    """Files the program opens for reading: a device such as /dev/watchdog is not a read-only input."""
    for arg in files:
        if arg.text == "-":
            continue
        problem = read_risk(arg.text, an.cwd)
        if problem is not None:
            an.add(problem[0], f"{cmd.prog}:{problem[1]}", f"`{how}` reads {problem[2]}")
            return 1
    return 0


# -- sed
#
# GNU sed 4.9 (`sed --help`), getopt_long: options anywhere before `--`, long ones by unique prefix
# (`--in` is --in-place), `-i` and `--in-place` with an optional suffix stuck to them (`-ibak`,
# `--in-place=.bak`; `-ni` is -n -i). Names are ordered so that the rule keeps its old name (sed:-i).

SED = Spec(
    "sed",
    "-n|--quiet|--silent --debug -e|--expression= --file|-f=!script --follow-symlinks --in-place|-i[=]!inplace "
    "-l|--line-length= --posix -E|-r|--regexp-extended -s|--separate --sandbox -u|--unbuffered "
    "-z|--null-data|--zero-terminated -b|--binary --help --version",
    effects={
        # -i rewrites every input file (a script that prints one line truncates them to it)
        "inplace": Effect(MUTATING, "edits files in place"),
        # a script file may hold w, e or r commands this classifier never sees
        "script": Effect(MUTATING, "reads its script from a file the classifier cannot see"),
    },
    aliases=("gsed",),
)
_SED_RULES = {"inplace": "sed:-i", "script": "sed:-f"}


@_handles("sed", "gsed")
def _sed(an: Analysis, cmd: _Cmd) -> None:
    parsed = SED.parse(cmd.args)
    problems = _judge_options(an, cmd, SED, parsed, _SED_RULES)
    given = parsed.values("-e")
    scripts = given or (parsed.operands[:1] if not parsed.has("-f") else [])
    files = parsed.operands if (given or parsed.has("-f")) else parsed.operands[1:]
    problems += _reads(an, cmd, parsed.values("-f"), "sed -f")
    problems += _reads(an, cmd, files, "sed")
    for script in scripts:
        if script.text is None:
            continue
        for kind, detail in _scan_sed(script.text):
            if kind == "r":
                problems += _reads(an, cmd, [Arg(detail)], f"the sed `r {detail}` command")
                continue
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
    if parsed.has("-i") and not parsed.unknown:
        for target in files:
            an.write(target, "`sed -i`", "sed")
    if not problems:
        an.allow(cmd)


def _scan_sed(script: str) -> list[tuple[str, str]]:
    """Commands in a sed script that write files (w), run programs (e) or read files (r, R: judged by the
    caller); ("unknown", ...) for the rest."""
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
            name, position = rest_of_line(position)
            problems.append(("r", name))  # a read: judged by what it opens
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


# -- awk
#
# Which awk `awk` is depends on the host (mawk on Debian and Ubuntu, gawk on RHEL, busybox in small
# images), so `awk`, `nawk` and `busybox-awk` are read with gawk's spec, the largest, and take from -W
# only what every awk reads alike. gawk and mawk are read with their own. All of them stop at the first
# operand (the program text, or the first file after -f): what follows is files and var=value words.

_AWK_EFFECTS = {
    # the program is in a file the classifier cannot see; --exec also ends the options
    "progfile": Effect(MUTATING, "reads its program from a file the classifier cannot see"),
    # awk source files (`-i inplace` rewrites the input files), or a shared library run inside awk
    "include": Effect(MUTATING, "loads extra awk code or extensions (`-i inplace` edits its input files)"),
    "load": Effect(MUTATING, "loads a shared library into awk, which runs its code"),
    # profile, pretty-printed program or variable dump: written to FILE or to a default file in the cwd
    "writes": Effect(MUTATING, "writes a profile, dump or listing file"),
    # the debugger reads its commands from stdin or from FILE
    "debug": Effect(MUTATING, "runs the program under the debugger, driven by commands the classifier cannot see"),
    "W": Effect(MUTATING, "passes implementation options the classifier does not check"),
}
_AWK_RULES = {"progfile": "awk:-f", "include": "awk:-i", "load": "awk:-i", "writes": "awk:-o", "debug": "awk:-o",
              "W": "awk:-W"}

# GNU awk 5.3 (`gawk --help`); -W OPTION is --OPTION.
GAWK = Spec(
    "gawk",
    "-f|--file=!progfile -F|--field-separator= -v|--assign= -b|--characters-as-bytes -c|--traditional "
    "-C|--copyright -d|--dump-variables[=]!writes -D|--debug[=]!debug -e|--source= -E|--exec=!progfile "
    "-g|--gen-pot -h|--help|--usage -i|--include=!include -I|--trace -k|--csv -l|--load=!load -L|--lint[=] "
    "-M|--bignum -N|--use-lc-numeric -n|--non-decimal-data -o|--pretty-print[=]!writes -O|--optimize "
    "-p|--profile[=]!writes -P|--posix -r|--re-interval -s|--no-optimize -S|--sandbox -t|--lint-old "
    "-V|--version -W=",
    permute=False, effects=_AWK_EFFECTS,
)
# mawk 1.3.4: -f, -F, -v and -W NAME[=VALUE] (names by any prefix: `-We` is -W exec); newer
# releases also take --version and --help.
MAWK = Spec("mawk", "-f=!progfile -F= -v= -W= --version --help", permute=False, effects=_AWK_EFFECTS,
            help=(("-W", "usage"),))
_MAWK_W = {"version": None, "dump": None, "help": None, "usage": None, "interactive": None, "posix_space": None,
           "random": None, "sprintf": None, "exec": "progfile"}
# Read alike by gawk (as --version, --usage, --help) and mawk.
_COMMON_W = frozenset({"version", "usage", "help"})


def _w_effects(an: Analysis, cmd: _Cmd, parsed: Parsed) -> tuple[int, bool]:
    """Judge each -W value; returns (findings, whether a -W names the program file)."""
    problems, program_file = 0, False
    for value in parsed.values("-W"):
        text = value.text or ""
        if cmd.prog == "gawk":
            sub = GAWK.parse([Arg("--" + text)] if text else [Arg(None)])
            if sub.unknown or any(u.option.names == ("-W",) for u in sub.used):
                an.add(MUTATING, "awk:-W", f"`gawk -W {text}` is not an option gawk lists")
                problems += 1
                continue
            problems += _judge_options(an, cmd, GAWK, sub, _AWK_RULES)
            program_file = program_file or sub.has("-f", "-E")
            continue
        name = text.split("=", 1)[0]
        if cmd.prog == "mawk":
            matches = [n for n in _MAWK_W if name and n.startswith(name)]
            if len(matches) == 1 and _MAWK_W[matches[0]] is None:
                continue
            if len(matches) == 1:
                an.add(MUTATING, "awk:-f", f"`mawk -W {text}` reads its program from a file the classifier cannot see")
                program_file = True
                problems += 1
                continue
        elif text in _COMMON_W:
            continue
        an.add(MUTATING, "awk:-W",
               f"`{cmd.prog} -W {text}` passes implementation options the classifier does not check")
        problems += 1
    return problems, program_file


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


@_handles("awk", "gawk", "mawk", "nawk", "busybox-awk")
def _awk(an: Analysis, cmd: _Cmd) -> None:
    spec = MAWK if cmd.prog == "mawk" else GAWK
    parsed = spec.parse(cmd.args)
    problems = _judge_options(an, cmd, spec, parsed, _AWK_RULES)
    more, program_file = _w_effects(an, cmd, parsed)
    problems += more
    program_file = program_file or parsed.has("-f", "-E")
    programs = parsed.values("-e")
    operands = parsed.operands
    if not programs and not program_file:
        programs, operands = operands[:1], operands[1:]
    files = [a for a in operands if not (a.text and _ASSIGNMENT.match(a.text))]
    problems += _reads(an, cmd, parsed.values("-f", "-E"), f"{cmd.prog} -f")
    problems += _reads(an, cmd, files, cmd.prog)
    for program in programs:
        if program.text is not None:
            problems += _scan_awk(an, program.text)
    if not problems:
        an.allow(cmd)


def _scan_awk(an: Analysis, text: str) -> int:
    """What an awk program text does beyond reading its input and printing to stdout."""
    problems = 0
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
    # `getline < FILE` opens FILE: a literal name is judged as a read, any other is not known here.
    for match in re.finditer(r"\bgetline\b[^;{}\n|]*?<\s*(\"(?:[^\"\\]|\\.)*\"|[^\s;{}]+)?", text):
        target = match.group(1) or ""
        problem = read_risk(target[1:-1], an.cwd) if target.startswith('"') and len(target) > 1 else \
            (MUTATING, "getline-file", "a file named only when the program runs")
        if problem is not None:
            an.add(problem[0], f"awk:{problem[1]}", f"the awk program's `getline <` reads {problem[2]}")
            problems += 1
            break
    # ARGV and ARGC name the files awk goes on to read: changed by the program, they are unknown inputs.
    if re.search(r"\bARGV\s*\[[^\]]*\]\s*=[^=]|\bARGC\s*(=[^=]|\+\+|--|[-+*/]=)", text):
        an.add(MUTATING, "awk:argv", "the awk program changes ARGV or ARGC, the list of files it reads")
        problems += 1
    return problems


SPECS = [SED, GAWK, MAWK]
