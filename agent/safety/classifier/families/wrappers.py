"""Wrappers: programs that run another command (sudo, env, timeout, nice, ssh...) and shell builtins
that run code (eval, trap, alias)."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from typing import Callable

from agent.safety.classifier.command import _MAX_NESTING, FORBIDDEN, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import Spec, _getopt, _operands, _Opts
from agent.safety.classifier.paths import trusted_program_path
from agent.safety.classifier.registry import _HANDLERS, _handles
from agent.safety.classifier.tree import _excerpt
from agent.safety.classifier.words import _join

# --------------------------------------------------------------------------- wrappers


@dataclass
class _Wrapped:
    """What a wrapper runs: inner commands as words, shell code as strings, files it writes."""

    commands: list[list[Arg]] = field(default_factory=list)  # two candidates when an option's arity is a guess
    sources: list[Arg] = field(default_factory=list)
    writes: list[Arg] = field(default_factory=list)
    note: str = "runs another program"


def _candidates(opts: _Opts, operands: list[Arg]) -> list[list[Arg]]:
    if not operands:
        return []
    if opts.unsure and len(operands) > 1:
        return [operands, operands[1:]]
    return [operands]


def _skip_assignments(args: list[Arg]) -> list[Arg]:
    index = 0
    while index < len(args) and args[index].text and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", args[index].text or ""):
        index += 1
    return args[index:]


def _wrap_sudo(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args,
        short_value="ugpCDrtTUR",
        long_value={"--user", "--group", "--prompt", "--role", "--type", "--close-from", "--chdir",
                    "--command-timeout", "--other-user", "--chroot", "--host"},
        short_flags="AbEeHiKklnPSsVvBN",
        long_flags={"--askpass", "--background", "--preserve-env", "--edit", "--set-home", "--login",
                    "--remove-timestamp", "--reset-timestamp", "--list", "--non-interactive", "--preserve-groups",
                    "--stdin", "--shell", "--version", "--validate", "--bell", "--help"},
    )
    operands = _skip_assignments(opts.operands)
    if operands:
        return _Wrapped(_candidates(opts, operands), note="runs a command as root")
    if opts.has("-s", "-i", "--shell", "--login"):
        return _Wrapped(note="opens a root shell")
    if opts.has("-e", "--edit"):
        return _Wrapped(note="edits files as root")
    return _Wrapped(note="manages sudo credentials")


def _wrap_doas(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="uC", short_flags="ns")
    if opts.operands:
        return _Wrapped(_candidates(opts, opts.operands), note="runs a command as another user")
    return _Wrapped(note="opens a root shell")


def _wrap_env(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args,
        short_value="uCSa",
        long_value={"--unset", "--chdir", "--split-string", "--argv0"},
        short_flags="i0v",
        long_flags={"--ignore-environment", "--null", "--debug", "--block-signal", "--default-signal",
                    "--ignore-signal", "--list-signal-handling", "--help", "--version"},
    )
    operands = _skip_assignments(opts.operands)
    split = opts.values("-S", "--split-string")
    if split:
        texts = [split[0].text] + [a.text for a in operands]
        source = None if any(t is None for t in texts) else " ".join(
            [texts[0]] + [shlex.quote(t) for t in texts[1:]]  # type: ignore[arg-type, list-item]
        )
        return _Wrapped(sources=[Arg(source, node=split[0].node)], note="runs a command from a split string")
    if operands:
        return _Wrapped(_candidates(opts, operands), note="runs a command in a changed environment")
    return _Wrapped(note="prints the environment")


def _wrap_timeout(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="sk", long_value={"--signal", "--kill-after"}, short_flags="v",
        long_flags={"--preserve-status", "--foreground", "--verbose", "--help", "--version"},
    )
    return _Wrapped(_candidates(opts, opts.operands[1:]), note="runs a command with a time limit")


def _wrap_plain(args: list[Arg]) -> _Wrapped:
    """Wrappers whose arguments are the command itself: nohup, builtin, unbuffer, coproc."""
    return _Wrapped([args] if args else [], note="runs another program")


def _wrap_nice(args: list[Arg]) -> _Wrapped:
    while args and args[0].text and re.fullmatch(r"--?\d+", args[0].text):
        args = args[1:]  # legacy `nice -10 cmd`
    opts = _getopt(args, short_value="n", long_value={"--adjustment"}, short_flags="", long_flags={"--help"})
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command at another priority")


def _wrap_ionice(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="cnpPu", long_value={"--class", "--classdata", "--pid", "--pgid", "--uid"},
        short_flags="th", long_flags={"--ignore", "--help", "--version"},
    )
    if opts.has("-p", "-P", "-u", "--pid", "--pgid", "--uid"):
        return _Wrapped(note="changes the I/O priority of running processes")
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command at another I/O priority")


def _wrap_chrt(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="TPD", long_value={"--sched-runtime", "--sched-period", "--sched-deadline"},
        short_flags="abdefiomprRvh",
    )
    if opts.has("-p", "--pid", "-m", "--max"):
        return _Wrapped(note="changes the scheduling of running processes")
    operands = opts.operands
    if operands and operands[0].text and operands[0].text.isdigit():
        operands = operands[1:]
    return _Wrapped(_candidates(opts, operands), note="runs a command under another scheduling policy")


def _wrap_taskset(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_flags="acph", long_flags={"--all-tasks", "--pid", "--cpu-list", "--help", "--version"})
    if opts.has("-p", "--pid"):
        return _Wrapped(note="changes the CPU affinity of running processes")
    return _Wrapped(_candidates(opts, opts.operands[1:]), note="runs a command pinned to CPUs")


_NUMACTL_VALUE = {
    "--interleave", "--preferred", "--membind", "--cpunodebind", "--physcpubind", "--cpubind",
    "--weighted-interleave", "--preferred-many", "--shm", "--file", "--length", "--shmmode", "--offset",
}


def _wrap_numactl(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="ipmNCPwSfLM", long_value=_NUMACTL_VALUE, short_flags="lsHabVtuh",
        long_flags={"--localalloc", "--show", "--hardware", "--all", "--balancing", "--verify", "--touch",
                    "--huge", "--strict", "--dump", "--dump-nodes", "--shmid", "--help"},
    )
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command with a NUMA policy")


def _wrap_stdbuf(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="ioe", long_value={"--input", "--output", "--error"}, short_flags="",
                   long_flags={"--help", "--version"})
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command with other buffering")


def _wrap_time(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="of", long_value={"--output", "--format"}, short_flags="apqvV",
        long_flags={"--append", "--portability", "--quiet", "--verbose", "--help", "--version"},
    )
    return _Wrapped(_candidates(opts, opts.operands), writes=opts.values("-o", "--output"), note="times a command")


def _wrap_strace(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="abeEIoOpPsSuUX", long_value={"--output", "--attach", "--user", "--env", "--trace"},
        short_flags="cCdDfFhiknqrtTvVwxyzZ",
    )
    if opts.has("-p", "--attach") and not opts.operands:
        return _Wrapped(writes=opts.values("-o", "--output"), note="attaches to a running process")
    return _Wrapped(_candidates(opts, opts.operands), writes=opts.values("-o", "--output"), note="traces a command")


def _wrap_ltrace(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="aAeFlnopsuxDw", short_flags="bcCfhiLrStTV")
    if opts.has("-p") and not opts.operands:
        return _Wrapped(writes=opts.values("-o"), note="attaches to a running process")
    return _Wrapped(_candidates(opts, opts.operands), writes=opts.values("-o"), note="traces a command")


def _wrap_chroot(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, long_value={"--userspec", "--groups"}, short_flags="",
                   long_flags={"--skip-chdir", "--help", "--version"})
    if len(opts.operands) > 1:
        return _Wrapped(_candidates(opts, opts.operands[1:]), note="runs a command in another root directory")
    return _Wrapped(note="opens a shell in another root directory")


def _wrap_su(args: list[Arg], runuser: bool = False) -> _Wrapped:
    opts = _getopt(
        args,
        short_value="cgGsw" + ("u" if runuser else ""),
        long_value={"--command", "--session-command", "--group", "--supp-group", "--shell",
                    "--whitelist-environment", "--user"},
        short_flags="flmpPh",
        long_flags={"--login", "--preserve-environment", "--pty", "--fast", "--help", "--version"},
        permute=True,
    )
    code = opts.values("-c", "--command", "--session-command")
    if code:
        return _Wrapped(sources=code[:1], note="runs a command as another user")
    operands = [a for a in opts.operands if a.text != "-"]
    if runuser and opts.has("-u", "--user") and operands:
        return _Wrapped([operands], note="runs a command as another user")
    return _Wrapped(note="opens a shell as another user")


def _wrap_flock(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="Ewc", long_value={"--conflict-exit-code", "--timeout", "--wait", "--command"},
        short_flags="sexunoFvh",
        long_flags={"--shared", "--exclusive", "--unlock", "--nonblock", "--nb", "--close", "--no-fork",
                    "--verbose", "--help", "--version"},
    )
    code = opts.values("-c", "--command")
    rest = opts.operands[1:]
    if not code and rest and rest[0].text in ("-c", "--command"):
        code = rest[1:2]
    if code:
        return _Wrapped(sources=code[:1], note="runs a command under a lock")
    if rest:
        return _Wrapped([rest], note="runs a command under a lock")
    return _Wrapped(note="holds a lock on a file descriptor")


def _wrap_setsid(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_flags="cfwh", long_flags={"--ctty", "--fork", "--wait", "--help", "--version"})
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command in a new session")


def _wrap_watch(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="nq", long_value={"--interval", "--equexit"}, short_flags="dtbegcxpwhvr",
        long_flags={"--differences", "--no-title", "--beep", "--errexit", "--chgexit", "--color", "--no-color",
                    "--exec", "--precise", "--no-wrap", "--no-rerun", "--help", "--version"},
    )
    if not opts.operands:
        return _Wrapped(note="repeats a command")
    if opts.has("-x", "--exec"):
        return _Wrapped(_candidates(opts, opts.operands), note="repeats a command")
    texts = [a.text for a in opts.operands]
    source = None if any(t is None for t in texts) else " ".join(texts)  # type: ignore[arg-type]
    return _Wrapped(sources=[Arg(source, node=opts.operands[0].node)], note="repeats a command through sh -c")


_XARGS_LONG_VALUE = {"--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars",
                     "--process-slot-var"}


def _xargs_opts(args: list[Arg]) -> _Opts:
    return _getopt(
        args, short_value="aEdILnPs", long_value=_XARGS_LONG_VALUE, short_flags="0prtx", short_optional="eil",
        long_flags={"--null", "--no-run-if-empty", "--verbose", "--interactive", "--exit", "--open-tty",
                    "--show-limits", "--eof", "--replace", "--help", "--version"},
    )


def _wrap_xargs(args: list[Arg]) -> _Wrapped:
    opts = _xargs_opts(args)
    operands = opts.operands or [Arg("echo")]
    return _Wrapped(_candidates(opts, operands), note="runs a command on arguments read from its input")


def _wrap_parallel(args: list[Arg]) -> _Wrapped:
    texts = [a.text for a in args]
    cut = texts.index(":::") if ":::" in texts else len(args)
    opts = _getopt(args[:cut], short_value="jNnSIdaE", short_flags="kqXuvg0")
    words = opts.operands
    inputs = [a for a in args[cut + 1:] if a.text not in (":::", "::::")][:8]
    if len(words) == 1 and words[0].text and " " in words[0].text:
        template = words[0].text
        sources = [Arg(template.replace("{}", i.text) if i.text else None) for i in inputs] or [Arg(template)]
        return _Wrapped(sources=sources, note="runs a command for each input")
    commands = _candidates(opts, words)
    if inputs:
        commands = [c + [i] for c in commands for i in inputs]
    return _Wrapped(commands, note="runs a command for each input")


_SSH_LOCAL_COMMANDS = ("proxycommand", "localcommand", "knownhostscommand")


def _wrap_ssh(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="BbcDEeFIiJLlmOoPpQRSWw", short_flags="46AaCfGgKkMNnqsTtVvXxYy")
    sources = []
    for value in opts.values("-o"):
        if value.text:
            parts = re.split(r"\s*=\s*|\s+", value.text.strip(), maxsplit=1)
            if len(parts) == 2 and parts[0].lower() in _SSH_LOCAL_COMMANDS:
                sources.append(Arg(parts[1]))
    remote = opts.operands[1:]
    if remote:
        texts = [a.text for a in remote]
        source = None if any(t is None for t in texts) else " ".join(texts)  # type: ignore[arg-type]
        sources.append(Arg(source, node=remote[0].node))
        return _Wrapped(sources=sources, writes=opts.values("-E"), note="runs a command on another host")
    return _Wrapped(sources=sources, writes=opts.values("-E"), note="opens an interactive session on another host")


def _wrap_exec(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="a", short_flags="cl")
    if opts.operands:
        return _Wrapped(_candidates(opts, opts.operands), note="replaces the shell with another program")
    return _Wrapped(note="changes the shell's file descriptors")


def _wrap_command(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_flags="pvV")
    return _Wrapped(_candidates(opts, opts.operands), note="runs a program, bypassing shell functions")


def _wrap_script(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="cEIOBTm",
        long_value={"--command", "--echo", "--log-in", "--log-out", "--log-io", "--log-timing", "--output-limit"},
        short_flags="aefqhVk",
    )
    writes = opts.operands[:1] or [Arg("typescript")]
    code = opts.values("-c", "--command")
    if code:
        return _Wrapped(sources=code[:1], writes=writes, note="records a command")
    return _Wrapped(writes=writes, note="records an interactive shell")


def _wrap_unsure(args: list[Arg]) -> _Wrapped:
    """Wrappers with many options (systemd-run, nsenter, pkexec): try both readings of the first operand."""
    opts = _getopt(args, short_value="pEMHutSGw")
    operands = opts.operands
    commands = [operands, operands[1:]] if len(operands) > 1 else ([operands] if operands else [])
    return _Wrapped(commands, note="runs a command in another context")


_WRAPPER_PARSERS: dict[str, Callable[[list[Arg]], _Wrapped]] = {
    "sudo": _wrap_sudo, "doas": _wrap_doas, "env": _wrap_env, "timeout": _wrap_timeout, "nohup": _wrap_plain,
    "nice": _wrap_nice, "ionice": _wrap_ionice, "chrt": _wrap_chrt, "taskset": _wrap_taskset,
    "numactl": _wrap_numactl, "stdbuf": _wrap_stdbuf, "time": _wrap_time, "strace": _wrap_strace,
    "ltrace": _wrap_ltrace, "chroot": _wrap_chroot, "su": _wrap_su,
    "runuser": lambda args: _wrap_su(args, runuser=True), "flock": _wrap_flock, "setsid": _wrap_setsid,
    "watch": _wrap_watch, "xargs": _wrap_xargs, "parallel": _wrap_parallel, "ssh": _wrap_ssh,
    "exec": _wrap_exec, "command": _wrap_command, "builtin": _wrap_plain, "busybox": _wrap_plain,
    "unbuffer": _wrap_plain, "coproc": lambda args: _wrap_plain(args[1:] if args[1:2] and args[1].text == "{" else args), "script": _wrap_script, "systemd-run": _wrap_unsure,
    "nsenter": _wrap_unsure, "pkexec": _wrap_unsure, "sg": _wrap_unsure, "catchsegv": _wrap_plain,
}


def _innermost_prog(args: list[Arg]) -> str | None:
    """The program a wrapper chain finally runs: `sudo -E env X=1 curl ...` -> "curl"."""
    for _ in range(_MAX_NESTING):
        if not args or args[0].text is None:
            return None
        prog = posixpath.basename(args[0].text)
        parse = _WRAPPER_PARSERS.get(prog)
        if parse is None:
            return prog
        wrapped = parse(args[1:])
        if not wrapped.commands:
            return prog
        args = wrapped.commands[0]
    return None


def _run_wrapper(an: Analysis, cmd: _Cmd, wrapped: _Wrapped) -> None:
    inner = _join(wrapped.commands[0]) if wrapped.commands else None
    if inner is None and wrapped.sources:
        inner = wrapped.sources[0].text
    what = f"runs `{_excerpt(inner, 80)}`" if inner else wrapped.note
    # watch repeats its command until stopped: say how to run it once
    bounded = "; run the command once, without watch" if cmd.prog == "watch" else ""
    an.add(
        MUTATING,
        f"wrapper:{cmd.prog}",
        f"`{cmd.prog}` {what}; a wrapper is never read-only, whatever it runs{bounded}",
        structural=True,
        decoded=inner,
    )
    for target in wrapped.writes:
        an.write(target, f"`{cmd.prog}`", cmd.prog)
    for source in wrapped.sources:
        _run_code(an, cmd, source, "sh", cmd.prog)
    for command in wrapped.commands:
        an.inner_words(command, cmd.prog, cmd.stdin)


def _run_code(an: Analysis, cmd: _Cmd, code: Arg | None, language: str, via: str) -> None:
    """Program text handed to an interpreter: follow it when it is known, refuse downloads."""
    if code is None:
        return
    if code.text is not None:
        an.code_text(code.text, language, via)
    elif code.node is not None and an.has_downloader(code.node):
        an.add(
            FORBIDDEN,
            "forbidden:download-to-shell",
            f"`{cmd.prog}` runs code fetched from the network without anyone seeing it",
        )


# -- wrappers and shell builtins that run code


def _wrapper_handler(an: Analysis, cmd: _Cmd) -> None:
    _run_wrapper(an, cmd, _WRAPPER_PARSERS[cmd.prog](cmd.args))


# env, command, numactl and the priority wrappers have handlers of their own below; xargs is judged
# by the interpreters family, since what it runs is often a shell.
_OWN_HANDLERS = {"env", "command", "numactl", "xargs", "timeout", "nice", "ionice", "chrt", "taskset", "time"}
for _name in set(_WRAPPER_PARSERS) - _OWN_HANDLERS:
    _HANDLERS[_name] = _wrapper_handler


# timeout only limits how long its command runs (it signals that command, nothing else), so around a
# read-only command it is read-only: `timeout 5 nvidia-smi`, the careful form of a probe that can hang.
# GNU timeout stops reading options at the duration.
TIMEOUT = Spec("timeout", "-s|--signal= -k|--kill-after= --preserve-status --foreground -v|--verbose --help --version",
               permute=False)
_DURATION = re.compile(r"\d+(\.\d+)?[smhd]?")
SPECS = [TIMEOUT]


@_handles("timeout")
def _timeout(an: Analysis, cmd: _Cmd) -> None:
    parsed = TIMEOUT.parse(cmd.args)
    duration = parsed.operands[0].text if parsed.operands else None
    if (parsed.unknown or len(parsed.operands) < 2 or not _DURATION.fullmatch(duration or "")
            or ("/" in cmd.name and not trusted_program_path(cmd.name))):
        _wrapper_handler(an, cmd)
        return
    unbounded = _unbounded_timeout(parsed, duration or "")
    if unbounded is not None:
        an.add(MUTATING, "timeout:unbounded", unbounded)
    an.inner_words(parsed.operands[1:], "timeout", cmd.stdin)


@_handles("time")
def _time(an: Analysis, cmd: _Cmd) -> None:
    """bash's `time [-p] PIPELINE` only measures what it runs (and GNU time without options the same): judged
    by that command. GNU time's options (-o FILE writes, -f formats it) keep it a wrapper."""
    args = cmd.args[1:] if cmd.args and cmd.args[0].text == "-p" else cmd.args
    if not args or args[0].text is None or args[0].text.startswith("-") or \
            ("/" in cmd.name and not trusted_program_path(cmd.name)):
        _wrapper_handler(an, cmd)
        return
    an.inner_words(args, "time", cmd.stdin)


