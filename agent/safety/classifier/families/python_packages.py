"""Python package managers: pip, uv, conda."""

from __future__ import annotations

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.families.wrappers import _candidates, _run_wrapper, _Wrapped
from agent.safety.classifier.options import Effect, Parsed, Spec, _getopt, _operands
from agent.safety.classifier.registry import _handles, _handles_matching, files_read_ok, judge_by_spec

# --------------------------------------------------------------------------- pip
#
# pip reads its options with optparse, long options by any unique prefix (`--py=X` is `--python=X`).
# The main parser stops at the first positional word, the subcommand; the subcommand's parser then
# reads every argument again, general options included, less the first word equal to the
# subcommand's name (pip's parse_command removes it with list.remove). The classifier reads both.

_PIP_GENERAL = (
    "-h|--help --debug --isolated --require-virtualenv --python=!python -v|--verbose -V|--version -q|--quiet "
    "--local-log|--log-file|--log=!log --no-input --keyring-provider= --proxy= --retries= --timeout= "
    "--exists-action= --trusted-host= --cert= --client-cert= --cache-dir=!cache --no-cache-dir "
    "--disable-pip-version-check --no-color --no-python-version-warning --use-feature= --use-deprecated= "
    "--resume-retries= "
)
_PIP_EFFECTS = {
    # pip re-runs itself under that interpreter: whatever program the path names runs.
    "python": Effect(MUTATING, "runs another Python interpreter"),
    "log": Effect(MUTATING, "writes a log file"),
    # the index's HTTP cache and the version check's state are written there
    "cache": Effect(MUTATING, "writes pip's cache into that directory"),
    # the configured index may be any host on the internet; reads go only to the session's hosts
    "network": Effect(MUTATING, "asks the package index over the network, a host outside the session"),
}
_PIP_INDEX = "-i|--index-url= --extra-index-url= --no-index -f|--find-links= "
_PIP_TARGET = "--platform= --python-version= --implementation= --abi= "


# named in the help's prose ("Implied with --no-index", "the --hash option of install")
_PIP_NOT_OPTIONS = "--no-index --hash"


def _pip_spec(label: str, options: str = "", files: bool = False) -> Spec:
    return Spec("pip", _PIP_GENERAL + options, style="optparse", effects=_PIP_EFFECTS, label=label, files=files,
                help=((label, "--help"),), not_options=_PIP_NOT_OPTIONS)


PIP = Spec("pip", _PIP_GENERAL, style="optparse", effects=_PIP_EFFECTS, stop_at_operand=True,
           not_options=_PIP_NOT_OPTIONS)
_PIP_SUBCOMMANDS = {
    # pip list asks the index for --outdated and --uptodate, and its version check asks the index -i names
    "list": _pip_spec("list", "-i|--index-url=!network --extra-index-url=!network --no-index "
                              "-f|--find-links=!network -o|--outdated!network -u|--uptodate!network -e|--editable -l|--local --user --path= "
                              "--pre --format= --not-required --exclude-editable --include-editable --exclude="),
    "freeze": _pip_spec("freeze", "-r|--requirement= -l|--local --user --path= --all --exclude-editable --exclude="),
    "show": _pip_spec("show", "-f|--files"),
    "check": _pip_spec("check"),
    "inspect": _pip_spec("inspect", "--local --user --path="),
    "debug": _pip_spec("debug", _PIP_TARGET),
    "hash": _pip_spec("hash", "-a|--algorithm=", files=True),  # reads the archives it is given
    "help": _pip_spec("help"),
    "completion": _pip_spec("completion", "-b|--bash -z|--zsh -f|--fish -p|--powershell"),
    "index": _pip_spec("index", _PIP_INDEX + _PIP_TARGET + "--ignore-requires-python --pre --no-binary= "
                                "--only-binary= --json"),
    # `--editor` only matters to `pip config edit`, which is not read-only anyway
    "config": _pip_spec("config", "--editor= --global --user --site"),
    "cache": _pip_spec("cache", "--format="),
}
# Subcommands whose first operand says what they do, and the read-only values of it.
_PIP_VERBS = {"config": ("list", "get", "debug"), "cache": ("dir", "info", "list")}
SPECS = [PIP, *_PIP_SUBCOMMANDS.values()]


def _pip_effect(an: Analysis, parsed: Parsed, spec: Spec, label: str) -> bool:
    """Record what the options do; True when they are read-only."""
    if parsed.unknown:
        an.add(MUTATING, "pip:unknown-option", f"`{label}` with `{parsed.unknown[0]}`: an option the classifier's spec "
                                               f"of pip does not list (or a prefix of more than one)")
        return False
    for used in parsed.effects:
        meaning = "" if used.written == used.option.shown else f" (`{used.option.shown}`)"
        an.add(MUTATING, f"pip:{used.option.shown}",
               f"`{label} {used.written}`{meaning} {spec.effects[used.option.effect or ''].what}")
        return False
    return True


