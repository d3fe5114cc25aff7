"""Reading a command's options the way its own parser does."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.safety.classifier.command import Arg
from tools.base import RiskClass


def _short_options(args: list[Arg]) -> set[str]:
    """Letters of every short option cluster (`-rf` -> {"r", "f"}) before `--`."""
    letters: set[str] = set()
    for arg in args:
        if arg.text == "--":
            break
        if arg.text and arg.text.startswith("-") and not arg.text.startswith("--"):
            letters.update(arg.text[1:])
    return letters


def _long_options(args: list[Arg]) -> set[str]:
    names: set[str] = set()
    for arg in args:
        if arg.text == "--":
            break
        if arg.text and arg.text.startswith("--") and len(arg.text) > 2:
            names.add(arg.text.split("=", 1)[0])
    return names


def _operands(args: list[Arg]) -> list[Arg]:
    """Arguments that are not options (GNU tools accept options anywhere before `--`)."""
    out: list[Arg] = []
    after_dashes = False
    for arg in args:
        if after_dashes:
            out.append(arg)
        elif arg.text == "--":
            after_dashes = True
        elif not (arg.text and arg.text.startswith("-") and arg.text != "-"):
            out.append(arg)
    return out


def _abbreviates(name: str, full: str, minimum: int = 4) -> bool:
    """getopt_long accepts unique prefixes: `--rot` means `--rotate`."""
    return len(name) >= minimum and full.startswith(name)


# --------------------------------------------------------------------------- option parsing


@dataclass
class _Opts:
    options: list[tuple[str, Arg | None]]
    operands: list[Arg]
    unsure: bool  # an option the spec does not know: whether it takes a value is a guess

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.options)

    def values(self, *names: str) -> list[Arg]:
        return [value for name, value in self.options if name in names and value is not None]


def _getopt(
    args: list[Arg],
    short_value: str = "",
    long_value: frozenset[str] | set[str] = frozenset(),
    short_flags: str | None = None,
    long_flags: frozenset[str] | set[str] | None = None,
    permute: bool = False,
    short_optional: str = "",
) -> _Opts:
    """getopt-style split of options and operands. Without permute, parsing stops at the first operand."""
    options: list[tuple[str, Arg | None]] = []
    operands: list[Arg] = []
    unsure = False
    known_long = set(long_value) | set(long_flags or ())
    index = 0
    while index < len(args):
        arg = args[index]
        text = arg.text
        if text is None:
            unsure = True
            if not permute:
                operands.extend(args[index:])
                break
            operands.append(arg)
            index += 1
            continue
        if text == "--":
            operands.extend(args[index + 1:])
            break
        if text.startswith("--"):
            name, equals, value = text.partition("=")
            matches = [k for k in known_long if k.startswith(name)]
            if name not in known_long and len(matches) == 1:
                name = matches[0]
            if name in long_value and not equals:
                options.append((name, args[index + 1] if index + 1 < len(args) else None))
                index += 2
                continue
            if long_flags is not None and name not in known_long:
                unsure = True
            options.append((name, Arg(value) if equals else None))
            index += 1
            continue
        if text.startswith("-") and len(text) > 1:
            position = 1
            while position < len(text):
                letter = text[position]
                rest = text[position + 1:]
                if letter in short_value:
                    if rest:
                        options.append(("-" + letter, Arg(rest)))
                    else:
                        options.append(("-" + letter, args[index + 1] if index + 1 < len(args) else None))
                        index += 1
                    break
                if letter in short_optional:
                    options.append(("-" + letter, Arg(rest) if rest else None))
                    break
                if short_flags is not None and letter not in short_flags:
                    unsure = True
                options.append(("-" + letter, None))
                position += 1
            index += 1
            continue
        if not permute:
            operands.extend(args[index:])
            break
        operands.append(arg)
        index += 1
    return _Opts(options, operands, unsure)


# --------------------------------------------------------------------------- declarative specs
#
# A spec lists every option a program accepts, how many values each takes, and what the ones that
# are not read-only do. It is read the way the program's own parser reads its arguments:
#
#   gnu       getopt_long: options anywhere before `--` (permuted), long options by any unique
#             prefix (`--s=@0` is `--set=@0` when nothing else starts with `--s`), `--opt=value` or
#             `--opt value` for a required value, `--opt=value` only for an optional one, short
#             options clustered (`-rf`) with a stuck value (`-fVALUE`) or the next word.
#   optparse  Python's optparse and argparse: the same, long options by unique prefix.
#   git       git's parse-options: the same, plus `--no-NAME` for every option and its prefixes.
#   exact     long options only by their full names (Go's pflag: docker, podman, kubectl), and
#             every one of them may also be written with a single dash where the program says so.
#
# An option that is not in the spec, an ambiguous prefix, or a word known only when the command
# runs makes the command not read-only: the classifier cannot tell what the program will do.
#
# The options are written as text, one item per option, separated by whitespace:
#
#   -a|--all            a flag with two names
#   -f|--file=          a required value (`-fX`, `-f X`, `--file=X`, `--file X`)
#   --color[=]          an optional value (`--color`, `--color=never`; never the next word)
#   -s|--set=!clock     not read-only: the effect named `clock` in the spec's effects says what it does
#   -NUM                the program takes `-5` as a number (head, tail)


RUN_TIME_WORD = "a word known only when the command runs"
REMOTE = "remote"  # the effect of an option that makes a program act on another host (systemctl -H)


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]
    arity: str  # "none", "required" or "optional"
    effect: str | None = None  # key of Spec.effects; None: the option is read-only

    @property
    def shown(self) -> str:
        return self.names[-1]


@dataclass(frozen=True)
class Effect:
    cls: RiskClass
    what: str  # "sets the system clock": the reason reads "`date --set` sets the system clock"


# systemd's -H runs the tool over SSH on another machine, -M inside a container's manager: what it does
# there is not what the classifier sees. Name it under REMOTE in a spec's effects.
REMOTE_HOST = Effect(RiskClass.MUTATING, "operates on another host or container, beyond what the classifier can see")


@dataclass(frozen=True)
class Used:
    """One option as the program will read it."""

    option: Option
    written: str  # as the command wrote it: "--s"
    value: Arg | None


@dataclass(frozen=True)
class Parsed:
    used: list[Used]
    operands: list[Arg]
    unknown: list[str]  # options the spec does not list, ambiguous prefixes, words known only at run time
    rest: list[Arg]  # what follows the subcommand, for specs that stop there

    def has(self, *names: str) -> bool:
        return any(name in u.option.names for u in self.used for name in names)

    def values(self, *names: str) -> list[Arg]:
        return [u.value for u in self.used if u.value is not None and any(n in u.option.names for n in names)]

    @property
    def effects(self) -> list[Used]:
        return [u for u in self.used if u.option.effect is not None]


class Spec:
    """The options of one program (or of one subcommand), read with its parser's semantics."""

    def __init__(self, program: str, options: str, *, style: str = "gnu", permute: bool = True,
                 effects: dict[str, Effect] | None = None, numbers: bool = False, single_dash_long: bool = False,
                 stop_at_operand: bool = False, files: bool = False, aliases: tuple[str, ...] = (),
                 help: tuple[tuple[str, ...], ...] = (("--help",),), label: str = "", not_options: str = ""):
        self.program = program
        self.label = label  # the subcommand this spec is of ("status" for `git status`), "" for the program
        self.help = help  # the arguments that print its options, read by the test that checks the spec
        self.not_options = set(not_options.split())  # words in that help text that only look like options
        self.aliases = (program, *aliases)  # names the program is run by (egrep for grep)
        self.files = files  # its operands are files it opens for reading: /dev/watchdog is not read-only
        self.style = style
        self.permute = permute and not stop_at_operand
        self.stop_at_operand = stop_at_operand  # the first operand is a subcommand: it ends these options
        self.effects = effects or {}
        self.numbers = numbers or "-NUM" in options.split()
        self.single_dash_long = single_dash_long
        self.long: dict[str, Option] = {}
        self.short: dict[str, Option] = {}
        for item in options.split():
            if item == "-NUM":
                continue
            option = _parse_item(item)
            if option.effect is not None and option.effect not in self.effects:
                raise ValueError(f"{program}: option {item} names an effect that is not defined")
            for name in option.names:
                if name.startswith("--"):
                    self.long[name] = option
                elif len(name) == 2:
                    self.short[name[1]] = option
                else:  # a long option written with one dash (`-name`, pflag-style or find-style)
                    self.long["-" + name] = option

    @property
    def read_only_options(self) -> bool:
        """No option changes anything: a glob that expands to an option cannot make the command write."""
        return all(o.effect is None for o in {*self.long.values(), *self.short.values()})

    def long_names(self) -> set[str]:
        return {name for name in self.long}

    def parse(self, args: list[Arg]) -> Parsed:
        used: list[Used] = []
        operands: list[Arg] = []
        unknown: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            text = arg.text
            if text is None:
                unknown.append(RUN_TIME_WORD)
                index += 1
                continue
            if text == "--":
                operands.extend(args[index + 1:])
                break
            if text.startswith("--") or (self.single_dash_long and text.startswith("-") and len(text) > 2
                                          and "-" + text.split("=", 1)[0] in self.long):
                index = self._long(args, index, used, unknown)
                continue
            if text.startswith("-") and len(text) > 1:
                if self.numbers and text[1:].isdigit():
                    index += 1
                    continue
                index = self._short(args, index, used, unknown)
                continue
            if not self.permute:
                operands.extend(args[index:])
                break
            operands.append(arg)
            index += 1
        return Parsed(used, operands, unknown, [])

    def _long(self, args: list[Arg], index: int, used: list[Used], unknown: list[str]) -> int:
        text = args[index].text or ""
        if not text.startswith("--"):
            text = "-" + text  # a single-dash long option, looked up as `--name`
        name, equals, value = text.partition("=")
        option = self._lookup_long(name)
        if option is None:
            unknown.append(args[index].text or name)
            return index + 1
        if option.arity == "required" and not equals:
            value_arg = args[index + 1] if index + 1 < len(args) else None
            used.append(Used(option, name, value_arg))
            return index + 2
        if option.arity == "none" and equals and not (self.style == "exact" and value in ("true", "false")):
            unknown.append(args[index].text or name)  # the program refuses a value here
            return index + 1
        used.append(Used(option, name, Arg(value) if equals else None))
        return index + 1

    def _lookup_long(self, name: str) -> Option | None:
        if name in self.long:
            return self.long[name]
        if self.style == "git" and name.startswith("--no-") and "--" + name[5:] in self.long:
            return self.long["--" + name[5:]]
        if self.style == "exact":
            return None
        matches = {o for full, o in self.long.items() if full.startswith(name) and len(name) > 2}
        if self.style == "git" and name.startswith("--no-"):
            matches |= {o for full, o in self.long.items() if full.startswith("--" + name[5:])}
        # Several names of one option share a prefix without being ambiguous (`--co` of `--color`,
        # `--colour`); a prefix of two different options is an error the program reports.
        return next(iter(matches)) if len(matches) == 1 else None

    def _short(self, args: list[Arg], index: int, used: list[Used], unknown: list[str]) -> int:
        text = args[index].text or ""
        position = 1
        while position < len(text):
            letter = text[position]
            option = self.short.get(letter)
            if option is None:
                unknown.append("-" + letter)
                return index + 1
            rest = text[position + 1:]
            if option.arity == "required":
                if rest:
                    used.append(Used(option, "-" + letter, Arg(rest)))
                    return index + 1
                used.append(Used(option, "-" + letter, args[index + 1] if index + 1 < len(args) else None))
                return index + 2
            if option.arity == "optional":
                used.append(Used(option, "-" + letter, Arg(rest) if rest else None))
                return index + 1
            used.append(Used(option, "-" + letter, None))
            position += 1
        return index + 1


_ITEM = re.compile(r"(?P<names>-[^=\[!]+?)(?P<arity>=|\[=\])?(?:!(?P<effect>[\w-]+))?")


def _parse_item(item: str) -> Option:
    match = _ITEM.fullmatch(item)
    if match is None:
        raise ValueError(f"not an option item: {item!r}")
    names = tuple(match["names"].split("|"))
    arity = {"=": "required", "[=]": "optional", None: "none"}[match["arity"]]
    return Option(names, arity, match["effect"])