# Signals whose default action ends the process. The others (STOP, CONT, TSTP, CHLD, WINCH, URG...)
# stop it or do nothing, so the command runs on past its "limit".
_ENDING_SIGNALS = frozenset({"HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "IOT", "BUS", "FPE", "KILL", "USR1",
                             "SEGV", "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "XCPU", "XFSZ", "VTALRM", "PROF",
                             "IO", "POLL", "PWR", "SYS"})
_ENDING_NUMBERS = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 25, 26, 27, 29, 30, 31})


def _unbounded_timeout(parsed, duration: str) -> str | None:
    """Why this timeout sets no limit, or None: a zero duration disables it, and a signal that does not
    end the command (`-s CONT`, `-s STOP`) leaves it running."""
    if float(re.match(r"\d+(\.\d+)?", duration).group()) == 0:
        return f"`timeout {duration}` sets no time limit at all, so the command may never end; give a duration (`timeout 30`)"
    for value in parsed.values("--signal"):
        name = (value.text or "").upper().removeprefix("SIG")
        if not (name in _ENDING_SIGNALS or (name.isdigit() and int(name) in _ENDING_NUMBERS)):
            return (f"`timeout -s {value.text}` sends a signal that does not end the command, so it may never end; "
                    f"leave -s out (TERM) or use -s KILL")
    return None


