"""Whether a host is a node of a Slurm or Kubernetes cluster, as its own scheduler commands say.

inspect_host runs script()'s lines beside its read of the host (outside the read sandbox: the clients ask their
controller over the network), so the rule "drain a node before changing it" can be followed without probing by
hand. Each scheduler is asked only where its command is installed, by the host's own short name and then its name
in the session (only a word that can be a node's name: never an option, a glob or many words), ten seconds at
most; an answer about another node is an error, not this one's; a command that is there but cannot answer (no
controller, no kubeconfig) is reported as such, never taken for "not a node".
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
    """Shell lines that print what each installed client said, every line prefixed with what it is (`slurm_rc|0`,
    `slurm_out|NodeName=...`, `squeue_rc|`, `squeue_out|`, `kube_rc|`, `kube_out|`, `pods_rc|`, `pods_out|`), for
    parse() to read: the reading is in Python, where it is tested on what real clients print. Nothing on a host
    with neither client."""
    # The machine's own short name first (its node name, as a rule), then the session's. Only what can be a node's
    # name is asked: one word of letters, digits and ._- that starts with a letter or digit, so neither a name nor
    # what a host's `hostname` prints can be an option (`-A`, `--all`), a glob (`*`) or many words.
    names = (f"h=$(hostname -s 2>/dev/null | head -n 1 | cut -c1-253); for n in \"$h\" {shlex.quote(node)}; do "
             "case \"$n\" in [A-Za-z0-9]*) ;; *) continue;; esac; "
             "case \"$n\" in *[!A-Za-z0-9._-]*) continue;; esac; t=$n; ")

    def each(prefix: str, lines: int = 500) -> str:
        return f"printf '%s\\n' \"$out\" | head -n {lines} | cut -c1-2000 | sed 's/^/{prefix}|/'"

    return (
        "if command -v scontrol >/dev/null 2>&1; then t=''; rc=1; out='no name of this host can be a node name'; "
        f"{names}out=$(timeout 10 scontrol show node \"$t\" -o 2>&1); rc=$?; [ $rc -eq 0 ] && break; done; "
        f"echo \"slurm_node|$t\"; echo \"slurm_rc|$rc\"; {each('slurm_out', 20)}; "
        "if [ $rc -eq 0 ]; then out=$(timeout 10 squeue -h -w \"$t\" -t RUNNING,COMPLETING -o %i 2>&1); "
        f"echo \"squeue_rc|$?\"; {each('squeue_out')}; fi; fi\n"
        "if command -v kubectl >/dev/null 2>&1; then t=''; rc=1; out='no name of this host can be a node name'; "
        f"{names}out=$(timeout 10 kubectl get node \"$t\" -o 'jsonpath={KUBE_FIELDS}' 2>&1); rc=$?; "
        "[ $rc -eq 0 ] && break; done; "
        f"echo \"kube_node|$t\"; echo \"kube_rc|$rc\"; {each('kube_out', 20)}; "
        "if [ $rc -eq 0 ]; then out=$(timeout 10 kubectl get pods --all-namespaces --field-selector "
        f"\"spec.nodeName=$t\" -o name 2>&1); echo \"pods_rc|$?\"; {each('pods_out')}; fi; fi"
    )


# Slurm prints these after Reason= in some versions: a reason without its [user@time] trailer ends before them.
_AFTER_REASON = ("Comment", "Extra", "ReservationName", "ResumeAfterTime", "MCS_label", "Partitions", "NextState",
                 "InstanceId", "InstanceType", "LastBusyTime", "CfgTRES", "AllocTRES")
_REASON = re.compile(r"\bReason=(.*?) \[[^\]\[]*@[^\]\[]*\](?=\s|$)")
_REASON_UNTIL_KEY = re.compile(r"\bReason=(.*?)(?=\s+(?:" + "|".join(_AFTER_REASON) + r")=|$)")
# Slurm states a node takes no new work in by an administrator's hand: drained (draining) or failing.
_OUT_OF_SERVICE = ("DRAIN", "FAIL")
_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d")  # a client-go log line on stderr, not data


def _said(lines: list[str]) -> str:
    """What a failed client said, for a person: its lines joined, the last (the client's own verdict) kept."""
    text = " / ".join(ln.strip() for ln in lines if ln.strip())
    return (text if len(text) <= 400 else text[:150] + " ... " + text[-240:]) or "no output"


def parse(text: str) -> list[Scheduler]:
    """The schedulers SCRIPT found, from its output."""
    got: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition("|")
        if sep:
            got.setdefault(key, []).append(rest)
    found = []
    if "slurm_rc" in got:
        found.append(_slurm(got))
    if "kube_rc" in got:
        found.append(_kube(got))
    return found


def _slurm(got: dict[str, list[str]]) -> Scheduler:
    node, out = (got.get("slurm_node") or [None])[0], got.get("slurm_out", [])
    if got["slurm_rc"][0].strip() != "0":
        return Scheduler(kind="slurm", node=None, error=_said(out))
    shown = next((ln for ln in out if ln.startswith("NodeName=")), None)
    if shown is None:
        return Scheduler(kind="slurm", node=None, error="scontrol printed no node: " + _said(out))
    named = re.match(r"NodeName=(\S+)", shown).group(1)
    if node and named != node:  # a name scontrol read as something else (a keyword, several nodes): not this one
        return Scheduler(kind="slurm", node=None, error=f"scontrol, asked for node {node}, answered about {named}")
    state = re.search(r"\bState=(\S+)", shown)
    reason = _REASON.search(shown) or _REASON_UNTIL_KEY.search(shown)
    words = state.group(1) if state else None
    why = reason.group(1).strip() if reason else None
    s = Scheduler(kind="slurm", node=node, state=words,
                  drained=None if words is None else any(w in words.upper() for w in _OUT_OF_SERVICE),
                  reason=None if why in (None, "", "(null)", "none") else why)
    jobs = got.get("squeue_out", [])
    if (got.get("squeue_rc") or ["1"])[0].strip() == "0":
        s.running = sum(1 for ln in jobs if re.match(r"\d", ln.strip()))
    else:
        s.error = "squeue could not list its jobs: " + _said(jobs)
    return s


def _kube(got: dict[str, list[str]]) -> Scheduler:
    node, out = (got.get("kube_node") or [None])[0], got.get("kube_out", [])
    if got["kube_rc"][0].strip() != "0":
        return Scheduler(kind="kubernetes", node=None, error=_said(out))
    data = [ln for ln in out if not _KLOG.match(ln)]
    first = next((i for i, ln in enumerate(data) if re.match(r"^(true|false)?\|", ln)), None)
    if first is None:
        return Scheduler(kind="kubernetes", node=None, error="kubectl printed no node: " + _said(out))
    unschedulable, _, ours = data[first].partition("|")
    ours = "\n".join([ours, *data[first + 1:]]).strip()  # an annotation may hold newlines
    cordoned = unschedulable.strip() == "true"
    s = Scheduler(kind="kubernetes", node=node, state="cordoned" if cordoned else "schedulable", drained=cordoned,
                  reason=ours or None)
    pods = got.get("pods_out", [])
    if (got.get("pods_rc") or ["1"])[0].strip() == "0":
        s.running = sum(1 for ln in pods if ln.startswith("pod/"))
    else:
        s.error = "kubectl could not list its pods: " + _said(pods)
    return s


def note(s: Scheduler) -> str:
    """What the model reads about a scheduler found on the host."""
    title = "a Slurm node" if s.kind == "slurm" else "a Kubernetes node"
    if s.error and s.state is None:
        return (f"{'scontrol' if s.kind == 'slurm' else 'kubectl'} is installed but could not answer ({s.error}): "
                f"it may be {title}; find out before changing it")
    work = f"{s.running} {'job' if s.kind == 'slurm' else 'pod'}{'s' * (s.running != 1)} on it" \
        if s.running is not None else f"its work could not be read: {s.error}"
    if s.drained and s.kind == "kubernetes":
        why = f", annotated {s.reason!r}" if s.reason else " (a cordon carries no reason; ask its owner)"
        return (f"{title} ({s.node}: already cordoned{why}; {work}): drain_node leaves a cordon it did not make as it "
                "is, and it stays: never uncordon it")
    if s.drained:
        why = f" ({s.reason})" if s.reason else ""
        return (f"{title} ({s.node}: {s.state}, already drained{why}; {work}): drain_node leaves a drain someone "
                "else made as it is, and it stays: never undrain it")
    return (f"{title} ({s.node}: {s.state}; {work}): other people's work runs here, so a change needs it drained "
            "first (drain it with drain_node after its backup and before its first benchmark)")
