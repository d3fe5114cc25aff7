"""`agent run --plan` without a model: the calls a goal file's authorizations spell out, made in a dry run.

With no model configured, a plan can still check a goal file before a real run: every host is reached and
inspected (reads run, in the read sandbox, as in any run), then every rule that names one concrete call (an
exact command, or a tool whose arguments the rule fixes without a pattern) is made that call on each host it
covers, after the backup a real run takes first. The gate answers each as it would in a real run ("would
run: authorized by authorizations[i]", or why it would be refused), and the verdict counts them as any dry
run's does. Nothing changes and no benchmark runs (a dry run runs none).

What only a model can choose is listed, not guessed: a rule with a pattern (`torch==*+cu130`), a tool
argument the rule leaves out, the benchmark a throughput check compares, and the rollback rule (used only
when a step fails).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from agent.goal import Goal
from agent.model.protocol import AssistantTurn, ToolCall
from agent.safety.authorizations import Authorization
from tools import default_tools
from tools.base import ArgumentError

# Tools a plan of the way forward does not call from a rule: a rollback runs only when a step fails.
ROLLBACK_TOOLS = ("restore_backup",)
NO_MODEL = "no model: the calls are the goal file's authorizations, made as written"


def _has_pattern(value: Any) -> bool:
    if isinstance(value, str):
        return "*" in value
    if isinstance(value, (list, tuple)):
        return any(_has_pattern(v) for v in value)
    if isinstance(value, dict):
        return any(_has_pattern(v) for v in value.values())
    return False


class AuthorizationsModel:
    """The model of a model-less dry run: the inspection, then each rule's call per host, then a summary."""

    writes_summaries = False

    def __init__(self, goal: Goal):
        self.name = "none (plan from the authorizations)"
        self.goal = goal
        self.tools = {tool.name: tool for tool in default_tools()}
        self.hosts = goal.host_names()
        self.calls, self.left = self._calls()
        self._count = 0  # calls made so far: each call's id
        self._turns = self._script()

    def _calls(self) -> tuple[dict[str, list[tuple[str, dict, int]]], list[str]]:
        """Each host's calls (tool, arguments, the rule's index), and what is left for a model, in words."""
        calls: dict[str, list[tuple[str, dict, int]]] = {host: [] for host in self.hosts}
        left: list[str] = []
        for index, rule in enumerate(self.goal.authorizations):
            hosts = [h for h in self.hosts if rule.covers_host(h)]
            why = self._not_concrete(rule)
            if why:
                where = "any host" if rule.host == "*" else rule.host
                left.append(f"authorizations[{index}] ({rule.tool or 'a command'} on {where}): {why}")
                continue
            for host in hosts:
                tool, args = ("ssh_exec", {"command": rule.command}) if rule.command is not None else (rule.tool, rule.args)
                calls[host].append((tool, {"host": host, **args}, index))
        if any(check.throughput for check in self.goal.success):
            left.append("the throughput check's benchmark: a model chooses its command and runs it before the first "
                        "change on each host (a dry run runs no benchmark)")
        if any(check.outputs for check in self.goal.success):
            left.append("the outputs check's samples: a model names the serving endpoint and runs check_outputs "
                        "before the first change on each host and after the last")
        return calls, left

    def _not_concrete(self, rule: Authorization) -> str | None:
        """Why a rule names no single call a plan can make without a model, or None."""
        if rule.command is not None:
            return None
        if rule.tool in ROLLBACK_TOOLS:
            return "the rollback, run only when a step fails"
        if _has_pattern(rule.args):
            return "its arguments hold a pattern, which a model fills in"
        tool = self.tools.get(rule.tool or "")
        if tool is None:
            return f"no tool is named {rule.tool!r}"
        unnamed = [name for name, field in tool.Args.model_fields.items()
                   if field.is_required() and name != "host" and name not in rule.args]
        if unnamed:
            return f"it leaves {', '.join(unnamed)} to the caller, which a model gives"
        try:
            tool.parse_args({"host": self.hosts[0], **rule.args})
        except ArgumentError as e:
            if any(isinstance(value, list) for value in rule.args.values()):
                return "its arguments list values a model chooses between"
            return f"its arguments are not a call of {rule.tool} ({e})"
        return None

    def _script(self) -> Iterator[AssistantTurn]:
        yield self._turn([("inspect_host", {"host": host}) for host in self.hosts])
        changing = [host for host in self.hosts if self.calls[host]]
        if changing:  # as a real run: the backup first, the changes in the turn after it
            yield self._turn([("pip_freeze_backup", {"host": host}) for host in changing])
            yield self._turn([(tool, args) for host in changing for tool, args, _ in self.calls[host]])
        yield AssistantTurn(text=self._summary(), finish_reason="stop")

    def _turn(self, calls: list[tuple[str, dict]]) -> AssistantTurn:
        start, self._count = self._count, self._count + len(calls)
        return AssistantTurn(tool_calls=[ToolCall(id=f"plan_{start + i + 1}", name=tool, arguments=json.dumps(args))
                                         for i, (tool, args) in enumerate(calls)], finish_reason="tool_calls")

    def _summary(self) -> str:
        lines = [f"A plan without a model ({NO_MODEL}):"]
        for host in self.hosts:
            rules = sorted({index for _, _, index in self.calls[host]})
            lines.append(f"- {host}: " + (f"a backup, then the calls of authorizations{rules}" if rules else
                                          "no rule names a concrete call for it"))
        lines += [f"- left for a model: {what}" for what in self.left]
        return "\n".join(lines)

    def complete(self, messages, tools, on_text=None) -> AssistantTurn:
        try:
            return next(self._turns)
        except StopIteration:  # asked again after its summary (a continuation): it has nothing more
            return AssistantTurn(text="The plan is complete.", finish_reason="stop")