@_handles("yes")
def _yes(an: Analysis, cmd: _Cmd) -> None:
    an.add(MUTATING, "unbounded:yes", "`yes` prints its line forever and never ends; print a fixed number of lines "
                                      "with `printf` instead")


@_handles("env")
def _env(an: Analysis, cmd: _Cmd) -> None:
    if not cmd.args:
        an.allow(cmd)
    else:
        _run_wrapper(an, cmd, _wrap_env(cmd.args))


@_handles("command")
def _command(an: Analysis, cmd: _Cmd) -> None:
    opts = _getopt(cmd.args, short_flags="pvV")
    if opts.has("-v", "-V") or not opts.operands:
        an.allow(cmd, "command -v")  # `command -v X` only looks X up
    else:
        _run_wrapper(an, cmd, _wrap_command(cmd.args))


@_handles("numactl")
def _numactl(an: Analysis, cmd: _Cmd) -> None:
    wrapped = _wrap_numactl(cmd.args)
    opts = _getopt(cmd.args, short_value="ipmNCPwSfLM", long_value=_NUMACTL_VALUE)
    if not wrapped.commands and opts.has("-s", "-H", "--show", "--hardware") and not opts.has(
        "-S", "-f", "--shm", "--file"
    ):
        an.allow(cmd)
    else:
        _run_wrapper(an, cmd, wrapped)


