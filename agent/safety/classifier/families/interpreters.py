"""Interpreters: shells, Python, Perl, Node; code given inline, as a script or on stdin; xargs and source."""

from __future__ import annotations

import posixpath
import re

from agent.safety.classifier.command import DESTRUCTIVE, FORBIDDEN, MUTATING, Analysis, Arg, _Cmd, _Stdin
from agent.safety.classifier.families.nvidia import _runfile
from agent.safety.classifier.families.python_packages import _pip
from agent.safety.classifier.families.python_probes import probe_problem
from agent.safety.classifier.families.wrappers import (
    _candidates,
    _innermost_prog,
    _run_code,
    _run_wrapper,
    _Wrapped,
    _xargs_opts,
)
from agent.safety.classifier.paths import UNTRUSTED_DIRS, in_trusted_places
from agent.safety.classifier.registry import _HANDLERS, _checked, _handles, _handles_matching, files_read_ok
from agent.safety.classifier.tree import _excerpt, _first_descendant
from tools.base import RiskClass


@_handles("xargs")
def _xargs(an: Analysis, cmd: _Cmd) -> None:
    # xargs appends what it reads to the command; when the input is known, so are the arguments.
    opts = _xargs_opts(cmd.args)
    command = opts.operands or [Arg("echo")]
    wrapped = _Wrapped(_candidates(opts, command), note="runs a command on arguments read from its input")
    data = cmd.stdin.data if cmd.stdin is not None else None
    if data is not None and wrapped.commands:
        text = data.decode("utf-8", "replace")
        replace = [v.text for v in opts.values("-I", "--replace", "-i") if v.text] or (
            ["{}"] if opts.has("-i", "--replace") else []
        )
        if replace:
            lines = [line for line in text.splitlines() if line.strip()][:8]
            wrapped.commands = [
                [Arg(a.text.replace(replace[0], line) if a.text else None) for a in c]
                for c in wrapped.commands for line in lines
            ] or wrapped.commands
        else:
            words = [Arg(w) for w in text.split()[:64]]
            wrapped.commands = [c + words for c in wrapped.commands]
    _run_wrapper(an, cmd, wrapped)
    inner = _innermost_prog(command)
    if inner is not None and _language_of(inner) is not None and cmd.stdin is not None and cmd.stdin.kind == "pipe":
        _piped_code(an, cmd, inner, _language_of(inner) or "sh", None)


@_handles("source", ".")
def _source(an: Analysis, cmd: _Cmd) -> None:
    if not cmd.args:
        an.add(MUTATING, "source", f"`{cmd.prog}` without a file is not read-only")
        return
    if cmd.texts in (["/etc/os-release"], ["/usr/lib/os-release"]):
        # the OS's identification, written by its base package: variable assignments only (os-release(5))
        an.allow(cmd, f"{cmd.prog} /etc/os-release")
        return
    _script(an, cmd, cmd.args[0], cmd.args[1:], "sh", rule="source")


# -- interpreters


_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "rbash", "yash", "posh"})
_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?")
_WORKLOAD_PYTHON = re.compile(r"python(3(\.\d+)?)?")
# Benchmark options that write files (results, traces, logs): the run is then no longer read-only.
_WORKLOAD_WRITE_FLAGS = ("--output-file", "--output-dir", "--output-json", "--output-path", "--result", "--save",
                         "--profile", "--torch-profile", "--log-file", "--dump", "--append-result", "--export",
                         "--trace")
_WORKLOAD_MODULES = frozenset({"sglang.bench_serving", "sglang.bench_one_batch", "sglang.bench_offline_throughput"})
_BENCHMARK_SCRIPT = re.compile(r"(\./)?benchmarks/[A-Za-z0-9_][A-Za-z0-9_.-]*\.py")


_LANGUAGE_NAMES = {"sh": "shell", "python": "Python", "perl": "Perl", "ruby": "Ruby", "node": "JavaScript",
                   "nodejs": "JavaScript", "php": "PHP", "lua": "Lua"}


def _language_of(prog: str) -> str | None:
    if prog in _SHELLS:
        return "sh"
    if _PYTHON_NAME.fullmatch(prog):
        return "python"
    if re.fullmatch(r"perl[\d.]*", prog):
        return "perl"
    if prog in ("ruby", "node", "nodejs", "php", "lua"):
        return prog
    return None


