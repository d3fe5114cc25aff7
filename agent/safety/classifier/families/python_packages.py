"""Python package managers: pip, uv, conda."""

from __future__ import annotations

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.families.wrappers import _candidates, _run_wrapper, _Wrapped
from agent.safety.classifier.options import _abbreviates, _getopt, _long_options, _operands
from agent.safety.classifier.registry import _handles, _handles_matching

_PIP_GLOBAL_VALUES = frozenset(
    {"--python", "--proxy", "--retries", "--timeout", "--exists-action", "--trusted-host", "--cert",
     "--client-cert", "--cache-dir", "--log", "--log-file", "--local-log", "--keyring-provider", "--use-feature",
     "--use-deprecated", "--root-user-action", "--directory", "--project", "--config-file", "--color", "-p"}
)
_PIP_READ = frozenset({"list", "freeze", "show", "check", "inspect", "help", "debug", "hash", "tree"})


def _is_pip_log(name: str) -> bool:
    return name != "--local" and any(_abbreviates(name, full) or name == full
                                      for full in ("--log", "--log-file", "--local-log"))


@_handles("pip")
@_handles_matching(r"pip\d*(\.\d+)?")
def _pip_command(an: Analysis, cmd: _Cmd) -> None:
    _pip(an, cmd, cmd.args, cmd.prog)


def _pip(an: Analysis, cmd: _Cmd, args: list[Arg], label: str) -> None:
    """pip (and `python -m pip`, `uv pip`): list/freeze/show are read-only, install mutates, uninstall destroys."""
    index = 0
    while index < len(args) and args[index].text and (args[index].text or "").startswith("-"):
        text = args[index].text or ""
        if text in _PIP_GLOBAL_VALUES:
            index += 1
        index += 1
    if any(_is_pip_log(name) for name in _long_options(args)):
        an.add(MUTATING, "pip:--log", f"`{label} --log` writes a log file")
        return
    if any(a.text in ("--python", "-p") or (a.text or "").startswith("--python=") for a in args):
        an.add(MUTATING, "pip:--python", f"`{label} --python` runs another Python interpreter")
        return
    if index >= len(args):
        an.allow(cmd, label)  # `pip --version`, `pip -h`
        return
    sub = args[index].text
    rest = [a.text for a in args[index + 1:]]
    first = next((t for t in rest if t and not t.startswith("-")), None)
    if sub in _PIP_READ:
        an.allow(cmd, f"{label} {sub}")
    elif (sub, first) in {("config", "list"), ("config", "get"), ("config", "debug"), ("index", "versions"),
                          ("cache", "dir"), ("cache", "info"), ("cache", "list")}:
        an.allow(cmd, f"{label} {sub} {first}")
    elif sub == "uninstall":
        an.add(DESTRUCTIVE, "pip:uninstall", f"`{label} uninstall` removes installed Python packages")
    elif sub == "sync":
        an.add(DESTRUCTIVE, "pip:sync", f"`{label} sync` removes every installed package not in its list")
    elif sub == "install":
        an.add(MUTATING, "pip:install", f"`{label} install` installs or replaces Python packages")
    elif sub in ("download", "wheel"):
        an.add(MUTATING, f"pip:{sub}", f"`{label} {sub}` fetches or builds packages and writes them to disk")
    else:
        an.add(MUTATING, f"pip:{sub or 'unknown'}", f"`{label} {sub or '...'}` is not one of pip's read-only commands")


@_handles("uv")
def _uv(an: Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    index = 0
    while index < len(args) and (args[index].text or "").startswith("-"):
        index += 2 if args[index].text in _PIP_GLOBAL_VALUES else 1
    if index >= len(args):
        if all(t in ("--version", "-V", "--help", "-h") for t in cmd.texts):
            an.allow(cmd)
        else:
            an.add(MUTATING, "uv:unknown", "`uv` with these options is not a read-only command")
        return
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


@_handles("conda", "mamba", "micromamba")
def _conda(an: Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    texts = [a.text for a in operands]
    sub = texts[0] if texts else None
    second = texts[1] if len(texts) > 1 else None
    if sub is None and all(t in ("--version", "-V", "--help", "-h") for t in cmd.texts):
        an.allow(cmd)
    elif sub in ("list", "info", "search") or (sub == "env" and second == "list") or (
        sub == "config" and any(t in ("--show", "--get", "--show-sources") for t in cmd.texts)
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