@_handles("eval")
def _eval(an: Analysis, cmd: _Cmd) -> None:
    texts = [a.text for a in cmd.args]
    code = None if any(t is None for t in texts) else " ".join(texts)  # type: ignore[arg-type]
    an.add(MUTATING, "eval", "`eval` runs its arguments as shell code", structural=True, decoded=code)
    if code is not None:
        an.inner_source(code, "eval")
    elif any(a.node is not None and an.has_downloader(a.node) for a in cmd.args):
        an.add(FORBIDDEN, "forbidden:download-to-shell", "`eval` runs code fetched from the network unseen")


@_handles("trap")
def _trap(an: Analysis, cmd: _Cmd) -> None:
    an.add(MUTATING, "trap", "`trap` installs a command that the shell runs later, on a signal or at exit")
    operands = _operands(cmd.args)
    if len(operands) >= 2 and operands[0].text not in (None, "-", ""):
        _run_code(an, cmd, operands[0], "sh", "trap")


@_handles("alias")
def _alias(an: Analysis, cmd: _Cmd) -> None:
    an.add(MUTATING, "alias", "`alias` defines a name that can later stand for another command")
    for arg in cmd.args:
        if arg.text and "=" in arg.text:
            an.inner_source(arg.text.split("=", 1)[1], "alias")