@_handles("pip")
@_handles_matching(r"pip\d*(\.\d+)?")
def _pip_command(an: Analysis, cmd: _Cmd) -> None:
    _pip(an, cmd, cmd.args, cmd.prog)


def _pip(an: Analysis, cmd: _Cmd, args: list[Arg], label: str) -> None:
    """pip (and `python -m pip`, `uv pip`): list/freeze/show are read-only, install mutates, uninstall destroys."""
    main = PIP.parse(args)
    sub_arg = main.operands[0] if main.operands else None
    sub = sub_arg.text if sub_arg is not None else None
    if sub == "uninstall":
        an.add(DESTRUCTIVE, "pip:uninstall", f"`{label} uninstall` removes installed Python packages")
        return
    if sub == "sync":
        an.add(DESTRUCTIVE, "pip:sync", f"`{label} sync` removes every installed package not in its list")
        return
    if sub == "install":
        an.add(MUTATING, "pip:install", f"`{label} install` installs or replaces Python packages")
        return
    if sub == "index":
        an.add(MUTATING, "pip:index", f"`{label} index` asks the package index over the network, a host outside "
                                      "the session")
        return
    if sub in ("download", "wheel"):
        an.add(MUTATING, f"pip:{sub}", f"`{label} {sub}` fetches or builds packages and writes them to disk")
        return
    if not _pip_effect(an, main, PIP, label):
        return
    if sub_arg is None:
        an.allow(cmd, label)  # `pip --version`, `pip -h`
        return
    spec = _PIP_SUBCOMMANDS.get(sub or "")
    if spec is None or sub_arg.pattern:
        an.add(MUTATING, f"pip:{sub or 'unknown'}", f"`{label} {sub or '...'}` is not one of pip's read-only commands")
        return
    # the subcommand's parser reads the arguments less the first word equal to the subcommand
    position = next(i for i, a in enumerate(args) if a.text == sub)
    parsed = spec.parse(args[:position] + args[position + 1:])
    if not _pip_effect(an, parsed, spec, f"{label} {sub}"):
        return
    shown = f"{label} {sub}"
    if sub in _PIP_VERBS:
        verb = parsed.operands[0].text if parsed.operands else None
        if verb not in _PIP_VERBS[sub]:
            an.add(MUTATING, f"pip:{sub}", f"`{label} {sub} {verb or ''}`: only {', '.join(_PIP_VERBS[sub])} of "
                                          f"`{label} {sub}` are read-only; the others change files or settings")
            return
        shown = f"{label} {sub} {verb}"
    files = parsed.operands if spec.files else []
    files += parsed.values("-r")
    if files_read_ok(an, "pip", files, shown):
        an.allow(cmd, shown, check_globs=True)


# uv reads its options with clap: full names only, no abbreviation.
UV = Spec(
    "uv",
    "-q|--quiet -v|--verbose --color= --native-tls --no-native-tls --offline --no-offline --allow-insecure-host= "
    "--preview --no-preview --isolated --show-settings --no-progress -n|--no-cache --cache-dir=!cache "
    "--python-preference= --no-python-downloads --managed-python --no-managed-python --no-config -h|--help "
    "-V|--version",
    style="exact", stop_at_operand=True,
    effects={"cache": Effect(MUTATING, "writes uv's cache into that directory")},
)


@_handles("uv")
def _uv(an: Analysis, cmd: _Cmd) -> None:
    main = UV.parse(cmd.args)
    if not main.operands:
        judge_by_spec(an, cmd, UV)  # `uv --version`
        return
    split = len(cmd.args) - len(main.operands)
    args = cmd.args[split:]
    index = 0
    if main.unknown or main.effects:  # records what the global options do; the subcommand is judged too
        judge_by_spec(an, _Cmd(cmd.name, cmd.prog, cmd.args[:split], cmd.stdin), UV)
    sub = args[index].text
    rest = args[index + 1:]
    rest_texts = [a.text for a in rest]
    if sub == "pip":
        _pip(an, cmd, rest, "uv pip")
    elif sub == "run":
        opts = _getopt(
            rest,
            short_value="pw",
            long_value={"--with", "--python", "--directory", "--project", "--env-file", "--extra", "--group",
                        "--package", "--index", "--index-url", "--extra-index-url", "--with-requirements"},
            short_flags="qvm",
            long_flags={"--no-project", "--isolated", "--all-extras", "--frozen", "--locked", "--no-sync",
                        "--active", "--offline", "--module", "--script", "--no-dev"},
        )
        _run_wrapper(an, cmd, _Wrapped(_candidates(opts, opts.operands), note="runs a command in a project environment"))
    elif sub == "sync" and "--inexact" not in rest_texts:
        an.add(DESTRUCTIVE, "uv:sync", "`uv sync` removes packages that are not in the lockfile")
    elif sub == "remove" or (sub == "tool" and rest_texts[:1] == ["uninstall"]) or (
        sub == "venv" and "--clear" in rest_texts
    ):
        an.add(DESTRUCTIVE, f"uv:{sub}", f"`uv {sub}` removes installed packages or environments")
    else:
        an.add(MUTATING, f"uv:{sub or 'unknown'}", f"`uv {sub or '...'}` is not a read-only command")


