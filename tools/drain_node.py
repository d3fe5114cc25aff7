"""drain_node and undrain_node: take a GPU node out of its scheduler around a change, and put it back.

Slurm: `scontrol update nodename=N state=drain reason=...`, then wait until `squeue -w N` lists no
running job; back with `state=resume`. Kubernetes: `kubectl cordon N`, an annotation that says who
cordoned it, `kubectl drain N --ignore-daemonsets --delete-emptydir-data` (which waits for the pods
to leave); back with `kubectl uncordon N`.

A node someone else drained stays drained. drain_node finds it drained (or cordoned) already,
changes nothing and says so; undrain_node puts a node back only when the drain on it is the one a
drain_node call made: its reason ends with that call's `drain_id`, a random tag, so a person or
another session that writes the same words is not taken for us. After our drain, an operator who
drains the node again for their own work changes the reason, and the node stays out.
"""

from __future__ import annotations

import re
import secrets
import shlex
import time
from typing import Literal

from pydantic import BaseModel, Field

from tools.base import Action, Risk, RiskClass, StrictArgs, Tool, ToolContext, ToolError
from tools.hosts import HostError

OUR_PREFIX = "upgrade-agent: "  # every drain reason we set starts with it
ANNOTATION = "upgrade-agent/drained"
NODE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?$")  # a Slurm / Kubernetes node name
POLL_S = 0.5
REASON = r"^[A-Za-z0-9 ._:/+,()-]+$"  # no `=`: scontrol's one-line output is KEY=VALUE words
DRAIN_ID = r"^[0-9a-f]{8}$"


class DrainArgs(StrictArgs):
    host: str = Field(description="host in this session (the node itself: its scheduler's commands run there)")
    scheduler: Literal["slurm", "kubernetes"]
    node: str | None = Field(default=None, description="the node's name in the scheduler (default: the host's name)")
    reason: str = Field(min_length=1, max_length=120, pattern=REASON,
                        description="why, as the scheduler shows it: Slurm's drain reason becomes 'upgrade-agent: "
                                    "REASON #DRAIN_ID'; Kubernetes keeps 'REASON #DRAIN_ID' in the node's "
                                    "upgrade-agent/drained annotation (a cordon has no reason)")
    timeout: float = Field(default=3600, gt=0, le=86_400,
                           description="seconds to wait for the node's running jobs (pods) to finish")


class UndrainArgs(StrictArgs):
    host: str = Field(description="host in this session")
    scheduler: Literal["slurm", "kubernetes"]
    node: str | None = Field(default=None, description="the node's name in the scheduler (default: the host's name)")
    reason: str = Field(min_length=1, max_length=120, pattern=REASON,
                        description="the reason drain_node was given")
    drain_id: str | None = Field(default=None, pattern=DRAIN_ID,
                                 description="the drain_id drain_node returned: only that drain is undone (without "
                                             "one, a node that is not drained is left so, and a drained one refused)")


class DrainResult(BaseModel):
    node: str
    scheduler: str
    drained_by_us: bool  # false: it was already drained by someone else, and is left as it was
    drain_id: str | None  # what undrain_node needs to undo this drain; None when nothing was drained
    reason_set: str | None  # the reason (Slurm) or annotation (Kubernetes) now on the node
    state_before: str
    reason_before: str | None
    jobs_at_start: int | None  # jobs (Slurm) or pods (Kubernetes) on the node when the drain began; None: not read
    waited_s: float


class UndrainResult(BaseModel):
    node: str
    scheduler: str
    undrained: bool  # false: it was not drained (nothing to do)
    state_before: str


def _action(tool: str, args, what: str) -> Action:
    node = args.node or args.host
    return Action(host=args.host, subject=f"{tool} {args.scheduler} {node}: {args.reason}",
                  risk=Risk(cls=RiskClass.MUTATING, rule=f"tool:{tool}", reason=what),
                  args={"scheduler": args.scheduler, "node": node, "reason": args.reason},
                  # A rule that does not name `node` covers the session's host's own node and no other.
                  defaults={"node": args.host})


def _mark(reason: str, drain_id: str) -> str:
    return f"{reason} #{drain_id}"


def _node(args) -> str:
    node = args.node or args.host
    if not NODE_NAME.match(node):
        raise ToolError(f"{node!r} is not a node name a scheduler accepts; give node: explicitly")
    return node


