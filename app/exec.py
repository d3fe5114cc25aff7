"""`agent exec HOST COMMAND...`: one read-only command through the host layer and the gate."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import shutil
import socket
import sys
from pathlib import Path
from typing import Callable

from agent.batch import CallResult, LiveToolRunner, PreparedCall
from agent.errors import SessionConfigError
from agent.host_specs import host_entry_from_flag, host_spec
from agent.model import ToolCall
from agent.record.redact import Redactor
from agent.safety.policy import SafetyPolicy
from app.exit_codes import ExitCode
from app.ui.plain import LiveOutput
from tools.sandbox import SandboxedHosts, loopback_ports
from tools.base import ArgumentError, ArtifactStore, RiskClass, ToolContext
from tools.hosts import HostError, HostPool, HostSpec, SSHSettings
from tools.ssh_exec import SSHExec

# A stage that a later stage stopped reading from (`cat big.log | head`) dies of SIGPIPE: 128 + 13.
# That is how such a pipeline ends when it worked, so it is not counted as the stage failing.
SIGPIPE_STATUS = 141


def exec_one(args) -> int:
    """`agent exec HOST CMD...`: one ssh_exec call through the same host layer and gate."""
    command = " ".join(args.command).strip()
    if not command:
        raise SessionConfigError("no command given: agent exec HOST COMMAND... (e.g. agent exec local nvidia-smi -L)")
    entry = host_entry_from_flag(args.host, args.trust_host_key)
    spec, sim = host_spec(entry)
    try:
        return _exec_on(args, command, spec)
    finally:
        if sim is not None:  # a simulated host made for this one command (some 27 MB): gone with it
            shutil.rmtree(Path(sim.root).parent, ignore_errors=True)


def _exec_on(args, command: str, spec: HostSpec) -> int:
    check_host_name(spec)
    tool = SSHExec()
    try:
        parsed = tool.parse_args({"host": spec.name, "command": command, "timeout": args.timeout})
    except ArgumentError as e:
        raise SessionConfigError(str(e)) from None
    action = tool.action(parsed)
    policy = SafetyPolicy(scope={spec.name}, mode="scripted")
    decision = policy.decide(tool.name, action)
    if not decision.allowed:
        print(f"agent: {refusal_for_operator(decision, spec.name)}", file=sys.stderr)
        return ExitCode.REFUSED
    # The gate judged the command as given; what runs adds only a shell option and a report of the
    # last pipeline's statuses, so that `false | cat` fails as it does under `set -o pipefail`.
    status = PipeStatus(command)
    to_run = parsed.model_copy(update={"command": status.script})
    pool = HostPool([spec])
    if spec.transport == "ssh":
        # A host key nobody has trusted is the operator's to decide (exit 2, as in `agent run`), said in the one
        # line `agent run` says; a host that does not answer is the command failing (exit 1).
        from agent.preflight import reach_hosts  # lazy: only an SSH host is reached first

        unreached = reach_hosts(pool, [spec.name])
        if unreached:
            pool.close()
            print(f"agent: {unreached[0].problem}", file=sys.stderr)
            return ExitCode.USAGE if unreached[0].key else ExitCode.FAILED
    redactor = Redactor()
    # What the command prints reaches the terminal through the same redactor as every record.
    live = (lambda kind, data: None) if args.json else LiveOutput(redactor=redactor)
    hidden = status.hide_report(live)
    if args.no_read_sandbox:
        spec.read_sandbox = "off"
    # As in a session: the read runs in the host's read sandbox, where the kernel refuses any change.
    hosts = SandboxedHosts(pool, loopback_ports(command))
    ctx = ToolContext(hosts=hosts, artifacts=ArtifactStore(None), emit=hidden, redact=redactor.text)
    try:
        result: CallResult = LiveToolRunner().run(PreparedCall(0, ToolCall("exec", tool.name, ""), tool, to_run,
                                                               action, decision), ctx)
    finally:
        pool.close()
        hidden.close()
        if not args.json:
            live.close()
    if not result.ok:
        print(f"agent: {redactor.text(result.error or '')}", file=sys.stderr)
        return ExitCode.FAILED
    data = result.data or {}
    data["stderr"], stages = status.take_report(data.get("stderr") or "")
    code, failed = data.get("exit_code"), []
    if isinstance(code, int):
        code, failed = status.verdict(stages, code)
        data["exit_code"] = code
    if args.json:
        if len(stages) > 1:
            data["pipeline_status"] = stages
        print(json.dumps(redactor.value(data)))
    for line in status.describe(failed, len(stages)):
        print(f"agent: {redactor.text(line)}", file=sys.stderr)
    if data.get("timed_out"):
        print(f"agent: timed out after {args.timeout:g}s; the remote process was killed", file=sys.stderr)
    if data.get("connection_lost"):
        print("agent: connection lost during the command; it was not re-run", file=sys.stderr)
    return code if isinstance(code, int) else ExitCode.FAILED


def refusal_for_operator(decision, host: str) -> str:
    """Why `agent exec` did not run a command, in words for the person who typed it (what the model reads speaks of
    goal files and of scripted runs that never ask, which this is not)."""
    risk = decision.risk
    if decision.rule == "not-authorized" and risk.cls in (RiskClass.MUTATING, RiskClass.DESTRUCTIVE):
        return (f"not run: `agent exec` runs only commands that read, and this is a {risk.cls.value} step "
                f"({risk.reason}); to run it with your approval and a backup first: agent chat --host {host}")
    return f"not run: {decision.reason}"


def check_host_name(spec: HostSpec) -> None:
    """A host name that resolves to no address is a usage error (exit 2), said before anything runs,
    with the names that do work; a host that resolves but does not answer is the command failing."""
    if spec.transport != "ssh":
        return
    from tools.hosts.ssh_config import load_ssh_config, resolve  # lazy: paramiko only for an SSH host

    try:
        config = load_ssh_config(SSHSettings().config_path)
        endpoint = resolve(spec.target or spec.name, config)
    except HostError as e:
        raise SessionConfigError(str(e)) from None
    if endpoint.proxy_command or endpoint.proxy_jump:
        return  # the name is looked up at the far end of the proxy
    try:
        socket.getaddrinfo(endpoint.hostname, endpoint.port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        aliases = sorted(h for h in config.get_hostnames() if not re.search(r"[*?!]", h))
        known = ", ".join(["local", "sim", *aliases])
        raise SessionConfigError(
            f"unknown host {spec.name!r} (no address for {endpoint.hostname!r}: {e.strerror}); known hosts: {known}"
            f"{' (local and sim built in, the rest from ~/.ssh/config)' if aliases else ''}; add one as a "
            f"`Host NAME` entry with its HostName in ~/.ssh/config, or give user@address[:port]") from None


class PipeStatus:
    """Runs a command so that a failing pipeline stage is not hidden, and says which stage it was.

    Every host runs commands in bash (tools/hosts/), so `set -o pipefail` is always there. When the
    shell exits, a trap writes one line on stderr with `PIPESTATUS` and `$?`; it starts with a control
    character and a nonce the command's own output cannot contain (the script spells the character as
    an escape, so not even `ps` output showing this very script matches), and is taken out of what is
    shown. Set up before the command rather than appended to it, it is never part of the command's
    text, whatever that text ends with (a backslash, a comment, a here-document).
    """

    def __init__(self, command: str):
        self.command = command
        self.marker = f"\x1fagent-exec-{secrets.token_hex(8)}:"
        report = self.marker.replace("\x1f", "\\037") + "%s\\n"
        # An EXIT trap sees the last pipeline's PIPESTATUS and the shell's exit status, and leaves that status as it is.
        on_exit = f'__agent_status="${{PIPESTATUS[*]}} $?"; printf {shlex.quote(report)} "$__agent_status" >&2'
        self.script = f"set -o pipefail; trap {shlex.quote(on_exit)} EXIT; {command}"

    def hide_report(self, emit: Callable[[str, dict], None]) -> "_HideLine":
        return _HideLine(emit, self.marker)

    def take_report(self, stderr: str) -> tuple[str, list[int]]:
        """stderr without the report line, and the statuses of the last pipeline that ran ([] if none
        was reported: the command ended with `exit`, or was killed)."""
        i = stderr.rfind(self.marker)
        if i < 0:
            return stderr, []
        end = stderr.find("\n", i)
        line = stderr[i + len(self.marker): end if end >= 0 else len(stderr)]
        statuses = [int(x) for x in line.split() if x.isdigit()]
        return stderr[:i] + (stderr[end + 1:] if end >= 0 else ""), statuses[:-1]

    @staticmethod
    def verdict(stages: list[int], code: int) -> tuple[int, list[tuple[int, int]]]:
        """The command's exit status, and (stage number, status) of each stage that failed when that
        status came from a pipeline of more than one stage. A stage that a later one stopped reading
        did not fail: a pipeline whose only such stages died of SIGPIPE succeeded."""
        if len(stages) < 2 or code == 0:
            return code, []
        failed = [(i + 1, s) for i, s in enumerate(stages)
                  if s != 0 and not (s == SIGPIPE_STATUS and i < len(stages) - 1)]
        if failed:
            # Only an earlier stage's failure is news: the last stage's status is the exit code as ever.
            return failed[-1][1], failed if failed[0][0] < len(stages) else []
        return (0 if code == SIGPIPE_STATUS and stages[-1] == 0 else code), []

    def describe(self, failed: list[tuple[int, int]], count: int) -> list[str]:
        names = self._stage_programs(count)
        return [f"pipeline stage {n} of {count}{f' (`{names[n - 1]}`)' if names else ''} exited {s}"
                for n, s in failed]

    def _stage_programs(self, count: int) -> list[str] | None:
        """The program of each stage, when the command is one plain pipeline of `count` stages
        (otherwise the statuses are of whichever pipeline ran last, and only numbers are given)."""
        if "\n" in self.command:
            return None
        try:
            lexer = shlex.shlex(self.command, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError:
            return None
        stages: list[list[str]] = [[]]
        for t in tokens:
            if t in ("|", "|&"):
                stages.append([])
            elif t in _REDIRECTIONS:
                continue  # `2>&1`, `< file`: the stage's program is still its first word
            elif set(t) <= set("();<>&|"):
                return None  # a list, a subshell, a background job: not one plain pipeline
            else:
                stages[-1].append(t)
        words = [next((w for w in s if "=" not in w), None) for s in stages]
        return words if len(words) == count and all(words) else None


_REDIRECTIONS = {">", ">>", "<", ">&", "<&", "&>", "&>>", ">|", "<<<"}


class _HideLine:
    """A `ToolContext.emit` that passes live output on, less the one line that starts with `marker`
    on stderr (it may arrive split across chunks, so a tail that could begin it is held back)."""

    def __init__(self, emit: Callable[[str, dict], None], marker: str):
        self.emit, self.marker, self.held = emit, marker, ""
        self.hiding = False

    def __call__(self, kind: str, data: dict) -> None:
        if kind != "output" or data.get("stream") != "stderr":
            self.emit(kind, data)
            return
        text, self.held = self.held + str(data.get("text", "")), ""
        out = ""
        while text:
            if self.hiding:
                end = text.find("\n")
                if end < 0:
                    return self._send(data, out)
                self.hiding, text = False, text[end + 1:]
                continue
            i = text.find(self.marker)
            if i >= 0:
                out, text, self.hiding = out + text[:i], text[i + len(self.marker):], True
                continue
            start = text.rfind("\x1f", max(0, len(text) - len(self.marker) + 1))
            if start >= 0 and self.marker.startswith(text[start:]):
                out, self.held = out + text[:start], text[start:]
            else:
                out += text
            break
        self._send(data, out)

    def close(self) -> None:
        if self.held:
            self.emit("output", {"stream": "stderr", "text": self.held})
            self.held = ""

    def _send(self, data: dict, text: str) -> None:
        if text:
            self.emit("output", {**data, "text": text})
