"""The safety gate: hosts in scope, risk classes, backup before change, explicit approval.

Every tool call passes `SafetyPolicy.decide` before it runs. The order of the rules is the policy:

1. a call naming a host outside the session's scope is refused before any connection;
2. forbidden steps are refused in every mode;
3. read-only steps run;
   ... except a benchmark that would keep a baseline ("before", or a label the goal's throughput checks
   compare with) on a host a change has already run on in this session: refused, as a baseline
   measured after the change would compare the change with itself;
4. in a dry run (`--plan`) every other step, and every benchmark, is skipped and reported as "would run";
5. a mutating or destructive step needs the verified backup of this session that undoes it
   (coverage.py `required_backup`): a pip change a pip-freeze backup of that environment, a toolkit or
   cuda link change a backup with a system reading; a step no backup undoes (a removed toolkit, the
   driver, system packages, conda) still needs a backup of the host, and an approval that says so;
6. the first change on a host of a goal with a throughput check needs that check's baseline measured
   there first (a run_bench result labelled as the check's compare_to);
7. ... and an explicit approval: the operator's terminal (chat), whose panel says what undoes the step
   or that nothing does, or a rule of the goal file's authorizations (scripted runs; see
   authorizations.py), which for a step no backup undoes must say `irreversible: true`. Nothing the
   model or a tool's output says counts. A refusal gives every reason at once and, in a scripted run,
   the closest rule.

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

from agent.safety.authorizations import Authorization, closest, irreversible_miss
from agent.safety.classifier import classify, classify_workload
from agent.safety.coverage import TAKE_BACKUP, Cover, Requirement, required_backup, what_undoes
from agent.safety.ledger import BackupLedger, BaselineLedger
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


# A read the model asked to run outside the read sandbox (ssh_exec outside_sandbox: true) of a command the
# classifier judges read-only: it needs an approval, the operator's or a rule naming its exact text, as a
# change does; but no backup (none would undo what a misjudged read does: a device it opens, a process
# it signals) and no baseline, and it does not count as a change of its host.
UNGUARDED_READ = "outside-sandbox"


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
        risk = classify(action.subject)
        if action.outside_sandbox and risk.cls is RiskClass.READ_ONLY:
            return Risk(cls=RiskClass.MUTATING, rule=UNGUARDED_READ,
                        reason=f"it runs outside the read sandbox, where nothing stops a change ({risk.reason}): "
                               "it needs an approval (no backup: what a misjudged read does, no backup undoes)")
        return risk
    env = action.workload.env
    risk = classify_workload(command_subject(action.workload.command, cwd=action.workload.cwd))
    unsafe = _unsafe_workload_env(env)
    if unsafe:
        return Risk(cls=risk.cls.at_least(RiskClass.MUTATING), rule="workload:env",
                    reason=f"the benchmark's environment sets {', '.join(unsafe)}, which can change what code runs")
    if env and risk.cls is RiskClass.READ_ONLY:
        risk = risk.model_copy(update={"reason": f"{risk.reason}; environment: {', '.join(sorted(env))}"})
    return risk


def _never_started(status: str, data: dict | None) -> bool:
    """A result that says its tool never ran: skipped after an earlier change of its batch failed, cancelled
    before it started (a cancel that stopped it while it ran says `started`), or a tool not available.
    Read from what the record keeps, so a replay learns the same."""
    if status in ("skipped", "unavailable"):
        return True
    return status == "cancelled" and not (data or {}).get("started")


# Tools whose change is a node's place in its scheduler, not its software: a benchmark before and after a
# drain measures the same stack (the system prompt drains a node before its first benchmark).
SCHEDULER_TOOLS = ("drain_node", "undrain_node")
# check_outputs keeps its labels apart from run_bench's: "before" of each is a baseline of its own.
OUTPUTS_PREFIX = "outputs:"


def baseline_key(tool: str, label: object) -> str | None:
    """The key a tool's labelled result is kept under in the gate's baselines, or None for a tool that keeps
    none: a benchmark's label, or check_outputs' label prefixed."""
    if not isinstance(label, str) or not label:
        return None
    return label if tool == "run_bench" else OUTPUTS_PREFIX + label if tool == "check_outputs" else None


@dataclass
class SafetyPolicy:
    """The gate of a session. Scope, ledger and approvals live here; the loop only asks."""

    scope: set[str]
    ledger: BackupLedger = field(default_factory=BackupLedger)
    mode: Literal["interactive", "scripted"] = "scripted"
    approver: Approver | None = None  # interactive: the operator's terminal
    authorizations: list[Authorization] = field(default_factory=list)  # scripted: the goal file
    plan: bool = False  # dry run
    # The interpreter a call that names none uses, per host (its configured python, else python3): the
    # environment a pip_install without `python` changes, whose backup it needs.
    default_python: dict[str, str] = field(default_factory=dict)
    # The labels the goal's throughput checks compare with: measured on each host before its first change.
    baselines: list[str] = field(default_factory=list)
    measured: BaselineLedger = field(default_factory=BaselineLedger)
    # A dry run's answers, kept for its verdict: what a real run would have done with each change.
    planned: list[tuple[str, str]] = field(default_factory=list)  # ("would run" | "would ask" | "would be refused", subject)
    _planned_backups: list[BackupRecord] = field(default_factory=list)  # what a dry run's backup steps would take
    _session_approvals: set[tuple[str, str | None, str]] = field(default_factory=set)  # (tool, host, subject)

    def as_record(self) -> dict:
        """The form a transcript's session_start keeps, from which replay rebuilds the gate."""
        return {"scope": sorted(self.scope), "mode": self.mode, "plan": self.plan,
                "authorizations": [a.model_dump(exclude_defaults=True) for a in self.authorizations],
                **({"default_python": dict(sorted(self.default_python.items()))} if self.default_python else {}),
                **({"baselines": list(self.baselines)} if self.baselines else {})}

    # ------------------------------------------------------------------ what the results taught the gate

    def observe(self, tool: str, decision: "Decision | None", ok: bool, status: str, data: dict | None) -> None:
        """One call's result, as the loop records it (live and in replay alike): a benchmark's label on its
        host, and a change that ran (a backup aside, which changes nothing the benchmark measures; a change
        that never started, skipped or cancelled before its tool ran, changed nothing either)."""
        if decision is None or not decision.allowed or not decision.host:
            return
        kept = baseline_key(tool, data.get("label") if isinstance(data, dict) else None)
        if kept is not None and ok:
            self.measured.measured(decision.host, kept)
        is_backup = decision.risk.rule == "backup" and decision.risk.cls is RiskClass.MUTATING
        if decision.risk.cls in (RiskClass.MUTATING, RiskClass.DESTRUCTIVE) and not is_backup \
                and decision.risk.rule != UNGUARDED_READ \
                and tool not in SCHEDULER_TOOLS \
                and not _never_started(status, data):
            self.measured.changed(decision.host)

    def resume_measured(self, facts: dict | None, store: dict | None = None) -> None:
        """An earlier part's labels and changed hosts (agent resume): from its gate's facts; a part resumed
        from a record without them gives at least its benchmark results' labels, each with its host."""
        if facts:
            self.measured.restore(facts)
        for tool in ("run_bench", "check_outputs"):
            for result in ((store or {}).get(tool) or {}).values():
                key = baseline_key(tool, result.get("label")) if isinstance(result, dict) else None
                if key is not None and result.get("host"):
                    self.measured.measured(result["host"], key)

    def _baseline_labels(self) -> list[str]:
        """Labels no benchmark (or check_outputs) may keep after a change: "before" says it, and so do the goal's
        baselines."""
        return sorted({"before", OUTPUTS_PREFIX + "before", *self.baselines})

    def _refuse_late_baseline(self, tool: str, action: Action, risk: Risk) -> Decision | None:
        label, key = action.label, baseline_key(tool, action.label)
        if key is None or key not in self._baseline_labels() or not action.host \
                or not self.measured.is_changed(action.host):
            return None
        what = "a benchmark measured" if tool == "run_bench" else "what the served model answers"
        return Decision(Verdict.DENY, risk, "baseline-after-change",
                        f"{action.host} was already changed in this session, so {what} now is not "
                        f"its state before the change: label {label!r} is kept for a baseline measured before the "
                        f"first change. Measure the changed host under another label (e.g. label='after', "
                        f"compare_to={label!r} if that baseline exists), and report that no baseline was measured "
                        f"if none was", host=action.host, subject=action.subject)

    def _missing_baseline(self, tool: str, host: str | None) -> str | None:
        """Why the first change on `host` must wait: the goal's baseline not measured there yet."""
        if not self.baselines or host is None or tool in ("restore_backup", *SCHEDULER_TOOLS) \
                or self.measured.is_changed(host):
            return None  # a rollback puts the host back, and a drain is the node's place: neither waits for one
        missing = [label for label in self.baselines if not self.measured.has(host, label)]
        if not missing:
            return None
        said = []
        for tool_name, check, labels in (
                ("run_bench", "throughput", [m for m in missing if not m.startswith(OUTPUTS_PREFIX)]),
                ("check_outputs", "outputs", [m.removeprefix(OUTPUTS_PREFIX) for m in missing
                                              if m.startswith(OUTPUTS_PREFIX)])):
            if labels:
                said.append(f"the goal's {check} check compares with {' and '.join(map(repr, labels))}, and no "
                            f"{tool_name} result labelled so was measured on {host} in this session: measure it "
                            f"first ({tool_name} on {host} with label={labels[0]!r})")
        return "; ".join(said) + " while the host is as it was; after the first change a baseline cannot be taken"

    def _requirement(self, tool: str, action: Action, risk: Risk, backups: list[BackupRecord]) -> Requirement:
        return required_backup(tool, action, risk, backups, self.default_python.get(action.host or ""))

    def _verified(self, host: str | None) -> list[BackupRecord]:
        return [b for b in self.ledger.all() if b.verified and b.host == host]

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
        late = self._refuse_late_baseline(tool, action, risk)
        if late is not None:
            return late
        if self.plan and action.workload is not None:
            # A benchmark reads, but takes minutes and the GPUs: a dry run runs none. Its label counts as measured
            # for the plan, as a backup the plan would take counts for the steps after it.
            if action.host and action.label:
                self.measured.measured(action.host, action.label)
            return verdict(Verdict.SKIP, risk, "plan", "would run: a benchmark (a dry run runs none)")
        if risk.cls is RiskClass.READ_ONLY:
            return verdict(Verdict.ALLOW, risk, "read-only", risk.reason)
        if self.plan:
            return self._plan(tool, action, risk, verdict)
        if risk.rule == "backup" and risk.cls is RiskClass.MUTATING:
            # A tool's own declaration (never the classifier's or the model's): a backup step writes only
            # a new directory. Anything riskier, or a backup of an interpreter the model named that the
            # classifier does not accept (rule "interpreter"), goes through backup and approval as usual.
            return verdict(Verdict.ALLOW, risk, "backup", "a backup writes only its own timestamped directory")
        backups = self._verified(action.host) if action.host else []
        need = self._requirement(tool, action, risk, backups)
        backup = need.backup
        backup_id = backup.backup_id if backup else None
        unguarded_read = risk.rule == UNGUARDED_READ
        no_backup = (f"there is no verified backup of {action.host} from this session{need.missing}"
                     if action.host is not None and backup is None and not unguarded_read else None)
        no_baseline = None if unguarded_read else self._missing_baseline(tool, action.host)
        what = f"this is a {risk.cls.value} step ({risk.reason})"
        if self.mode == "interactive":
            if no_backup or no_baseline:
                return verdict(Verdict.DENY, risk, "no-backup" if no_backup else "no-baseline",
                               f"{what} and " + "; also, ".join(filter(None, [no_backup, no_baseline]))
                               + ", then retry; the operator approves each change")
            return self._ask_operator(tool, action, risk, backup, verdict)
        undone_by_none = need.why if need.kind == "irreversible" else None
        index, misses = closest(self.authorizations, tool, action, risk, undone_by_none)
        if index is not None and not misses:
            if no_backup or no_baseline:
                return verdict(Verdict.DENY, risk, "no-backup" if no_backup else "no-baseline",
                               f"{what}: the goal file's authorizations[{index}] covers it, but "
                               + "; also, ".join(filter(None, [no_backup, no_baseline])) + "; then the same call "
                               "will pass")
            return verdict(Verdict.ALLOW, risk, "authorized", f"goal file authorizations[{index}] covers it"
                           + (" (irreversible: true: no backup undoes it)" if undone_by_none else ""),
                           backup_id=backup_id, approved_by=f"goal:authorizations[{index}]")
        if undone_by_none and index is not None and misses == [irreversible_miss(undone_by_none)]:
            rule = {**self.authorizations[index].model_dump(exclude_defaults=True, exclude={"members"}),
                    "irreversible": True}
            return verdict(Verdict.DENY, risk, "irreversible",
                           f"{what}, and no backup undoes it: {undone_by_none}. The goal file's authorizations"
                           f"[{index}] matches the call, but a change no backup undoes needs a rule that says so: "
                           f"the operator could write it as {json.dumps(rule)}"
                           + (f"; also, {no_backup}" if no_backup else "")
                           + ". A scripted run never asks: report that this step needs that rule")
        # A shell command no rule covers stays refused with a backup, so the backup is not worth a word
        # there; a tool step may be covered once a rule is added, and then it needs the backup too.
        shell_command = action.risk is None and action.workload is None
        read_hint = ("; if you meant only to read, leave out what the reason names: commands that only read run "
                     "without any rule" if shell_command else "")
        if shell_command and index is None:
            no_backup = no_baseline = None
        return verdict(Verdict.DENY, risk, "not-authorized",
                       f"{what}, and no rule of the goal file's authorizations covers it"
                       + self._nearest(index, misses, tool, action, undone_by_none)
                       + (f"; also, {no_backup}" if no_backup else "")
                       + (f"; also, {no_baseline}" if no_baseline else "")
                       + read_hint
                       + ". A scripted run never asks: report what you would need instead")

    def _plan(self, tool: str, action: Action, risk: Risk, verdict) -> Decision:
        """A dry run's answer: nothing runs, and the reason says what a real run of this session would do with
        the step, by the same rules (a backup the dry run would have taken counts for the steps after it)."""
        if risk.rule == "backup" and risk.cls is RiskClass.MUTATING:
            self._planned_backups.append(self._planned_backup(action))
            self.planned.append(("would run", action.subject))
            return verdict(Verdict.SKIP, risk, "plan", "would run: a backup writes only its own timestamped directory "
                           "(a dry run takes none; the steps after it are judged as if it had been taken)")
        planned = [b for b in self._planned_backups if b.host == action.host]
        need = self._requirement(tool, action, risk, self._verified(action.host) + planned)
        no_backup = None
        if action.host is not None and need.backup is None:
            how = ": run pip_freeze_backup first" if need.missing == TAKE_BACKUP else need.missing
            no_backup = f"no backup of {action.host} is taken or planned before it{how}, then the same call would pass"
        no_baseline = self._missing_baseline(tool, action.host)
        what = f"this is a {risk.cls.value} step ({risk.reason})"
        unmet = "; also, ".join(filter(None, [no_backup, no_baseline]))
        if self.mode == "interactive":
            asked = "approval, asked one by one" if risk.cls is RiskClass.DESTRUCTIVE else "approval"
            if unmet:
                self.planned.append(("would be refused", action.subject))
                return verdict(Verdict.SKIP, risk, "plan", f"would be refused: {what}, and {unmet}")
            self.planned.append(("would ask", action.subject))
            return verdict(Verdict.SKIP, risk, "plan", f"would ask the operator for {asked}: {what}")
        undone_by_none = need.why if need.kind == "irreversible" else None
        index, misses = closest(self.authorizations, tool, action, risk, undone_by_none)
        if index is not None and not misses:
            rule = f"authorizations[{index}] ({self.authorizations[index].describe()})"
            if unmet:
                self.planned.append(("would be refused", action.subject))
                return verdict(Verdict.SKIP, risk, "plan", f"would be refused: {rule} covers it, but {unmet}")
            self.planned.append(("would run", action.subject))
            return verdict(Verdict.SKIP, risk, "plan", f"would run: authorized by {rule}")
        self.planned.append(("would be refused", action.subject))
        return verdict(Verdict.SKIP, risk, "plan", f"would be refused: {what}, and no rule of the goal file's "
                       "authorizations covers it" + self._nearest(index, misses, tool, action, undone_by_none))

    def _planned_backup(self, action: Action) -> BackupRecord:
        """The backup a dry run's backup step stands for: of the interpreter it names, with a system reading."""
        host = action.host or ""
        target = action.interpreter or self.default_python.get(host) or "(the host's default interpreter)"
        return BackupRecord(backup_id="(planned)", host=host, kind="pip-freeze", target=target, created_at=0.0,
                            remote_dir="", files={"freeze.txt": "", "system.txt": ""}, verified=True)

    def _nearest(self, index: int | None, misses: list[str] | None, tool: str, action: Action,
                 undone_by_none: str | None = None) -> str:
        """The closest rule and how the call differs from it; or, with none of this kind, what the rules allow."""
        if index is not None and misses:
            return (f": the closest, authorizations[{index}] ({self.authorizations[index].describe()}), differs: "
                    + "; ".join(misses))
        kinds = [f"[{i}] {a.describe()}" for i, a in enumerate(self.authorizations)
                 if a.covers_host(action.host)]
        would = self._rule_that_covers(tool, action, undone_by_none)
        if not kinds:
            return f": the goal file authorizes nothing on {action.host}" + would
        return f": none is for {tool} on {action.host}; the rules for this host are " + "; ".join(kinds) + would

    @staticmethod
    def _rule_that_covers(tool: str, action: Action, undone_by_none: str | None = None) -> str:
        """The goal file rule that would cover this tool call, for the operator to add if they want it (a
        shell command gets none: only exact commands can be authorized, and the report lists them)."""
        if action.risk is None and action.workload is None:
            return ""
        args = {k: v for k, v in action.args.items() if action.defaults.get(k, object()) != v}
        destructive = action.risk is not None and action.risk.cls is RiskClass.DESTRUCTIVE
        rule = {"host": action.host, "tool": tool, **({"destructive": True} if destructive else {}),
                **({"irreversible": True} if undone_by_none else {}), **({"args": args} if args else {})}
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
        undo = what_undoes(tool, action, risk, self._verified(action.host),
                           self.default_python.get(action.host or ""))
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
