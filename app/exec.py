"""`agent exec HOST -- COMMAND`: one read-only command through the host layer and the gate."""

from __future__ import annotations

import json
import sys

from agent.batch import CallResult, LiveToolRunner, PreparedCall
from agent.errors import SessionConfigError
from agent.host_specs import host_entry_from_flag, host_spec
from agent.model import ToolCall
from agent.record.redact import Redactor
from agent.safety.policy import SafetyPolicy
from app.exit_codes import ExitCode
from app.ui.plain import LiveOutput
from tools.base import ArgumentError, ArtifactStore, ToolContext
from tools.hosts import HostPool
from tools.ssh_exec import SSHExec


def exec_one(args) -> int:
    """`agent exec HOST -- CMD`: one ssh_exec call through the same host layer and gate."""
    command = " ".join(args.command).strip()
    if not command:
        raise SessionConfigError("no command given: agent exec HOST -- COMMAND")
    entry = host_entry_from_flag(args.host, args.trust_host_key)
    spec, _ = host_spec(entry)
    tool = SSHExec()
    try:
        parsed = tool.parse_args({"host": spec.name, "command": command, "timeout": args.timeout})
    except ArgumentError as e:
        raise SessionConfigError(str(e)) from None
    action = tool.action(parsed)
    policy = SafetyPolicy(scope={spec.name}, mode="scripted")
    decision = policy.decide(tool.name, action)
    if not decision.allowed:
        print(f"agent: {decision.message_for_model()}", file=sys.stderr)
        print("agent: `agent exec` runs read-only commands only; use `agent chat` to approve changes",
              file=sys.stderr)
        return ExitCode.REFUSED
    pool = HostPool([spec])
    redactor = Redactor()
    # What the command prints reaches the terminal through the same redactor as every record.
    live = (lambda kind, data: None) if args.json else LiveOutput(redactor=redactor)
    ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(None), emit=live, redact=redactor.text)
    try:
        result: CallResult = LiveToolRunner().run(PreparedCall(0, ToolCall("exec", tool.name, ""), tool, parsed,
                                                               action, decision), ctx)
    finally:
        pool.close()
        if not args.json:
            live.close()
    if not result.ok:
        print(f"agent: {redactor.text(result.error or '')}", file=sys.stderr)
        return ExitCode.FAILED
    data = result.data or {}
    if args.json:
        print(json.dumps(redactor.value(data)))
    if data.get("timed_out"):
        print(f"agent: timed out after {args.timeout:g}s; the remote process was killed", file=sys.stderr)
    if data.get("connection_lost"):
        print("agent: connection lost during the command; it was not re-run", file=sys.stderr)
    code = data.get("exit_code")
    return code if isinstance(code, int) else ExitCode.FAILED