def _run(ctx: ToolContext, host, command: str, timeout: float = 60) -> str:
    r = host.run(command, timeout=timeout, cancel=ctx.cancel)
    if r.cancelled:
        raise ToolError(f"cancelled {ctx.cancel_reason()} during `{command}`")
    if not r.ok:
        said = (r.stderr or r.stdout).strip()[-500:] or f"exit {r.exit_code}"
        if r.exit_code == 127:
            said = f"{command.split()[0]} is not on the host's PATH: is it a node of that scheduler?"
        raise ToolError(f"`{command}` failed: {said}")
    return r.stdout


def _slurm_state(ctx, host, node: str) -> tuple[str, str | None]:
    out = _run(ctx, host, f"scontrol show node {shlex.quote(node)} -o")
    state = re.search(r"\bState=(\S+)", out)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?=\s+\w+=|$)", out)
    if state is None:
        raise ToolError(f"scontrol shows no State for node {node}: {out.strip()[:300]}")
    text = reason.group(1).strip() if reason else None
    return state.group(1), (None if text in (None, "", "(null)", "none") else text)


def _slurm_jobs(ctx, host, node: str) -> int:
    out = _run(ctx, host, f"squeue -h -w {shlex.quote(node)} -t RUNNING,COMPLETING -o %i")
    return len([ln for ln in out.splitlines() if ln.strip()])


def _kube_state(ctx, host, node: str) -> tuple[bool, str | None]:
    out = _run(ctx, host, f"kubectl get node {shlex.quote(node)} -o "
                          + shlex.quote("jsonpath={.spec.unschedulable}|{.metadata.annotations.upgrade-agent/drained}"))
    cordoned, _, ours = out.strip().partition("|")
    return cordoned.strip() == "true", ours.strip() or None


class DrainNode(Tool):
    """Take a node out of its scheduler (Slurm or Kubernetes) before changing it, and wait for its jobs.

    Slurm: drains the node (running jobs finish, no new one starts) and waits until none runs.
    Kubernetes: cordons the node and drains its pods (DaemonSets stay). A node that is already drained
    (or cordoned) is left exactly as it is, and the result says so (drained_by_us: false, with Slurm's
    reason, or our annotation where a Kubernetes cordon has one: a plain cordon carries no reason): do not
    undrain it afterwards (there is no drain_id then: nothing of ours to undo). The result's drain_id is what
    undrain_node needs.
    Mutating: it needs a verified backup and an approval like any change. Pair it with undrain_node,
    the same reason and that drain_id, once the node is healthy again (its checks pass).
    """

    name = "drain_node"
    Args = DrainArgs
    Result = DrainResult
    pinned = ("scheduler", "node", "reason")

    def action(self, args: DrainArgs) -> Action:
        return _action(self.name, args, "takes the node out of its scheduler: running jobs finish, no new one starts")

    def run(self, ctx: ToolContext, args: DrainArgs) -> DrainResult:
        try:
            host = ctx.hosts.get(args.host)
        except HostError as e:
            raise ToolError(str(e)) from None
        node, drain_id = _node(args), secrets.token_hex(4)
        ours = OUR_PREFIX + _mark(args.reason, drain_id)
        began = time.monotonic()
        if args.scheduler == "slurm":
            state, reason = _slurm_state(ctx, host, node)
            jobs = _slurm_jobs(ctx, host, node)
            if "DRAIN" in state.upper():  # someone's drain (ours of an earlier call included): left as it is
                return DrainResult(node=node, scheduler="slurm", drained_by_us=False, drain_id=None,
                                   reason_set=reason, state_before=state, reason_before=reason, jobs_at_start=jobs,
                                   waited_s=0.0)
            _run(ctx, host, f"scontrol update nodename={shlex.quote(node)} state=drain reason={shlex.quote(ours)}")
            while _slurm_jobs(ctx, host, node):
                if time.monotonic() - began > args.timeout:
                    raise ToolError(f"node {node} is drained, but jobs still run on it after {args.timeout:g} s; it "
                                    f"stays drained: wait longer, or undrain_node it with reason {args.reason!r} and "
                                    f"drain_id {drain_id!r}")
                if ctx.cancel is not None and ctx.cancel.wait(POLL_S):
                    raise ToolError(f"cancelled {ctx.cancel_reason()} while waiting for node {node}'s jobs; it stays "
                                    f"drained (undrain_node: reason {args.reason!r}, drain_id {drain_id!r})")
                elif ctx.cancel is None:
                    time.sleep(POLL_S)
            return DrainResult(node=node, scheduler="slurm", drained_by_us=True, drain_id=drain_id, reason_set=ours,
                               state_before=state, reason_before=reason, jobs_at_start=jobs,
                               waited_s=round(time.monotonic() - began, 2))
        cordoned, mark = _kube_state(ctx, host, node)
        if cordoned:
            return DrainResult(node=node, scheduler="kubernetes", drained_by_us=False, drain_id=None, reason_set=mark,
                               state_before="cordoned", reason_before=mark, jobs_at_start=0, waited_s=0.0)
        q = shlex.quote(node)
        value = _mark(args.reason, drain_id)
        pods = _kube_pods(ctx, host, node)
        # The annotation first: a cordon seen without it is someone else's, and would never be undone.
        _run(ctx, host, f"kubectl annotate node {q} --overwrite {shlex.quote(ANNOTATION + '=' + value)}")
        _run(ctx, host, f"kubectl cordon {q}")
        _run(ctx, host, f"kubectl drain {q} --ignore-daemonsets --delete-emptydir-data --timeout={int(args.timeout)}s",
             timeout=args.timeout + 60)
        return DrainResult(node=node, scheduler="kubernetes", drained_by_us=True, drain_id=drain_id, reason_set=value,
                           state_before="schedulable", reason_before=mark, jobs_at_start=pods,
                           waited_s=round(time.monotonic() - began, 2))