@_handles(*_SHELLS)
def _shell(an: Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    index = 0
    code_mode = stdin_mode = False
    while index < len(args):
        text = args[index].text
        if text is None:
            break
        if text in ("--", "-"):
            stdin_mode = stdin_mode or text == "-"
            index += 1
            break
        if text.startswith("--"):
            if text in ("--rcfile", "--init-file"):
                an.add(MUTATING, f"script:{cmd.prog}", f"`{cmd.prog} {text}` runs a startup file the classifier cannot see")
                index += 1
            index += 1
            continue
        if text[:1] in ("-", "+") and len(text) > 1:
            letters = text[1:]
            code_mode = code_mode or (text[0] == "-" and "c" in letters)
            stdin_mode = stdin_mode or "s" in letters
            if "o" in letters or "O" in letters:
                index += 1  # `-o pipefail`: the option name is the next word
            index += 1
            continue
        break
    operands = args[index:]
    if code_mode:
        _inline_code(an, cmd, operands[0] if operands else None, "sh", "-c")
    elif operands and not stdin_mode:
        _script(an, cmd, operands[0], operands[1:], "sh")
    else:
        _stdin_program(an, cmd, "sh")


@_handles("python")
@_handles_matching(r"python(\d+(\.\d+)?)?")
def _python(an: Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    index = 0
    only_info = True  # nothing but --version / --help so far
    probe_flags = True  # only flags that change nothing about what a version probe may do
    while index < len(args):
        text = args[index].text
        if text is None:
            break
        if text in ("-V", "-VV", "--version", "-h", "--help", "-?"):
            index += 1
            continue
        if text == "-":
            break
        if text.startswith("--"):
            only_info = probe_flags = False
            index += 1
            continue
        if text.startswith("-") and len(text) > 1:
            only_info = False
            letters = text[1:]
            for position, letter in enumerate(letters):
                attached = letters[position + 1:]
                value = Arg(attached) if attached else (args[index + 1] if index + 1 < len(args) else None)
                rest = args[index + 1:] if attached else args[index + 2:]
                if letter == "c":
                    if probe_flags and _version_probe(an, cmd, value):
                        return
                    _inline_code(an, cmd, value, "python", "-c")
                    return
                if letter == "m":
                    _python_module(an, cmd, value, rest, plain_flags=probe_flags)
                    return
                probe_flags = probe_flags and (letter in _PROBE_FLAGS or letter == "X" and value is not None
                                               and value.text in _PROBE_X_OPTIONS)
                if letter in "WX":
                    # -W action:message:category:...: a category with a dot is imported at startup, before
                    # any code runs (`-W ignore::venv.__main__.X` creates a venv).
                    if letter == "W" and (value is None or value.text is None
                                          or "." in (value.text.split(":") + ["", "", ""])[2]):
                        probe_flags = False
                    index += 0 if attached else 1
                    break
            index += 1
            continue
        break
    operands = args[index:]
    if operands and operands[0].text != "-":
        script = operands[0].text or ""
        if an.workload and _WORKLOAD_PYTHON.fullmatch(cmd.prog) and _BENCHMARK_SCRIPT.fullmatch(script):
            an.allow_workload(cmd, script.removeprefix("./"))
        else:
            _script(an, cmd, operands[0], operands[1:], "python")
    elif only_info and args:
        an.allow(cmd)
    else:
        _stdin_program(an, cmd, "python")


# Interpreter flags a version probe may carry: isolation, no bytecode, unbuffered, quiet, warnings.
_PROBE_FLAGS = frozenset("IEsSBuqbOW")
# `python -m` modules that only print the environment: PyTorch's and SGLang's reports, sys.path.
_PROBE_MODULES = frozenset({"torch.utils.collect_env", "sglang.check_env", "site", "xformers.info"})
# -X options that only report (import times, on stderr) or change how text is decoded; pycache_prefix= writes
_PROBE_X_OPTIONS = frozenset({"importtime", "utf8", "faulthandler"})
# Servers' entry points whose `--help` (argparse: it prints and exits) a careful engineer reads before an
# upgrade; importing them runs only their installed package code, as a version probe's imports do.
_HELP_MODULES = frozenset({"vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main", "sglang.launch_server"})
_JSON_TOOL_FLAGS = frozenset({"--sort-keys", "--compact", "--tab", "--no-indent", "--no-ensure-ascii", "--json-lines"})


def _version_probe(an: Analysis, cmd: _Cmd, code: Arg | None) -> bool:
    """`python3 -c` code that only imports known packages and prints their versions and devices.

    After a `cd` the working directory, which `-c` puts first on sys.path, may hold a planted
    `torch.py`; then it is not a probe."""
    if code is None or code.text is None or an.changed_dir:
        return False
    if probe_problem(code.text) is not None:
        return False
    an.allow(cmd, "python version probe", check_globs=False)
    return True


def _python_module(an: Analysis, cmd: _Cmd, module_arg: Arg | None, rest: list[Arg], plain_flags: bool = True) -> None:
    """`python -m MODULE REST`. `plain_flags`: the interpreter's options before -m change nothing of what it runs
    (no -i, which runs standard input after the module; no -X pycache_prefix=DIR, which writes there)."""
    module = module_arg.text if module_arg is not None else None
    cwd = an.cwd
    if an.changed_dir and (module == "pip" or cwd is None or (cwd + "/").startswith(UNTRUSTED_DIRS)):
        # `-m` looks in the working directory first: after a cd, `pip` is whatever lies there. A project
        # directory outside world-writable places is trusted for benchmark modules, as git trusts a
        # repository there; pip never needs to run from one.
        an.add(MUTATING, "python:-m-after-cd", f"after `cd`, `{cmd.prog} -m {module or '...'}` runs whatever module "
                                               f"of that name lies in the new directory")
        return
    if module in _PROBE_MODULES and not rest and plain_flags:
        an.allow(cmd, "python version probe", check_globs=False)
        return
    if (module in _HELP_MODULES or module in _WORKLOAD_MODULES) and [a.text for a in rest] in (["--help"], ["-h"]) \
            and plain_flags:
        # argparse prints the options and exits: a benchmark's --help runs none (played models were refused it)
        an.allow(cmd, f"{module} --help", check_globs=False)
        return
    if module == "json.tool":
        _json_tool(an, cmd, rest)
        return
    if module == "pip":
        _pip(an, cmd, rest, f"{cmd.prog} -m pip")
        return
    is_benchmark = module in _WORKLOAD_MODULES or (
        module == "vllm.entrypoints.cli.main" and bool(rest) and rest[0].text == "bench"
    )
    if is_benchmark and an.workload and _WORKLOAD_PYTHON.fullmatch(cmd.prog):
        an.allow_workload(cmd, module or "")
    elif is_benchmark:
        an.add(
            MUTATING,
            "python:-m",
            f"`{cmd.prog} -m {module}` runs a benchmark, which counts as read-only only through run_bench",
        )
    else:
        an.add(MUTATING, "python:-m", f"`{cmd.prog} -m {module or '...'}` runs a Python module, which can change the host")


def _json_tool(an: Analysis, cmd: _Cmd, rest: list[Arg]) -> None:
    """`python3 -m json.tool [FILE]` pretty-prints one file, or standard input (`... | python3 -m json.tool`,
    as careful engineers write it). A second operand is the file it writes."""
    flags = [a for a in rest if (a.text or "").startswith("--")]
    files = [a for a in rest if a not in flags]
    shown = f"{cmd.prog} -m json.tool"
    if any(a.text not in _JSON_TOOL_FLAGS for a in flags) or any(a.text is None or a.text.startswith("-")
                                                                 for a in files):
        an.add(MUTATING, "json.tool:unknown-option", f"`{shown}` with an option the classifier does not list")
    elif len(files) > 1:
        an.write(files[1], f"`{shown} IN OUT`", "json.tool")
    elif not files:
        an.allow(cmd, "json.tool", check_globs=False)
    elif files_read_ok(an, "json.tool", files, shown) and in_trusted_places(an, "json.tool", files):
        an.allow(cmd, "json.tool", check_globs=False)


@_handles("vllm")
def _vllm(an: Analysis, cmd: _Cmd) -> None:
    texts = cmd.texts
    if texts and texts[0] == "bench" and len(texts) > 1 and texts[1] in ("serve", "latency", "throughput"):
        if an.workload:
            an.allow_workload(cmd, f"vllm bench {texts[1]}")
        else:
            an.add(MUTATING, "vllm:bench", "`vllm bench` runs a benchmark, which counts as read-only only through "
                                           "run_bench")
    elif texts in (["--version"], ["-v"], ["--help"], ["-h"]) or len(texts) == 2 and texts[1] in ("--help", "-h") \
            and texts[0] in ("serve", "bench", "chat", "complete", "run-batch", "collect-env"):
        an.allow(cmd)  # `vllm serve --help`: argparse prints the options and exits
    else:
        sub = texts[0] if texts and texts[0] else "..."
        an.add(MUTATING, f"vllm:{sub}", f"`vllm {sub}` starts a server or job, which is not read-only")


@_handles("perl", "ruby")
@_handles_matching(r"perl[\d.]*")
def _perl(an: Analysis, cmd: _Cmd) -> None:
    language = "ruby" if cmd.prog == "ruby" else "perl"
    args = cmd.args
    index = 0
    code: list[Arg | None] = []
    in_place = False
    while index < len(args):
        text = args[index].text
        if text is None or text == "--" or not text.startswith("-") or text == "-":
            break
        letters = text[1:]
        takes_next = False
        for position, letter in enumerate(letters):
            if letter == "i":
                in_place = True
                break  # -i[extension] takes the rest of the cluster
            if letter in "eE":
                takes_next = True
            if letter in "IMmxCdrF":
                break  # these take the rest of the cluster as their value
        if takes_next:
            code.append(args[index + 1] if index + 1 < len(args) else None)
            index += 1
        index += 1
    if in_place:
        an.add(MUTATING, f"{language}:-i", f"`{cmd.prog} -i` edits files in place")
    if code:
        for program in code:
            _inline_code(an, cmd, program, language, "-e")
    elif index < len(args) and args[index].text not in ("-", "--"):
        _script(an, cmd, args[index], args[index + 1:], language)
    else:
        _stdin_program(an, cmd, language)


@_handles("node", "nodejs", "php")
def _node(an: Analysis, cmd: _Cmd) -> None:
    code_flags = ("-r",) if cmd.prog == "php" else ("-e", "--eval", "-p", "--print")
    texts = cmd.texts
    for index, text in enumerate(texts):
        if text in code_flags:
            _inline_code(an, cmd, cmd.args[index + 1] if index + 1 < len(texts) else None, cmd.prog, text)
            return
        if text and text.startswith(tuple(f + "=" for f in code_flags if f.startswith("--"))):
            _inline_code(an, cmd, Arg(text.split("=", 1)[1]), cmd.prog, text.split("=", 1)[0])
            return
    operands = [a for a in cmd.args if not (a.text or "").startswith("-")]
    if operands:
        _script(an, cmd, operands[0], [], cmd.prog)
    else:
        _stdin_program(an, cmd, cmd.prog)


def _inline_code(an: Analysis, cmd: _Cmd, code: Arg | None, language: str, flag: str) -> None:
    text = code.text if code is not None else None
    an.add(
        MUTATING,
        f"wrapper:{cmd.prog}",
        f"`{cmd.prog} {flag}` runs inline {_LANGUAGE_NAMES.get(language, language)} code, which can do anything "
        "the user can",
        structural=True,
        decoded=text,
    )
    _run_code(an, cmd, code, language, f"{cmd.prog} {flag}")


def _script(an: Analysis, cmd: _Cmd, script: Arg, rest: list[Arg], language: str, rule: str | None = None) -> None:
    """An interpreter running a file: runfiles have their own rules; `<(curl ...)` is a download."""
    rule = rule or f"script:{cmd.prog}"
    path = script.text
    if path is not None and posixpath.basename(path).endswith(".run"):
        _runfile(an, path, rest, launcher=cmd.prog)
        return
    substitution = _first_descendant(script.node, "process_substitution") if script.node is not None else None
    if substitution is not None:
        an.add(MUTATING, rule, f"`{cmd.prog}` runs code produced by a process substitution")
        if an.has_downloader(substitution):
            an.add(
                FORBIDDEN,
                "forbidden:download-to-shell",
                f"`{cmd.prog} <(...)` runs a download as {_LANGUAGE_NAMES.get(language, language)} code unseen",
            )
        output = an.substitution_output(substitution)
        if output is not None:
            an.code_text(output, language, f"{cmd.prog} <(...)")
        return
    shown = path if path is not None else _excerpt(script.node)
    an.add(MUTATING, rule, f"`{cmd.prog} {shown}` runs a script file the classifier cannot see")


def _stdin_program(an: Analysis, cmd: _Cmd, language: str) -> None:
    """An interpreter reading its program from standard input."""
    stdin = cmd.stdin
    if stdin is None:
        an.add(
            MUTATING,
            f"wrapper:{cmd.prog}",
            f"`{cmd.prog}` without a program reads code from its input, which the classifier cannot see",
            structural=True,
        )
    elif stdin.kind == "pipe":
        _piped_code(an, cmd, cmd.prog, language, stdin)
    elif stdin.kind == "file":
        an.add(MUTATING, f"script:{cmd.prog}", f"`{cmd.prog} < {stdin.source}` runs code from a file the classifier cannot see")
    else:
        code = stdin.data.decode("utf-8", "replace") if stdin.data is not None else None
        an.add(
            MUTATING,
            f"wrapper:{cmd.prog}",
            f"`{cmd.prog}` runs the code in {stdin.source}",
            structural=True,
            decoded=code,
        )
        if code is not None:
            an.code_text(code, language, f"{cmd.prog} {'<<EOF' if stdin.kind == 'heredoc' else '<<<'}")


def _piped_code(an: Analysis, cmd: _Cmd, interpreter: str, language: str, stdin: _Stdin | None) -> None:
    """Text piped into an interpreter runs as code: at least destructive, forbidden for downloads."""
    stdin = stdin or cmd.stdin
    if stdin is None:
        return
    code = stdin.data.decode("utf-8", "replace") if stdin.data is not None else None
    source = stdin.source or "a pipe"
    if stdin.download or an.network[0]:
        an.add(
            FORBIDDEN,
            "forbidden:download-to-shell",
            f"`{source} | {interpreter}` runs a download as code without anyone seeing it",
            decoded=code,
        )
    an.add(
        DESTRUCTIVE,
        "pipe-to-shell",
        f"`{source} | {interpreter}` runs piped text as {_LANGUAGE_NAMES.get(language, language)} code",
        decoded=code,
    )
    if code is not None:
        an.code_text(code, language, f"{source} | {interpreter}")


def _set_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    harmless = {"pipefail", "errexit", "nounset", "xtrace", "verbose", "noclobber"}
    texts = cmd.texts
    index = 0
    while index < len(texts):
        text = texts[index] or ""
        if re.fullmatch(r"[-+][euxvEC]*o?", text) and len(text) > 1:
            if text.endswith("o"):
                index += 1
                if index >= len(texts) or texts[index] not in harmless:
                    return MUTATING, "set", "`set -o` with this option changes how the shell runs later commands"
            index += 1
            continue
        return MUTATING, "set", "`set` with these arguments changes the shell's state"
    return None


def _exit_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    if len(cmd.args) <= 1 and all((t or "").isdigit() for t in cmd.texts):
        return None
    return MUTATING, "exit", "`exit` with these arguments is not accepted as read-only"


_HANDLERS["set"] = _checked(_set_check)
_HANDLERS["exit"] = _checked(_exit_check)


def test_subscript_problem(words: list[str | None]) -> tuple[RiskClass, str, str] | None:
    """`test -v NAME` evaluates an array subscript in NAME as arithmetic, and arithmetic runs command
    substitutions: `[ -v 'a[$(reboot)]' ]` reboots. A subscript (or a word known only at run time)
    after -v or -R is not read-only."""
    for flag, operand in zip(words, words[1:]):
        if flag in ("-v", "-R") and (operand is None or "[" in operand):
            return (MUTATING, "test:-v-subscript",
                    f"`test {flag}` evaluates the subscript of `{operand or '...'}` as arithmetic, which can run commands")
    return None


def _test(an: Analysis, cmd: _Cmd) -> None:
    words = [cmd.name, *cmd.texts]
    problem = test_subscript_problem(words)
    if problem is not None:
        an.add(*problem)
    elif any(a.pattern for a in cmd.args):
        an.add(MUTATING, "test:glob", f"`{cmd.prog}` with an unquoted pattern: the file names it expands to become "
                                      "operators and operands")
    else:
        an.allow(cmd)


_HANDLERS["test"] = _test
_HANDLERS["["] = _test
