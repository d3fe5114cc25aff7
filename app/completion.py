"""`agent completion bash|zsh`: a shell completion script written from the argparse parser itself,
so a new subcommand or flag is completed the day it is added."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh")

# Positionals and option values that name files; everything else completes to nothing of ours
# (bash then falls back to file names, as `complete -o default` asks).
_FILE_DESTS = {"goal", "transcript", "transcripts", "dir", "html", "command"}


@dataclass
class Option:
    flags: list[str]
    help: str
    takes_value: bool
    repeatable: bool
    metavar: str
    files: bool


@dataclass
class Positional:
    name: str
    help: str
    many: bool
    choices: list[str]
    files: bool


@dataclass
class Command:
    name: str
    help: str
    options: list[Option] = field(default_factory=list)
    positionals: list[Positional] = field(default_factory=list)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def _describe(parser: argparse.ArgumentParser, name: str, help: str) -> Command:
    cmd = Command(name, _one_line(help))
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction) or a.help == argparse.SUPPRESS:
            continue
        if a.option_strings:
            cmd.options.append(Option(
                flags=list(a.option_strings), help=_one_line(a.help), takes_value=a.nargs != 0,
                repeatable=isinstance(a, (argparse._AppendAction, argparse._CountAction)),
                metavar=str(a.metavar or a.dest).upper(), files=a.dest in _FILE_DESTS))
        else:
            cmd.positionals.append(Positional(
                name=str(a.metavar or a.dest), help=_one_line(a.help), many=a.nargs in ("*", "+"),
                choices=[str(c) for c in a.choices or ()], files=a.dest in _FILE_DESTS))
    return cmd


def commands(parser: argparse.ArgumentParser) -> tuple[Command, list[Command]]:
    """The top level and every subcommand, as the parser defines them."""
    top = _describe(parser, parser.prog, parser.description or "")
    sub = _subparsers(parser)
    if sub is None:
        return top, []
    helps = {a.dest: a.help for a in sub._choices_actions}
    return top, [_describe(p, name, helps.get(name) or p.description or "") for name, p in sub.choices.items()]


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    top, subs = commands(parser)
    return _bash(parser.prog, top, subs) if shell == "bash" else _zsh(parser.prog, top, subs)


# --------------------------------------------------------------------------- bash


def _bash(prog: str, top: Command, subs: list[Command]) -> str:
    fn = f"_{prog}"

    def words(items: list[str]) -> str:
        return " ".join(items).replace("'", "")

    cases = [(f"        '') opts='{words([f for o in top.options for f in o.flags])}'; "
              f"choices='{words([c.name for c in subs])}' ;;")]
    for c in subs:
        flags = [f for o in c.options for f in o.flags]
        valued = [f for o in c.options if o.takes_value for f in o.flags]
        choices = [x for p in c.positionals for x in p.choices]
        cases.append(f"        {c.name}) opts='{words(flags)}'; valued='{words(valued)}'; "
                     f"choices='{words(choices)}' ;;")
    body = "\n".join(cases)
    return f"""# bash completion for {prog}. Load it with:  source <({prog} completion bash)
# or keep it:  {prog} completion bash > ~/.local/share/bash-completion/completions/{prog}
{fn}() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} sub= i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${{COMP_WORDS[i]}} in
            --) [[ -n $sub ]] && {{ COMPREPLY=(); return; }} ;;  # a command for the host: files
            -*) ;;
            *) [[ -z $sub ]] && sub=${{COMP_WORDS[i]}} ;;
        esac
    done
    local opts= valued= choices=
    case $sub in
{body}
        *) COMPREPLY=(); return ;;
    esac
    if [[ " $valued " == *" $prev "* ]]; then
        COMPREPLY=()  # the option's value: file names
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$choices" -- "$cur"))
    fi
}}
complete -o default -F {fn} {prog}
"""


# --------------------------------------------------------------------------- zsh


def _zq(text: str) -> str:
    """Text inside a zsh single-quoted word."""
    return text.replace("'", "'\\''")


def _zhelp(text: str) -> str:
    """A description inside an _arguments `[...]`, in a single-quoted word."""
    text = text if len(text) <= 90 else text[:87] + "..."
    return _zq(text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]"))


def _zsh_specs(c: Command, ends_line: bool = False) -> list[str]:
    """_arguments specs of a command's options and positionals; `ends_line`: each option is the
    last word (`--help`, `--version` at the top level)."""
    specs = []
    for o in c.options:
        value = f":{o.metavar.lower()}:{'_files' if o.files else ' '}" if o.takes_value else ""
        star = "*" if o.repeatable else ""
        eq = "=" if o.takes_value and all(f.startswith("--") for f in o.flags) else ""
        excl = "(- *)" if ends_line else ("" if star or len(o.flags) == 1 else f"({' '.join(o.flags)})")
        prefix, rest = excl + star, f"{eq}[{_zhelp(o.help)}]{value}'"
        if len(o.flags) == 1:
            specs.append(f"'{prefix}{o.flags[0]}{rest}")
        else:  # '(-h --help)'{-h,--help}'[...]': zsh's brace expansion makes one spec per flag
            quoted = f"'{prefix}'" if prefix else ""
            specs.append(quoted + "{" + ",".join(o.flags) + "}'" + rest)
    for n, p in enumerate(c.positionals, 1):
        action = f"({' '.join(p.choices)})" if p.choices else ("_files" if p.files else " ")
        specs.append(f"'{'*' if p.many else n}:{_zq(p.name)}:{action}'")
    return specs


def _zsh(prog: str, top: Command, subs: list[Command]) -> str:
    fn = f"_{prog}"
    described = "\n".join(f"        '{c.name}:{_zq(c.help)}'" for c in subs)
    top_specs = " \\\n        ".join(_zsh_specs(Command(top.name, top.help, top.options), ends_line=True))
    cases = []
    for c in subs:
        specs = " \\\n                ".join(_zsh_specs(c))
        cases.append(f"            {c.name})\n                _arguments -s \\\n                {specs} ;;")
    body = "\n".join(cases)
    return f"""#compdef {prog}
# zsh completion for {prog}. Load it with:  source <({prog} completion zsh)
# or keep it as _{prog} in a directory of $fpath:  {prog} completion zsh > ~/.zfunc/_{prog}
{fn}() {{
    local curcontext=$curcontext state line
    local -a subcommands
    subcommands=(
{described}
    )
    _arguments -C \\
        {top_specs} \\
        '1: :->subcommand' \\
        '*:: :->args'
    case $state in
        subcommand) _describe -t commands '{prog} command' subcommands ;;
        args)
            case $line[1] in
{body}
            esac ;;
    esac
}}
if [[ $zsh_eval_context[-1] == loadautoload ]]; then
    {fn} "$@"
else
    compdef {fn} {prog}
fi
"""
