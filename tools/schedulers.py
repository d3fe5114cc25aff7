"""Whether a host is a node of a Slurm or Kubernetes cluster, as its own scheduler commands say.

inspect_host runs SCRIPT's lines in its one read of the host, so the rule "drain a node before changing it"
can be followed without probing by hand. Each scheduler is asked only where its command is installed, by the
node's name in the session and the host's own short name, ten seconds at most; a command that is there but
cannot answer (no controller, no kubeconfig) is reported as such, never taken for "not a node".
"""

from __future__ import annotations

import re
import shlex
from typing import Literal

from pydantic import BaseModel, Field

KUBE_FIELDS = "{.spec.unschedulable}|{.metadata.annotations.upgrade-agent/drained}"  # as drain_node reads them


class Scheduler(BaseModel):
    kind: Literal["slurm", "kubernetes"]
    node: str | None = Field(description="the node's name in the scheduler")
    state: str | None = Field(default=None, description="Slurm's State= (IDLE, MIXED, ALLOCATED, ...+DRAIN); for "
                                                        "Kubernetes `cordoned` or `schedulable`")
    drained: bool | None = Field(default=None, description="drained or draining (Slurm), cordoned (Kubernetes)")
    reason: str | None = Field(default=None, description="Slurm's drain reason; for Kubernetes, drain_node's own "
                                                         "annotation when it cordoned the node")
    running: int | None = Field(default=None, description="jobs running or completing on it (Slurm), pods on it "
                                                          "(Kubernetes, DaemonSets included); None when not read")
    error: str | None = Field(default=None, description="the command is installed but could not answer")


def script(node: str) -> str:
    """Shell lines that print `slurm|NODE|<scontrol show node -o>`, `slurm_jobs|N`, `kube|NODE|<unschedulable>|
    <annotation>`, `kube_pods|N`, or `<kind>_error|<first line>`; nothing on a host with neither command."""
    names = f"{shlex.quote(node)} $(hostname -s 2>/dev/null)"
    return (
        "if command -v scontrol >/dev/null 2>&1; then found=''; "
        f"for n in {names}; do if out=$(timeout 10 scontrol show node \"$n\" -o 2>&1); then found=1; "
        "echo \"slurm|$n|$(printf '%s' \"$out\" | head -n 1 | cut -c1-2000)\"; "
        "if j=$(timeout 10 squeue -h -w \"$n\" -t RUNNING,COMPLETING -o %i 2>/dev/null); "
        "then echo \"slurm_jobs|$(printf '%s\\n' \"$j\" | grep -c .)\"; fi; break; fi; done; "
        "[ -n \"$found\" ] || echo \"slurm_error|$(printf '%s' \"$out\" | head -n 1 | cut -c1-300)\"; fi\n"
        "if command -v kubectl >/dev/null 2>&1; then found=''; "
        f"for n in {names}; do if out=$(timeout 10 kubectl get node \"$n\" -o 'jsonpath={KUBE_FIELDS}' 2>&1); "
        "then found=1; echo \"kube|$n|$(printf '%s' \"$out\" | head -n 1 | cut -c1-500)\"; "
        "if p=$(timeout 10 kubectl get pods --all-namespaces --field-selector \"spec.nodeName=$n\" -o name "
        "2>/dev/null); then echo \"kube_pods|$(printf '%s\\n' \"$p\" | grep -c .)\"; fi; break; fi; done; "
        "[ -n \"$found\" ] || echo \"kube_error|$(printf '%s' \"$out\" | head -n 1 | cut -c1-300)\"; fi"
    )


def parse(text: str) -> list[Scheduler]:
    """The schedulers SCRIPT found, from its output."""
    found: dict[str, Scheduler] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition("|")
        if kind == "slurm":
            node, _, shown = rest.partition("|")
            state = re.search(r"\bState=(\S+)", shown)
            reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?=\s+\w+=|$)", shown)
            words = state.group(1) if state else None
            why = reason.group(1).strip() if reason else None
            found["slurm"] = Scheduler(kind="slurm", node=node, state=words,
                                       drained=None if words is None else "DRAIN" in words.upper(),
                                       reason=None if why in (None, "", "(null)", "none") else why)
        elif kind == "kube":
            node, _, fields = rest.partition("|")
            unschedulable, _, ours = fields.partition("|")
            cordoned = unschedulable.strip() == "true"
            found["kubernetes"] = Scheduler(kind="kubernetes", node=node, state="cordoned" if cordoned else "schedulable",
                                            drained=cordoned, reason=ours.strip() or None)
        elif kind in ("slurm_jobs", "kube_pods") and rest.strip().isdigit():
            which = found.get("slurm" if kind == "slurm_jobs" else "kubernetes")
            if which is not None:
                which.running = int(rest)
        elif kind in ("slurm_error", "kube_error"):
            name = "slurm" if kind == "slurm_error" else "kubernetes"
            found[name] = Scheduler(kind=name, node=None, error=rest.strip() or "no answer")
    return list(found.values())


def note(s: Scheduler) -> str:
    """What the model reads about a scheduler found on the host."""
    title = "a Slurm node" if s.kind == "slurm" else "a Kubernetes node"
    if s.error:
        return (f"{'scontrol' if s.kind == 'slurm' else 'kubectl'} is installed but could not answer ({s.error}): "
                f"it may be {title}; find out before changing it")
    work = f"{s.running} {'job' if s.kind == 'slurm' else 'pod'}{'s' * (s.running != 1)} on it" \
        if s.running is not None else "its work not read"
    if s.drained:
        why = f" ({s.reason})" if s.reason else ""
        return (f"{title} ({s.node}: {s.state}, already drained{why}; {work}): drain_node leaves a drain someone "
                "else made as it is, and it stays: never undrain it")
    return (f"{title} ({s.node}: {s.state}; {work}): drain it with drain_node after its backup and before its first "
            "benchmark")
