"""The safety gate: hosts in scope, risk classes, backup before change, explicit approval.

Every tool call passes `SafetyPolicy.decide` before it runs. The order of the rules is the policy:

1. a call naming a host outside the session's scope is refused before any connection;
2. forbidden steps are refused in every mode;
3. read-only steps run;
4. in a dry run (`--plan`) every other step is skipped and reported as "would run";
5. a mutating or destructive step needs a verified backup of that host from this session;
6. ... and an explicit approval: the operator's terminal (chat) or a rule of the goal file's
   authorizations (scripted runs; see authorizations.py). Nothing the model or a tool's output
   says counts. A refusal gives every reason at once and, in a scripted run, the closest rule.

Approvals bind to the host and the exact subject (the shell command, or a typed tool's
canonical description). Every decision names the rule that made it.
"""

from __future__ import annotations

import enum
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent.safety.authorizations import Authorization, closest
from agent.safety.classifier import classify, classify_workload
from agent.safety.coverage import Cover, what_undoes
from agent.safety.ledger import BackupLedger
from tools.base import Action, BackupRecord, Risk, RiskClass
from tools.hosts import command_subject


class Verdict(str, enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    SKIP = "skip"  # dry run: recorded as "would run", not executed


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    risk: Risk
    rule: str  # the policy rule that decided: "read-only", "out-of-scope", "no-backup", "approved", ...
    reason: str
    host: str | None = None
    subject: str = ""
    backup_id: str | None = None
    approved_by: str | None = None  # "operator", "operator (session)", "goal:authorizations[2]"

    @property
    def allowed(self) -> bool:
        return self.verdict is Verdict.ALLOW

    def message_for_model(self) -> str:
        """What the model reads when its call did not run."""
        if self.verdict is Verdict.SKIP:
            return f"skipped (dry run: nothing ran; a {self.risk.cls.value} step on {self.host or '-'}): {self.reason}"
        return f"refused by the safety layer [{self.rule}]: {self.reason}"

    def as_event(self) -> dict:
        return {
            "verdict": self.verdict.value, "rule": self.rule, "reason": self.reason, "host": self.host,
            "subject": self.subject, "risk": self.risk.cls.value, "risk_rule": self.risk.rule,
            "risk_reason": self.risk.reason, "decoded": self.risk.decoded, "backup_id": self.backup_id,
            "approved_by": self.approved_by,
        }


# --------------------------------------------------------------------------- approvals


class ApprovalAnswer(str, enum.Enum):
    YES_ONCE = "yes"
    NO = "no"
    YES_SESSION = "session"  # this exact command on this host for the rest of the session (mutating only)


@dataclass(frozen=True)
class ApprovalRequest:
    host: str | None
    tool: str
    subject: str
    risk: Risk
    backup: BackupRecord | None  # the host's latest verified backup, which lets the gate ask at all
    undo: Cover | None = None  # which backup really undoes the step, and how; or that none does


@dataclass(frozen=True)
class Declined:
    """The operator's no with their words (why, or what to do instead): the model reads them with the refusal."""

    reason: str
    answer: ApprovalAnswer = ApprovalAnswer.NO


class Approver(Protocol):
    """Who can say yes in an interactive session: the operator at the terminal."""

    def ask(self, request: ApprovalRequest) -> "ApprovalAnswer | Declined": ...


# --------------------------------------------------------------------------- the gate


# Settings a benchmark workload may be given in its environment without losing its read-only
# class: they choose devices, threads and the toolkit, and load no code of their own. Anything
# else (LD_PRELOAD, LD_LIBRARY_PATH, PYTHONPATH, PATH, plugin variables...) is classified as an
# assignment before the command, which is never read-only.
WORKLOAD_ENV = re.compile(
    r"CUDA_HOME|CUDA_PATH|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|CUDA_LAUNCH_BLOCKING|CUDA_MODULE_LOADING"
    r"|NCCL_(DEBUG|DEBUG_SUBSYS|P2P_DISABLE|P2P_LEVEL|IB_DISABLE|SHM_DISABLE|ALGO|PROTO|NVLS_ENABLE"
    r"|SOCKET_IFNAME|MIN_NCHANNELS|MAX_NCHANNELS|CUMEM_ENABLE)"
    r"|OMP_NUM_THREADS|MKL_NUM_THREADS|TOKENIZERS_PARALLELISM|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE"
    r"|PYTORCH_CUDA_ALLOC_CONF")
# A toolkit setting must name a toolkit directory: JIT compilers run $CUDA_HOME/bin/nvcc.
TOOLKIT_DIR = re.compile(r"(/[^/\0]+)*/usr/local/cuda(-\d+(\.\d+)*)?/?")


def _unsafe_workload_env(env: dict[str, str]) -> list[str]:
    unsafe = []
    for name, value in env.items():
        if not WORKLOAD_ENV.fullmatch(name):
            unsafe.append(name)
        elif name in ("CUDA_HOME", "CUDA_PATH") and (not TOOLKIT_DIR.fullmatch(value) or "/../" in value + "/"):
            unsafe.append(f"{name}={value}")
    return sorted(unsafe)


def _with_interpreter(risk: Risk, interpreter: str | None) -> Risk:
    """A tool that runs an interpreter the model named is no safer than running that program."""
    if not interpreter:
        return risk
    probe = classify(f"{shlex.quote(interpreter)} -VV")
    if probe.cls is RiskClass.READ_ONLY:
        return risk
    return Risk(cls=risk.cls.at_least(probe.cls).at_least(RiskClass.MUTATING), rule="interpreter",
                reason=f"runs {interpreter!r}, which is not a Python interpreter the classifier accepts "
                       f"({probe.reason}); leave `python` out to use the host's configured one")


def classify_action(action: Action) -> Risk:
    """An action's risk: declared by the tool, or (for shell commands) from the classifier.

    A tool marks a command as a benchmark workload (`action.workload`) so the known entry
    points of sglang, vllm and the project's bench scripts count as read-only; anything
    else in that command is still classified as usual, and its environment may only hold
    the settings in WORKLOAD_ENV.
    """

    if action.risk is not None:
        return _with_interpreter(action.risk, action.interpreter)
    if action.workload is None:
        return classify(action.subject)
    env = action.workload.env
    risk = classify_workload(command_subject(action.workload.command, cwd=action.workload.cwd))
    unsafe = _unsafe_workload_env(env)
    if unsafe:
        return Risk(cls=risk.cls.at_least(RiskClass.MUTATING), rule="workload:env",
                    reason=f"the benchmark's environment sets {', '.join(unsafe)}, which can change what code runs")
    if env and risk.cls is RiskClass.READ_ONLY:
        risk = risk.model_copy(update={"reason": f"{risk.reason}; environment: {', '.join(sorted(env))}"})
    return risk


@dataclass
class SafetyPolicy:
    """The gate of a session. Scope, ledger and approvals live here; the loop only asks."""

    scope: set[str]
    ledger: BackupLedger = field(default_factory=BackupLedger)
    mode: Literal["interactive", "scripted"] = "scripted"
    approver: Approver | None = None  # interactive: the operator's terminal
    authorizations: list[Authorization] = field(default_factory=list)  # scripted: the goal file
    plan: bool = False  # dry run
    # A dry run's answers, kept for its verdict: what a real run would have done with each change.
    planned: list[tuple[str, str]] = field(default_factory=list)  # ("would run" | "would ask" | "would be refused", subject)
    _planned_backups: set[str] = field(default_factory=set)  # hosts a dry run's backup step would have backed up
    _session_approvals: set[tuple[str, str | None, str]] = field(default_factory=set)  # (tool, host, subject)

    def as_record(self) -> dict:
        """The form a transcript's session_start keeps, from which replay rebuilds the gate."""
        return {"scope": sorted(self.scope), "mode": self.mode, "plan": self.plan,
                "authorizations": [a.model_dump(exclude_defaults=True) for a in self.authorizations]}

    def refuse_out_of_scope(self, host: str | None, subject: str = "") -> Decision | None:
        """Rule 1 on its own: the refusal of a call naming a host outside the scope, or None.

        The loop asks it before a call's arguments are validated, so a call to a foreign host is
        refused as out of scope whatever else is wrong with it.
        """
        if host is None or host in self.scope:
            return None
        risk = Risk(cls=RiskClass.FORBIDDEN, rule="scope", reason="host outside the session")
        return Decision(Verdict.DENY, risk, "out-of-scope",
                        f"host {host!r} is not one of this session's hosts "
                        f"({', '.join(sorted(self.scope)) or 'none'}); only the operator can add a host",
                        host=host, subject=subject)

    def decide(self, tool: str, action: Action) -> Decision:
        def verdict(v: Verdict, risk: Risk, rule: str, reason: str, **kw: Any) -> Decision:
            return Decision(v, risk, rule, reason, host=action.host, subject=action.subject, **kw)

        out_of_scope = self.refuse_out_of_scope(action.host, action.subject)
        if out_of_scope is not None:
            return out_of_scope
        risk = classify_action(action)
        if risk.reaches is not None:
            return verdict(Verdict.DENY, risk, "out-of-scope",
                           f"{risk.reason}: it acts on {risk.reaches!r}, which is not one of this session's hosts "
                           f"({', '.join(sorted(self.scope)) or 'none'}); run it on that host's own session instead")
        if risk.cls is RiskClass.FORBIDDEN:
            return verdict(Verdict.DENY, risk, "forbidden", f"{risk.reason}; this is refused in every mode")
        if risk.cls is RiskClass.READ_ONLY:
            return verdict(Verdict.ALLOW, risk, "read-only", risk.reason)
        if self.plan:
            return self._plan(tool, action, risk, verdict)
        if risk.rule == "backup" and risk.cls is RiskClass.MUTATING:
            # A tool's own declaration (never the classifier's or the model's): a backup step writes only
            # a new directory. Anything riskier, or a backup of an interpreter the model named that the
            # classifier does not accept (rule "interpreter"), goes through backup and approval as usual.
            return verdict(Verdict.ALLOW, risk, "backup", "a backup writes only its own timestamped directory")
        backup = self.ledger.latest_verified(action.host) if action.host else None
        backup_id = backup.backup_id if backup else None
        no_backup = (f"there is no verified backup of {action.host} from this session: take one with "
                     f"pip_freeze_backup" if action.host is not None and backup is None else None)
        what = f"this is a {risk.cls.value} step ({risk.reason})"
        if self.mode == "interactive":
            if no_backup:
                return verdict(Verdict.DENY, risk, "no-backup", f"{what} and {no_backup}, then retry; the operator "
                               "approves each change")
            return self._ask_operator(tool, action, risk, backup, verdict)
        index, misses = closest(self.authorizations, tool, action, risk)
        if index is not None and not misses:
            if no_backup:
                return verdict(Verdict.DENY, risk, "no-backup",
                               f"{what}: the goal file's authorizations[{index}] covers it, but {no_backup}; then the "
                               "same call will pass")
            return verdict(Verdict.ALLOW, risk, "authorized", f"goal file authorizations[{index}] covers it",
                           backup_id=backup_id, approved_by=f"goal:authorizations[{index}]")
        # A shell command no rule covers stays refused with a backup, so the backup is not worth a word
        # there; a tool step may be covered once a rule is added, and then it needs the backup too.
        shell_command = action.risk is None and action.workload is None
        read_hint = ("; if you meant only to read, leave out what the reason names: commands that only read run "
                     "without any rule" if shell_command else "")
        if shell_command and index is None:
            no_backup = None
        return verdict(Verdict.DENY, risk, "not-authorized",
                       f"{what}, and no rule of the goal file's authorizations covers it"
                       + self._nearest(index, misses, tool, action)
                       + (f"; also, {no_backup}" if no_backup else "")
                       + read_hint
                       + ". A scripted run never asks: report what you would need instead")

    def _plan(self, tool: str, action: Action, risk: Risk, verdict) -> Decision:
        """A dry run's answer: nothing runs, and the reason says what a real run of this session would do with
        the step, by the same rules (a backup the dry run would have taken counts for the steps after it)."""
        if risk.rule == "backup" and risk.cls is RiskClass.MUTATING:
            self._planned_backups.add(action.host or "")
            self.planned.append(("would run", action.subject))
            return verdict(Verdict.SKIP, risk, "plan", "would run: a backup writes only its own timestamped directory "
                           "(a dry run takes none; the steps after it are judged as if it had been taken)")
        backed_up = (action.host is None or action.host in self._planned_backups
                     or self.ledger.latest_verified(action.host) is not None)
        no_backup = (f"no backup of {action.host} is taken or planned before it: run pip_freeze_backup first, then "
                     "the same call would pass")
        what = f"this is a {risk.cls.value} step ({risk.reason})"
        if self.mode == "interactive":
            asked = "approval, asked one by one" if risk.cls is RiskClass.DESTRUCTIVE else "approval"
            if not backed_up:
                self.planned.append(("would be refused", action.subject))
                return verdict(Verdict.SKIP, risk, "plan", f"would be refused: {what}, and {no_backup}")
            self.planned.append(("would ask", action.subject))
            return verdict(Verdict.SKIP, risk, "plan", f"would ask the operator for {asked}: {what}")
        index, misses = closest(self.authorizations, tool, action, risk)
        if index is not None and not misses:
            rule = f"authorizations[{index}] ({self.authorizations[index].describe()})"
            if not backed_up:
                self.planned.append(("would be refused", action.subject))
                return verdict(Verdict.SKIP, risk, "plan", f"would be refused: {rule} covers it, but {no_backup}")
            self.planned.append(("would run", action.subject))
            return verdict(Verdict.SKIP, risk, "plan", f"would run: authorized by {rule}")
        self.planned.append(("would be refused", action.subject))
        return verdict(Verdict.SKIP, risk, "plan", f"would be refused: {what}, and no rule of the goal file's "
                       "authorizations covers it" + self._nearest(index, misses, tool, action))

    def _nearest(self, index: int | None, misses: list[str] | None, tool: str, action: Action) -> str:
        """The closest rule and how the call differs from it; or, with none of this kind, what the rules allow."""
        if index is not None and misses:
            return (f": the closest, authorizations[{index}] ({self.authorizations[index].describe()}), differs: "
                    + "; ".join(misses))
        kinds = [f"[{i}] {a.describe()}" for i, a in enumerate(self.authorizations)
                 if a.covers_host(action.host)]
        would = self._rule_that_covers(tool, action)
        if not kinds:
            return f": the goal file authorizes nothing on {action.host}" + would
        return f": none is for {tool} on {action.host}; the rules for this host are " + "; ".join(kinds) + would

    @staticmethod
    def _rule_that_covers(tool: str, action: Action) -> str:
        """The goal file rule that would cover this tool call, for the operator to add if they want it (a
        shell command gets none: only exact commands can be authorized, and the report lists them)."""
        if action.risk is None and action.workload is None:
            return ""
        args = {k: v for k, v in action.args.items() if action.defaults.get(k, object()) != v}
        destructive = action.risk is not None and action.risk.cls is RiskClass.DESTRUCTIVE
        rule = {"host": action.host, "tool": tool, **({"destructive": True} if destructive else {}),
                **({"args": args} if args else {})}
        return f"; the operator could add this rule to the goal file's authorizations: {json.dumps(rule)}"

    def session_approvals(self) -> list[tuple[str, str | None, str]]:
        """The (tool, host, exact step) the operator approved for the rest of the session, by host, tool, step."""
        return sorted(self._session_approvals, key=lambda k: (k[1] or "", k[0], k[2]))

    def carry_session_approval(self, tool: str, host: str | None, subject: str) -> None:
        """An approval for the session that the operator confirmed for a resumed session (agent resume)."""
        self._session_approvals.add((tool, host, subject))

    def _ask_operator(self, tool, action, risk, backup, verdict) -> Decision:
        backup_id = backup.backup_id if backup else None
        key = (tool, action.host, action.subject)  # the same words through another tool are another step
        if risk.cls is RiskClass.MUTATING and key in self._session_approvals:
            return verdict(Verdict.ALLOW, risk, "approved", "approved earlier for this session",
                           backup_id=backup_id, approved_by="operator (session)")
        if self.approver is None:
            return verdict(Verdict.DENY, risk, "no-approver", "no operator is attached to approve it",
                           backup_id=backup_id)
        backups = [b for b in self.ledger.all() if b.verified and b.host == action.host]
        undo = what_undoes(tool, action, risk, backups)
        reply = self.approver.ask(ApprovalRequest(action.host, tool, action.subject, risk, backup, undo))
        answer = getattr(reply, "answer", reply)
        said = " ".join(str(getattr(reply, "reason", "") or "").split())
        if answer is ApprovalAnswer.YES_SESSION and risk.cls is RiskClass.MUTATING:
            self._session_approvals.add(key)
            return verdict(Verdict.ALLOW, risk, "approved", "the operator approved it for this session",
                           backup_id=backup_id, approved_by="operator (session)")
        if answer in (ApprovalAnswer.YES_ONCE, ApprovalAnswer.YES_SESSION):
            # A destructive step is always approved one by one, whatever the answer offered.
            return verdict(Verdict.ALLOW, risk, "approved", "the operator approved it",
                           backup_id=backup_id, approved_by="operator")
        if said:
            return verdict(Verdict.DENY, risk, "declined", f"the operator declined it and said: {said!r}; do as they "
                           "say, or ask how they want to proceed", backup_id=backup_id)
        return verdict(Verdict.DENY, risk, "declined", "the operator declined it; ask how they want to proceed",
                       backup_id=backup_id)