# conda reads its options with argparse: long options by any unique prefix, the subcommand first.
# `conda config` is read-only only with options that print; `--get` is left out: with no key found
# conda writes the rc file back (red team, from conda's source).
_CONDA_CONFIG_OPTIONS = ("--system", "--env", "--file", "--show", "--show-sources", "--validate", "--describe",
                         "--write-default", "--get", "--append", "--prepend", "--add", "--set", "--remove",
                         "--remove-key", "--stdin", "--json", "--verbose", "--quiet", "--help")
_CONDA_CONFIG_READS = frozenset({"--system", "--env", "--file", "--show", "--show-sources", "--validate",
                                 "--describe", "--json", "--verbose", "--quiet", "--help", "-v", "-q", "-h"})


def _conda_config_reads(args: list[Arg]) -> bool:
    for arg in args:
        text = arg.text
        if text is None or arg.pattern:
            return False
        if text.startswith("--"):
            name = text.split("=", 1)[0]
            matches = [o for o in _CONDA_CONFIG_OPTIONS if o == name] or \
                [o for o in _CONDA_CONFIG_OPTIONS if o.startswith(name) and len(name) > 2]
            if len(matches) != 1 or matches[0] not in _CONDA_CONFIG_READS:
                return False
        elif text.startswith("-") and len(text) > 1 and not all(letter in "vqh" for letter in text[1:]):
            return False
    return any((a.text or "").startswith("--") for a in args)


@_handles("conda", "mamba", "micromamba")
def _conda(an: Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    texts = [a.text for a in operands]
    sub = texts[0] if texts else None
    second = texts[1] if len(texts) > 1 else None
    # the subcommand comes first: words before it can only be conda's own -V/-h
    leading = cmd.args[:next((i for i, a in enumerate(cmd.args) if a.text == sub), len(cmd.args))]
    if sub is not None and any(a.text not in ("--version", "-V", "--help", "-h") for a in leading):
        an.add(MUTATING, f"{cmd.prog}:unknown", f"`{cmd.prog}` with options before its subcommand is not read-only")
    elif sub is None and all(t in ("--version", "-V", "--help", "-h") for t in cmd.texts):
        an.allow(cmd)
    elif sub == "search" and not any(a.text == "--offline" for a in cmd.args):
        an.add(MUTATING, f"{cmd.prog}:search", f"`{cmd.prog} search` asks its channels over the network (the "
                                               f"configured ones, or any `-c` names): hosts outside the session; "
                                               f"add --offline to search the local cache")
    elif sub in ("list", "info") or (sub == "search" and not any(
            (a.text or "").startswith(("-c", "--channel", "--override")) for a in cmd.args)) or (sub == "env" and second == "list") or (
        sub == "config" and _conda_config_reads(cmd.args[len(leading) + 1:])
    ):
        an.allow(cmd, f"{cmd.prog} {sub}")
    elif sub == "run":
        opts = _getopt(cmd.args[1:] if cmd.args and cmd.args[0].text == "run" else cmd.args,
                       short_value="np", long_value={"--name", "--prefix", "--cwd"},
                       short_flags="", long_flags={"--no-capture-output", "--live-stream", "--debug-wrapper-scripts"})
        _run_wrapper(an, cmd, _Wrapped(_candidates(opts, opts.operands), note="runs a command in a conda environment"))
    elif sub in ("remove", "uninstall") or (sub == "env" and second == "remove"):
        shown = f"{sub} {second}" if sub == "env" else sub
        an.add(DESTRUCTIVE, f"{cmd.prog}:remove", f"`{cmd.prog} {shown}` removes packages or environments")
    else:
        an.add(MUTATING, f"{cmd.prog}:{sub or 'unknown'}", f"`{cmd.prog} {sub or '...'}` is not a read-only command")