# -- the priority wrappers' queries
#
# Around a command they stay wrappers, even lowering a read's own priority (`nice ls`, `ionice -c3 du`):
# the red teams' corpora hold `nice ls` and `time ls` as lines that must be refused, and a wrapper is
# judged as one whatever it runs. With only a PID (`ionice -p PID`, `chrt -p PID`, `taskset -p PID`)
# or nothing at all (`nice`) they print a setting and change none.


def _pid_query(cmd: _Cmd, flags: tuple[str, ...]) -> bool:
    """Exactly `PROG FLAG PID`: the form that prints the setting of one process."""
    texts = cmd.texts
    return len(texts) == 2 and texts[0] in flags and re.fullmatch(r"\d+", texts[1] or "") is not None


def _query_handler(label: str, flags: tuple[str, ...]):
    def handler(an: Analysis, cmd: _Cmd) -> None:
        if _pid_query(cmd, flags) or (not flags and not cmd.args):
            an.allow(cmd, label)
        else:
            _wrapper_handler(an, cmd)

    return handler


_HANDLERS["nice"] = _query_handler("nice", ())  # bare `nice` prints its own niceness
_HANDLERS["ionice"] = _query_handler("ionice -p", ("-p", "--pid"))
_HANDLERS["chrt"] = _query_handler("chrt -p", ("-p", "--pid"))
_HANDLERS["taskset"] = _query_handler("taskset -p", ("-p", "--pid", "-cp", "-pc"))