def _kube_pods(ctx: ToolContext, host, node: str) -> int | None:
    """The pods on the node (DaemonSets' too), as inspect_host counts them; None where kubectl does not say."""
    r = host.run(f"kubectl get pods --all-namespaces --field-selector spec.nodeName={shlex.quote(node)} -o name",
                 timeout=60, cancel=ctx.cancel)
    return len([ln for ln in r.stdout.splitlines() if ln.strip()]) if r.exit_code == 0 else None


class UndrainNode(Tool):
    """Put a node that drain_node took out back into its scheduler: only if the drain on it is ours.

    Slurm: `state=resume` when the node's drain reason is the one drain_node set (with its drain_id);
    Kubernetes: uncordon when our annotation, with that drain_id, is on it. A node drained by someone
    else (another reason, no annotation of ours) is refused and stays drained. A node that is not
    drained: nothing to do.
    """

    name = "undrain_node"
    Args = UndrainArgs
    Result = UndrainResult
    pinned = ("scheduler", "node", "reason")

    def action(self, args: UndrainArgs) -> Action:
        return _action(self.name, args, "puts the node back into its scheduler: jobs may start on it")

    def run(self, ctx: ToolContext, args: UndrainArgs) -> UndrainResult:
        try:
            host = ctx.hosts.get(args.host)
        except HostError as e:
            raise ToolError(str(e)) from None
        node, ours = _node(args), OUR_PREFIX + _mark(args.reason, args.drain_id or "")
        q = shlex.quote(node)
        if args.scheduler == "slurm":
            state, reason = _slurm_state(ctx, host, node)
            if "DRAIN" not in state.upper():
                return UndrainResult(node=node, scheduler="slurm", undrained=False, state_before=state)
            if args.drain_id is None:
                raise ToolError(f"node {node} is drained (reason {reason!r}): only the drain_id of the drain_node "
                                "call that drained it undoes a drain; without one it stays drained")
            if reason != ours:
                raise ToolError(f"node {node} is drained by someone else (reason {reason!r}, not {ours!r}): it stays "
                                "drained; ask whoever drained it")
            _run(ctx, host, f"scontrol update nodename={q} state=resume")
            return UndrainResult(node=node, scheduler="slurm", undrained=True, state_before=state)
        cordoned, mark = _kube_state(ctx, host, node)
        if not cordoned:
            return UndrainResult(node=node, scheduler="kubernetes", undrained=False, state_before="schedulable")
        if args.drain_id is None:
            raise ToolError(f"node {node} is cordoned: only the drain_id of the drain_node call that cordoned it "
                            "undoes it; without one it stays cordoned")
        if mark != _mark(args.reason, args.drain_id):
            raise ToolError(f"node {node} is cordoned by someone else (its {ANNOTATION} annotation is {mark!r}, not "
                            f"{_mark(args.reason, args.drain_id)!r}): it stays cordoned; ask whoever cordoned it")
        _run(ctx, host, f"kubectl uncordon {q}")
        _run(ctx, host, f"kubectl annotate node {q} {shlex.quote(ANNOTATION + '-')}")
        return UndrainResult(node=node, scheduler="kubernetes", undrained=True, state_before="cordoned")
