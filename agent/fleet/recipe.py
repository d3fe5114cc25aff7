"""A recipe: the changes one canary session made and verified, in a file people read and review.

`recipe_from_transcript` reads a finished session whose goal was met on one host and keeps what a
fleet needs to do the same on other hosts, and no more:

- preconditions: the canary's starting facts (driver, GPU model and count, toolkits, torch build),
  from its first inspection. A host whose facts differ is not the machine the recipe was proven on.
- backup: the arguments of the canary's pip_freeze_backup.
- steps: the changes that the gate allowed and that ended ok, in the order they ran, with their
  arguments (the host left out). Read-only calls are not steps: every host is inspected anyway.
- authorizations: the goal-file rules those steps were allowed by (an operator's yes in a chat
  becomes a rule for exactly that call), on every host (`host: "*"`), and one for restoring the
  host's own backup, which is how a failed host is rolled back.
- checks: the success checks the canary passed; the benchmark: the canary's before/after command,
  with a statistical gate in place of a throughput check; outputs: the serving endpoint the canary asked
  check_outputs of, before and after, with an `outputs` check that each host answers as it did before.

Nothing comes from what the model said: every field is read from the record's calls, decisions,
results and checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent.goal import TOO_DEEP, OutputsCheck, SuccessCheck, TooManyValues, check_tool_authorization, plain_values
from agent.input_files import InputFileError, read_text_file
from agent.safety.authorizations import Authorization
from tools.check_outputs import ENDPOINT
from tools.drain_node import REASON as DRAIN_REASON
from tools.pip_install import UNMET

RECIPE_VERSION = 1
# The fleet makes the backup, the rollback, the drain and the undrain itself, around the steps.
NOT_STEPS = {"pip_freeze_backup", "restore_backup", "drain_node", "undrain_node"}
MIN_GATE_RUNS = 5
# A recipe is a page or two of YAML (the demo's is 2 kB); the limits are goal files' kind (agent/goal.py).
MAX_RECIPE_BYTES = 256 * 1024
MAX_RECIPE_VALUES = 50_000  # a rank test or a bootstrap needs more than the 3 runs a session usually measures


class RecipeError(ValueError):
    """Why a transcript gives no recipe, or a recipe file does not load."""


class Preconditions(BaseModel):
    # Strict: the facts are compared with ==, where `gpu_count: true` would equal a host's 1 GPU.
    model_config = ConfigDict(extra="forbid", strict=True)
    driver: str | None = None  # the loaded driver's version, exactly
    gpu_model: str | None = None  # nvidia-smi's name of the first GPU
    gpu_count: int | None = None
    toolkits: list[str] | None = None  # the versions installed side by side, sorted
    torch: str | None = None  # the torch build of the interpreter of interest (2.10.0+cu128)

    def differences(self, facts: dict) -> list[tuple[str, Any, Any]]:
        """(fact, the host's, these) for each fact of these the host's inspection does not have."""
        now = facts_of(facts)
        return [(key, now.get(key), want) for key, want in self.model_dump().items()
                if want is not None and now.get(key) != want]

    def mismatches(self, facts: dict) -> list[str]:
        """How a host's inspection differs from these facts; empty when it is the same machine."""
        return [f"{key} is {now!r}, the recipe was proven on {want!r}" for key, now, want in self.differences(facts)]


def facts_of(inspection: dict) -> dict:
    """The facts preconditions compare, from an inspect_host result's data."""
    gpus = inspection.get("gpus") or []
    return {"driver": (inspection.get("driver") or {}).get("version"),
            "gpu_model": gpus[0].get("name") if gpus else None,
            "gpu_count": inspection.get("gpu_count"),
            "toolkits": sorted(t["version"] for t in inspection.get("toolkits") or [] if t.get("version")),
            "torch": (inspection.get("python") or {}).get("torch")}


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)  # the call's arguments without `host`


# The drop a fleet's gate allows by default: a non-inferiority margin, not a demand to improve. A host whose
# throughput did not move measures after/before 0.98-1.02 from run-to-run noise alone (serving benchmarks on
# the sims and on the H200 spread 1-2% a side), so a 0% margin rolled back harmless upgrades; 2% lets noise
# pass and still stops a host made measurably slower. The canary's own `min_ratio` allows more, never less.
DEFAULT_MAX_DROP_PERCENT = 2.0


