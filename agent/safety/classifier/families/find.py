"""find: the actions that run programs, write files or delete, read the way find reads its expression."""

from __future__ import annotations

import fnmatch

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import Spec
from agent.safety.classifier.paths import normalize, read_risk
from agent.safety.classifier.registry import _handles
from agent.safety.classifier.words import _join

# GNU find (findutils 4.9). Its command line is not getopt: a few options lead
# (`find [-H] [-L] [-P] [-D debugopts] [-Olevel] [starting-point...] [expression]`), then starting
# points up to the first word that looks like an expression (`-x`, `(`, `!`), then the expression,
# whose words are single-dash names, each taking a fixed number of arguments. The spec below holds
# the leading options (what `find --help` lists as options); the expression is read with the tables
# after it. A word of the expression that is in none of them is not read-only: find would refuse it,
# or it is a predicate this classifier does not know.
FIND = Spec("find", "-H -L -P -D= -O[=] --help --version", permute=False)

# Operators.
_OPERATORS = frozenset({"(", ")", "!", ",", "-not", "-a", "-and", "-o", "-or"})
# Positional and normal options, tests and actions without an argument, all read-only.
_NO_ARGUMENT_NAMES = (
    "-daystart -follow -nowarn -warn -depth -d -mount -noleaf -xdev -ignore_readdir_race -noignore_readdir_race "
    "-help -version -empty -executable -false -nogroup -nouser -readable -true -writable -ls -print -print0 "
    "-prune -quit"
)
_NO_ARGUMENT = frozenset(_NO_ARGUMENT_NAMES.split())
# ... and with one argument (a number, a name, a pattern, a format for stdout, a file only stat()ed).
_ONE_ARGUMENT_NAMES = (
    "-regextype -maxdepth -mindepth -amin -anewer -atime -cmin -cnewer -context -ctime -fstype -gid -group "
    "-ilname -iname -inum -ipath -iregex -iwholename -links -lname -mmin -mtime -name -newer -path -perm "
    "-regex -samefile -size -type -uid -used -user -wholename -xtype -printf"
)
_ONE_ARGUMENT = frozenset(_ONE_ARGUMENT_NAMES.split()) | {f"-newer{x}{y}" for x in "aBcm" for y in "aBcmt"}
# -files0-from opens FILE and reads the starting points from it.
_READS = frozenset({"-files0-from"})
# Actions that run a command given as the words up to `;` (or `{} +`).
_FIND_RUNNERS = ("-exec", "-execdir", "-ok", "-okdir")
# Actions that write their output into the file named by the next word (-fprintf: FILE FORMAT).
_FIND_WRITERS = {"-fprint": 1, "-fprint0": 1, "-fls": 1, "-fprintf": 2}
_FIND_DANGEROUS = _FIND_RUNNERS + tuple(_FIND_WRITERS) + ("-delete", "-files0-from")


def _looks_like_expression(text: str | None) -> bool:
    """find's own test for where the starting points end."""
    if text is None:
        return False
    return (text.startswith("-") and len(text) > 1) or text in ("(", "!")


def _leading(args: list[Arg]) -> int:
    """How many words the leading options take (-H, -L, -P, -D X, -OLEVEL, --)."""
    index = 0
    while index < len(args):
        text = args[index].text
        if text in ("-H", "-L", "-P"):
            index += 1
        elif text == "-D":
            index += 2
        elif text is not None and text.startswith(("-D", "-O")) and len(text) > 2:
            index += 1
        elif text == "--":
            return index + 1
        else:
            break
    return index


def _runner_end(args: list[Arg], start: int) -> int:
    """Where -exec's command ends: at `;`, or at `+` right after `{}` (another `+` is an argument)."""
    end = start
    while end < len(args):
        text = args[end].text
        if text == ";" or (text == "+" and end > start and args[end - 1].text == "{}"):
            return end
        end += 1
    return end


@_handles("find")
def _find(an: Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    clean = True
    for arg in args:
        if arg.pattern and arg.text and any(fnmatch.fnmatchcase(d, arg.text) for d in _FIND_DANGEROUS):
            an.add(
                MUTATING,
                "find:glob-option",
                f"the unquoted pattern `{arg.text}` could expand to a find action such as -delete or -exec",
            )
            clean = False
            break
    index = _leading(args)
    if any(a.text in ("--help", "--version") for a in args[:1]):
        index = 1
    # Starting points: find walks them; through /proc/PID/cwd it walks a directory nobody can name here.
    while index < len(args) and not _looks_like_expression(args[index].text):
        text = args[index].text
        if text is None:
            an.add(MUTATING, "find:unknown-option", "`find` with a word known only when the command runs")
            clean = False
        elif text.startswith("/") and normalize(text) is None:
            an.add(MUTATING, "find:unknown-path",
                   f"`find {text}` walks a directory the classifier cannot know (another process's cwd)")
            clean = False
        index += 1
    while index < len(args):
        arg = args[index]
        text = arg.text
        index += 1
        if text in _OPERATORS or text in _NO_ARGUMENT:
            continue
        if text in _ONE_ARGUMENT:
            index += 1
            continue
        if text in _READS:
            source = args[index] if index < len(args) else None
            index += 1
            if source is not None and source.text != "-":
                problem = read_risk(source.text, an.cwd)
                if problem is not None:
                    an.add(problem[0], f"find:{problem[1]}", f"`find {text}` reads {problem[2]}")
                    clean = False
            continue
        if text in _FIND_RUNNERS:
            end = _runner_end(args, index)
            inner = args[index:end]
            an.add(
                MUTATING,
                f"find:{text}",
                f"`find` with {text} runs another command",
                structural=True,
                decoded=_join(inner) if inner else None,
            )
            an.inner_words(inner, f"find {text}")
            index = end + 1
            clean = False
        elif text == "-delete":
            an.add(DESTRUCTIVE, "find:-delete", "`find -delete` deletes every file it matches")
            clean = False
        elif text in _FIND_WRITERS:
            an.add(MUTATING, f"find:{text}", f"`find {text}` writes its output to a file")
            if index < len(args):
                an.write(args[index], f"`find {text}`", "find")
            index += _FIND_WRITERS[text]
            clean = False
        else:
            shown = text if text is not None else "a word known only when the command runs"
            an.add(MUTATING, "find:unknown-option",
                   f"`find` with `{shown}`: not a find predicate, action or operator the classifier knows, "
                   f"so what it does cannot be told")
            clean = False
    if clean:
        an.allow(cmd, check_globs=False)


SPECS = [FIND]