class Gate(BaseModel):
    """after >= before * (1 - max_drop_percent/100), at the given confidence (a bootstrap interval)."""

    model_config = ConfigDict(extra="forbid")
    max_drop_percent: float = Field(DEFAULT_MAX_DROP_PERCENT, ge=0, le=100)
    confidence: float = Field(0.95, gt=0.5, lt=1)


class Benchmark(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str
    parser: str
    metric: str | None = None
    runs: int = Field(MIN_GATE_RUNS, ge=3, le=20)
    warmup: int = Field(1, ge=0, le=5)
    timeout: float = 1800
    cwd: str | None = None
    env_before: dict[str, str] = Field(default_factory=dict)
    env_after: dict[str, str] = Field(default_factory=dict)  # e.g. the new toolkit's CUDA_HOME
    gate: Gate = Field(default_factory=Gate)

    def call(self, host: str, label: str) -> dict:
        env = self.env_before if label == "before" else self.env_after
        return {"host": host, "command": self.command, "parser": self.parser, "metric": self.metric,
                "runs": self.runs, "warmup": self.warmup, "label": label, "timeout": self.timeout,
                "env": dict(env) or None, "cwd": self.cwd, **({"compare_to": "before"} if label == "after" else {})}


class Outputs(BaseModel):
    """What the served model answers, asked on each host before its first step and after its last (check_outputs);
    the recipe's `outputs` check judges the two, and a host whose answers fail it is restored."""

    model_config = ConfigDict(extra="forbid")
    endpoint: str = Field(pattern=ENDPOINT)
    model: str | None = None
    max_tokens: int = Field(24, ge=1, le=256)
    timeout: float = Field(300, gt=0, le=3600)

    def call(self, host: str, label: str) -> dict:
        args = {"host": host, "endpoint": self.endpoint, "label": label, "max_tokens": self.max_tokens,
                "timeout": self.timeout, **({"model": self.model} if self.model else {})}
        return {**args, "compare_to": "before"} if label == "after" else args


class Drain(BaseModel):
    """Take each host out of its scheduler after its backup and before its first benchmark; put it back
    once it is upgraded or rolled back (never when its rollback failed, and never one someone else drained)."""

    model_config = ConfigDict(extra="forbid")
    scheduler: Literal["slurm", "kubernetes"]
    reason: str = Field(min_length=1, max_length=120, pattern=DRAIN_REASON)  # what drain_node accepts
    timeout: float = Field(3600, gt=0, le=86_400)  # seconds to wait for the node's jobs

    def call(self, host: str, undrain: bool = False) -> dict:
        args = {"host": host, "scheduler": self.scheduler, "reason": self.reason}
        return args if undrain else {**args, "timeout": self.timeout}

    def rules(self) -> list[Authorization]:
        pinned = {"scheduler": self.scheduler, "reason": self.reason}  # each host's own node, no other
        return [Authorization(host="*", tool="drain_node", args=pinned),
                Authorization(host="*", tool="undrain_node", args=pinned)]


class LearnedFrom(BaseModel):
    model_config = ConfigDict(extra="forbid")
    transcript: str
    host: str
    last_hash: str  # of the canary transcript's last line: the record this recipe was read from
    verdict: str


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid")
    recipe: Literal[1] = RECIPE_VERSION
    goal: str
    learned_from: LearnedFrom | None = None
    preconditions: Preconditions = Field(default_factory=Preconditions)
    # What the upgrade changed on the canary, as it showed at its end (read there, not inferred from the steps): a
    # host whose facts are these and whose checks pass is already at the target, and nothing is changed on it.
    target: Preconditions | None = None
    backup: dict[str, Any] = Field(default_factory=dict)  # pip_freeze_backup's arguments without `host`
    steps: list[Step] = Field(min_length=1)
    restore: dict[str, Any] = Field(default_factory=dict)  # restore_backup's arguments besides host and backup_id
    authorizations: list[Authorization] = Field(default_factory=list)
    checks: list[SuccessCheck] = Field(default_factory=list)
    benchmark: Benchmark | None = None
    outputs: Outputs | None = None
    drain: Drain | None = None
    budget_turns: int = Field(0, ge=0)  # 0: the steps and the fleet's own calls, with room

    @model_validator(mode="after")
    def _rules_that_can_match(self) -> "Recipe":
        # As in goal files: a rule that can never match, or that leaves open what the tool will do, is a
        # mistake said when the file loads, not a crash on the first host.
        for i, a in enumerate(self.authorizations):
            if a.members is not None:
                raise ValueError(f"authorizations[{i}]: `members` is not a key of a recipe's rule: name one host, "
                                 "or `*` for every host of the rollout")
            if a.tool is not None:
                a.args = check_tool_authorization(i, a.tool, a.args)
        judged = [i for i, check in enumerate(self.checks) if check.outputs is not None]
        for i in judged:
            c = self.checks[i].outputs
            if (c.label, c.compare_to) != ("after", "before"):
                raise ValueError(f"checks[{i}]: a recipe's `outputs` check compares label 'after' with 'before' (the "
                                 f"labels each host's answers are kept under), not {c.label!r} with {c.compare_to!r}")
            if self.outputs is None:
                raise ValueError(f"checks[{i}]: an `outputs` check needs the recipe's `outputs:` (the serving "
                                 "endpoint each host is asked at before and after, e.g. {endpoint: "
                                 "'http://127.0.0.1:30000'})")
        if self.outputs is not None and not judged:
            raise ValueError("outputs: the served model is asked before and after, and no check judges its answers: "
                             "add `- outputs: {same: true}` (or max_accuracy_drop) to checks, or leave outputs out")
        return self

    def rules_for(self, host: str) -> list[Authorization]:
        """The authorizations on `host`: those for every host, and those that name it."""
        return [a for a in self.authorizations if a.covers_host(host)]

    def turns(self) -> int:
        return self.budget_turns or len(self.steps) + 8


# --------------------------------------------------------------------------- from a transcript


def recipe_from_transcript(path: Path, host: str | None = None) -> Recipe:
    from agent.record.transcript import verify  # lazy: per command

    check = verify(path)
    if not check.ok:
        raise RecipeError(f"{path}: the record is not intact ({check.problems[0]}); a recipe is read only from a "
                          "record that verifies")
    parts = _session_parts(path)
    events = [e for _, evs in parts for e in evs]
    start = parts[0][1][0]
    hosts = list(start.get("hosts") or [])
    if host is None:
        if len(hosts) != 1:
            raise RecipeError(f"{path}: the session ran on {len(hosts)} hosts ({', '.join(hosts)}); name the canary "
                              "with --host")
        host = hosts[0]
    elif host not in hosts:
        raise RecipeError(f"{path}: host {host!r} is not in the session (its hosts: {', '.join(hosts)})")
    result = next((e for e in reversed(events) if e["type"] == "goal_result"), None)
    if result is None or result.get("verdict") != "met":
        said = f"its verdict was {result.get('verdict')!r} ({result.get('reason')})" if result else "it has no verdict"
        raise RecipeError(f"{path}: the canary session did not meet its goal ({said}): there is nothing proven to "
                          "roll out")

    # A resumed canary is one session of several parts: a step is keyed (part, turn, index), so the turns of
    # different parts, each numbered from 1, never collide, and sort in the order they ran.
    calls, decisions, results, rules_of = {}, {}, {}, {}
    for number, evs in parts:
        for e in evs:
            key = (number, e.get("turn"), e.get("index"))
            {"tool_call": calls, "decision": decisions, "tool_result": results}.get(e["type"], {})[key] = e
        part_start = evs[0] if evs and evs[0].get("type") == "session_start" else {}
        rules_of[number] = [Authorization.model_validate(a)
                            for a in (part_start.get("policy") or {}).get("authorizations", [])]

    def on_host(key) -> bool:
        return (calls[key].get("arguments") or {}).get("host") == host

    ran = [key for key in sorted(calls) if key in results and results[key].get("ok") and on_host(key)]
    restored = [k for k in ran if calls[k]["tool"] == "restore_backup"]
    if restored:
        raise RecipeError(f"{path}: the canary was rolled back (restore_backup in {_where(restored[-1])}): what it "
                          "ended with is not what its steps made, so no recipe is read from it")
    inspections = [results[k]["data"] for k in ran if calls[k]["tool"] == "inspect_host"
                   and isinstance(results[k].get("data"), dict)]
    if not inspections:
        raise RecipeError(f"{path}: the canary was never inspected (no inspect_host of {host}): its starting facts, "
                          "the preconditions of a recipe, are unknown")
    backups = [k for k in ran if calls[k]["tool"] == "pip_freeze_backup"]
    broken = _install_left_requirements_unmet(calls, results, [k for k in sorted(calls) if k in results and on_host(k)])
    if broken:
        raise RecipeError(f"{path}: {broken}")
    steps, used_rules, first_step, drain = [], [], None, None
    for key in ran:
        d = decisions.get(key) or {}
        tool = calls[key]["tool"]
        if tool == "drain_node" and drain is None:
            a = calls[key].get("arguments") or {}
            drain = Drain(scheduler=a["scheduler"], reason=a["reason"], timeout=a.get("timeout") or 3600)
        if tool in NOT_STEPS or d.get("risk") == "read-only" or d.get("verdict") != "allow":
            continue
        args = {k: v for k, v in (calls[key].get("arguments") or {}).items() if k != "host"}
        steps.append(Step(tool=tool, args=args))
        first_step = first_step or key
        rule = _rule_for(d, rules_of[key[0]], tool, args)
        if rule is not None and rule not in used_rules:
            used_rules.append(rule)
    if not steps:
        raise RecipeError(f"{path}: no change ran on {host}: there is nothing to roll out")
    before = [k for k in ran if k < first_step and calls[k]["tool"] == "inspect_host"]
    if not before:
        raise RecipeError(f"{path}: {host} was not inspected before its first change: its starting facts are unknown")
    backup_args = {k: v for k, v in (calls[backups[0]].get("arguments") or {}).items() if k != "host"} \
        if backups else {}
    restore = {"system": any(s.tool == "install_runfile" for s in steps)}
    if backup_args.get("index_url"):
        restore["index_url"] = backup_args["index_url"]
    # The rollback: restore_backup is destructive (it uninstalls), so its rule says so. The gate still lets it
    # restore only a backup of this session's ledger, of the host it runs on.
    used_rules.append(Authorization(host="*", tool="restore_backup", destructive=True,
                                    args={"backup_id": "*", "system": restore["system"]}))
    if drain is not None:
        used_rules += drain.rules()
    checks, min_ratio = [], None
    judged = [evs for _, evs in parts if any(e["type"] == "check" for e in evs)]
    for e in judged[-1] if judged else []:  # the checks of the part that judged the session's end
        if e["type"] == "check" and e.get("ok"):
            spec = {k: v for k, v in (e.get("spec") or {}).items() if k != "host"}
            if e["kind"] == "throughput":
                min_ratio = spec.get("min_ratio")
            else:
                checks.append(SuccessCheck.model_validate({e["kind"]: spec}))
    outputs, checks = _outputs(calls, results, ran, checks)
    first = results[before[0]]["data"]
    ended = [e for e in (judged[-1] if judged else []) if e["type"] == "final_state" and e.get("host") == host
             and isinstance(e.get("inspect"), dict)]
    return Recipe(
        goal=start.get("goal") or "",
        learned_from=LearnedFrom(transcript=str(path.absolute()), host=host, last_hash=_last_hash(path),
                                 verdict=result["verdict"]),
        preconditions=Preconditions(**facts_of(first)),
        target=_what_changed(facts_of(first), facts_of(ended[-1]["inspect"])) if ended else None,
        backup=backup_args, steps=steps, restore=restore, authorizations=used_rules, checks=checks,
        benchmark=_benchmark(calls, results, ran, min_ratio), outputs=outputs, drain=drain,
    )


def _what_changed(before: dict, after: dict) -> Preconditions | None:
    """The facts the upgrade changed on the canary, as it showed them at its end (the toolkits, torch): what a host
    must show to be at the target. The ones it did not change (the GPU, the driver) are the preconditions'."""
    changed = {k: v for k, v in after.items() if v is not None and v != before.get(k)}
    return Preconditions(**changed) if changed else None


def recipe_edits(recipe: Recipe) -> list[str]:
    """How the recipe differs from what its canary's record says (each a line for the operator: an edit may be
    meant, and still it is said before any host is touched); empty for a recipe as it was learned, or one written
    by hand."""
    learned = recipe.learned_from
    if learned is None:
        return []
    path = Path(learned.transcript)
    if not path.is_file():
        return [f"the canary's record {path} is not here: the recipe cannot be checked against it"]
    if _last_hash(path) != learned.last_hash:
        return [f"the canary's record {path} is not the one the recipe was read from (its last line differs)"]
    try:
        fresh = recipe_from_transcript(path, host=learned.host)
    except RecipeError as e:
        return [f"the canary's record no longer gives a recipe: {e}"]
    out = []
    for name in ("preconditions", "target"):
        mine, theirs = getattr(recipe, name), getattr(fresh, name)
        if theirs is None or mine is None:
            if (mine is None) != (theirs is None):
                out.append(f"{name}: {'removed from' if mine is None else 'added to'} what the canary's record gives")
            continue
        for key, value in mine.model_dump().items():
            was = getattr(theirs, key)
            if value != was:
                out.append(f"{name}.{key} is {value!r} in the recipe, {was!r} in the canary's record")
    for name in ("steps", "backup", "restore", "checks", "authorizations", "benchmark", "outputs", "drain"):
        if _plain(getattr(recipe, name)) != _plain(getattr(fresh, name)):
            out.append(f"{name}: edited since it was read from the canary's record")
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _install_left_requirements_unmet(calls: dict, results: dict, keys: list) -> str | None:
    """Why no recipe copies the canary's installs, or None: an install that left declared requirements unmet
    (allowed by allow_broken_requirements, or a no_deps install of a record older than that check) would give
    every host the same broken environment; one that failed for them changed the canary although no recipe
    step would repeat it."""
    for key in keys:
        if calls[key]["tool"] != "pip_install":
            continue
        result, args = results[key], calls[key].get("arguments") or {}
        data = result.get("data") if isinstance(result.get("data"), dict) else {}
        unmet = data.get("unmet_requirements") if "unmet_requirements" in data else \
            (data.get("dependency_warnings") or []) if args.get("no_deps") else []
        if result.get("ok") and unmet:
            return (f"{_where(key)}'s pip_install{' with no_deps' if args.get('no_deps') else ''} left requirements "
                    f"unmet on the canary ({' '.join(unmet)}): a recipe would copy that broken environment to every "
                    "host; install the named requirements in the same step (or drop no_deps) and run the canary again")
        if not result.get("ok") and str(result.get("error") or "").startswith(UNMET):
            return (f"{_where(key)}'s pip_install changed the canary and then failed ({UNMET}), and a recipe copies "
                    "only the steps that succeeded, so it would miss that install: run the canary again with one "
                    "install that names every requirement")
    return None


def _session_parts(path: Path) -> list[tuple[int, list[dict]]]:
    """The parts of the canary's session, oldest first, each with its events: a resumed transcript links to
    the part it resumes, and a link that does not hold (an earlier part changed or gone) gives no recipe."""
    from agent.record.transcript import read_part  # lazy: per command
    from agent.report.build import session_chain  # lazy: per command

    chain, problem = session_chain(path)
    if problem is not None:
        raise RecipeError(f"{path}: it resumes an earlier part, and {problem}; a recipe is read only from a whole "
                          "record that verifies")
    out = []
    for number, part in enumerate(chain, 1):
        out.append((number, read_part(part).events if part != chain[-1] else
                    [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines() if line.strip()]))
    return out if len(out) > 1 else [(0, out[0][1])]


def _where(key: tuple) -> str:
    """A step's key (part, turn, index) as the report says it: part 0 is a session of one part."""
    return (f"part {key[0]}, " if key[0] else "") + f"turn {key[1]}"


def _rule_for(decision: dict, rules: list[Authorization], tool: str, args: dict) -> Authorization | None:
    by = decision.get("approved_by") or ""
    if by.startswith("goal:authorizations["):
        i = int(by[len("goal:authorizations["):].rstrip("]"))
        if 0 <= i < len(rules):
            return rules[i].model_copy(update={"host": "*"})
    # An operator's yes (a chat): a rule for exactly this call.
    return Authorization(host="*", tool=tool, args=args)


def _benchmark(calls: dict, results: dict, ran: list, min_ratio: float | None) -> Benchmark | None:
    benches = [(k, calls[k]["arguments"]) for k in ran if calls[k]["tool"] == "run_bench"]
    after = next(((k, a) for k, a in reversed(benches) if a.get("compare_to")), None)
    if after is None:
        return None
    before = next((a for k, a in benches if a.get("label") == after[1]["compare_to"] and k < after[0]), None)
    if before is None or before.get("command") != after[1].get("command"):
        return None
    asked = 0.0 if min_ratio is None else round((1 - float(min_ratio)) * 100, 2)  # the canary's goal: a ratio
    drop = max(DEFAULT_MAX_DROP_PERCENT, asked)
    a = after[1]
    return Benchmark(command=a["command"], parser=a["parser"], metric=a.get("metric"),
                     runs=max(MIN_GATE_RUNS, int(a.get("runs") or 3)), warmup=int(a.get("warmup") or 1),
                     timeout=float(a.get("timeout") or 1800), cwd=a.get("cwd"),
                     env_before=dict(before.get("env") or {}), env_after=dict(a.get("env") or {}),
                     gate=Gate(max_drop_percent=drop))


def _outputs(calls: dict, results: dict, ran: list,
             checks: list[SuccessCheck]) -> tuple[Outputs | None, list[SuccessCheck]]:
    """The endpoint the canary asked check_outputs of before and after, and the checks with the outputs check a
    recipe keeps: the canary's own, under the labels each host uses; or, where its goal had none, one that asks
    each host to answer as the canary did (the same outputs where its were, else no lower a score)."""
    asked = [(k, calls[k]["arguments"]) for k in ran if calls[k]["tool"] == "check_outputs"]
    judged = [c.outputs for c in checks if c.outputs is not None]
    rest = [c for c in checks if c.outputs is None]
    later = next((a for _, a in reversed(asked) if a.get("compare_to")), None)
    names = (judged[-1].label, judged[-1].compare_to) if judged else \
        (later["label"], later["compare_to"]) if later else None
    after = next(((k, a) for k, a in reversed(asked) if names and a.get("label") == names[0]), None)
    before = next((a for k, a in asked if names and after and a.get("label") == names[1] and k < after[0]), None)
    if after is None or before is None or before.get("endpoint") != after[1].get("endpoint"):
        return None, rest + [SuccessCheck(outputs=c) for c in judged]  # the recipe's load says what is missing
    a = after[1]
    probe = Outputs(endpoint=a["endpoint"], model=a.get("model"), max_tokens=a.get("max_tokens") or 24,
                    timeout=a.get("timeout") or 300)
    if judged:
        kept = [c.model_copy(update={"label": "after", "compare_to": "before"}) for c in judged]
    else:
        same = (((results[after[0]].get("data") or {}).get("comparison") or {}).get("same_outputs"))
        kept = [OutputsCheck(same=True) if same else OutputsCheck(max_accuracy_drop=0.0)]
    return probe, rest + [SuccessCheck(outputs=c) for c in kept]


def _last_hash(path: Path) -> str:
    import hashlib

    last = path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return hashlib.sha256(last).hexdigest()


# --------------------------------------------------------------------------- files


def dump_recipe(recipe: Recipe) -> str:
    """The recipe as YAML, with a header that says what it is and how to use it."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False
    out = io.StringIO()
    yaml.dump(json.loads(recipe.model_dump_json(exclude_none=True)), out)
    learned = recipe.learned_from
    head = ["# A recipe for `agent fleet RECIPE.yaml --inventory INV`: read it before you roll it out.",
            f"# Learned from {learned.transcript} (host {learned.host}, verdict {learned.verdict})." if learned else
            "# Written by hand.",
            "# Each host: preflight (its facts must match `preconditions`), a verified backup, the benchmark and",
            "# the served model's answers (`outputs`) before, the steps (the gate allows each only by",
            "# `authorizations`), the benchmark and the answers after, the checks and the benchmark's gate; a host",
            "# whose step, check or gate fails is restored from its backup. A host whose facts",
            "# are `target` (what the canary showed at its end) and whose checks pass is already at the target."]
    return "\n".join(head) + "\n" + out.getvalue()


def load_recipe(path: Path) -> Recipe:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        text = read_text_file(path, MAX_RECIPE_BYTES, "recipe")
    except InputFileError as e:
        raise RecipeError(str(e)) from None
    try:
        data = YAML(typ="safe", pure=True).load(text)
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise RecipeError(f"{path}{f':{mark.line + 1}' if mark else ''}: not valid YAML: "
                          f"{getattr(e, 'problem', e)}") from None
    except RecursionError:  # the YAML reader recurses once per level
        raise RecipeError(f"{path}: {TOO_DEEP}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping (`agent recipe TRANSCRIPT -o {path.name}` writes one)")
    try:  # as goal files: a few lines of aliases can expand into billions of values
        data = plain_values(data, [MAX_RECIPE_VALUES])
    except TooManyValues:
        raise RecipeError(f"{path}: the file expands to more than {MAX_RECIPE_VALUES:,} values (YAML aliases `*name` "
                          "that repeat anchors): write the values out, or use fewer aliases") from None
    hidden = _binary_value(data)
    if hidden is not None:
        raise RecipeError(f"{path}: {hidden} is a !!binary value: a recipe is reviewed as text, so write it as text")
    try:
        return Recipe.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        said = first["msg"].removeprefix("Value error, ")
        raise RecipeError(f"{path}: {where + ': ' if where else ''}{said}") from None


def _binary_value(node, where: str = "") -> str | None:
    """Where the YAML holds bytes (a !!binary value, base64 that a reviewer cannot read), or None."""
    if isinstance(node, bytes):
        return where or "the recipe"
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        found = _binary_value(value, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None
