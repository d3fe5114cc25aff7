"""Goal files: what a scripted run is for, on which hosts, and what it may change.

    goal: Upgrade the CUDA toolkit to 13.0 beside 12.8 and move torch to cu130 wheels.
    hosts:
      - gpu1                          # an ssh target or ~/.ssh/config alias
      - {name: box2, target: root@127.0.0.1:2222, python: /opt/venv/bin/python}
      - {name: sim, transport: sim}   # the built-in simulated GPU host
    model: gpt-4.1                    # optional; also --model / OPENAI_BASE_URL
    groups:                           # optional: names for sets of hosts, as an inventory's groups
      train: [gpu1, box2]             # members are hosts, or other groups (children)
    authorizations:                   # what may change without asking (see agent/safety/authorizations.py)
      - {host: gpu1, tool: install_runfile, args: {version: "13.0", toolkit_only: true}}
      - {host: gpu1, tool: pip_install, args: {index_url: "https://download.pytorch.org/whl/cu130",
                                               packages: ["torch==2.10.0+cu130"]}}
      - {host: gpu1, command: "systemctl restart sglang"}   # one exact command
      - {host: train, tool: run_bench, args: {}}            # a group: each of its hosts, and only those
    budget: {turns: 40, tokens: 400000, minutes: 30}
    success:                          # checks the tools can verify at the end
      - {toolkit: {host: gpu1, path: /usr/local/cuda-13.0, version: "13.0"}}
      - {throughput: {label: after, compare_to: before, min_ratio: 1.0}}

Errors name the file, the line and the key.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from agent.budget import Budget
from agent.input_files import InputFileError, read_text_file
from agent.safety.policy import Authorization
from tools import TOOLS, default_tools


class GoalError(ValueError):
    """A goal file that cannot be used; the message names file, line and key."""


class SimSlurm(BaseModel):
    """The simulated host as a Slurm node: someone else's drain (its reason), and its running jobs."""

    model_config = ConfigDict(extra="forbid")
    drained_by: str | None = Field(default=None, max_length=200)  # the reason of a drain someone else made
    jobs: list[float] = Field(default_factory=list, max_length=64)  # seconds each still runs once drained


class SimKubernetes(BaseModel):
    """The simulated host as a Kubernetes node: cordoned by someone else or not, and its pods."""

    model_config = ConfigDict(extra="forbid")
    cordoned_by: str | None = Field(default=None, max_length=200)
    pods: list[float] = Field(default_factory=list, max_length=64)  # seconds each takes to leave once drained


class SimMachine(BaseModel):
    """The simulated GPU host a `transport: sim` entry asks for (every field has the seed's value by default):

        sim: {gpu_model: "H100 80GB HBM3", driver: "550.144.03", gpus: 4, toolkits: ["12.8"],
              free_space_mb: {/tmp: 500}, pypi_reachable: false, bench_noise: 0.25}

    gpu_model: one of the sim's models (RTX PRO 6000 Blackwell, H100 80GB HBM3, H200, A100-SXM4-80GB,
    L40S; nvidia-smi's name works too). A driver older than the model's first supporting branch is
    refused, as no such machine exists.
    """

    model_config = ConfigDict(extra="forbid")

    gpu_model: str = "RTX PRO 6000 Blackwell"
    driver: str = Field(default="590.48.01", pattern=r"^\d+\.\d+(\.\d+)?$")  # the loaded driver's version
    gpus: int = Field(default=8, ge=1, le=16)
    toolkits: list[Literal["12.8", "13.0", "13.1"]] = Field(default_factory=lambda: ["12.8"])  # first: the cuda link
    free_space_mb: dict[str, int] = Field(default_factory=dict)  # free space per mount point ("/tmp": 500)
    gcc: str | None = "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) "  # null: no compiler on the host
    # false: the host has no route to PyPI, as an air-gapped GPU machine (its pip configuration names an index it
    # cannot reach); the sim's mirror under /srv/pypi is still there for tools that name it.
    pypi_reachable: bool = True
    bench_noise: float = Field(default=0.25, ge=0)  # run-to-run noise of its benchmarks, standard deviation in tok/s
    numerics: Literal["stable", "drift"] = "stable"  # drift: the served model's answers change on the CUDA 13 build
    slurm: SimSlurm | None = None  # a node of a Slurm cluster (scontrol, squeue on its PATH)
    kubernetes: SimKubernetes | None = None  # a node of a Kubernetes cluster (kubectl on its PATH)

    @field_validator("gpu_model")
    @classmethod
    def _known_gpu_model(cls, asked: str) -> str:
        from tools.sim import gpu_model_key  # lazy: only a goal with a `sim:` section loads the sim's GPU table

        return gpu_model_key(asked)

    @field_validator("gcc")
    @classmethod
    def _names_a_compiler_version(cls, gcc: str | None) -> str | None:
        from tools.sim import check_gcc  # lazy: as above

        check_gcc(gcc)
        return gcc

    @model_validator(mode="after")
    def _driver_supports_the_gpu(self) -> "SimMachine":
        from tools.sim import check_driver_supports  # lazy: as above

        check_driver_supports(self.gpu_model, self.driver)
        return self

    def build_options(self) -> dict:
        return {"gpu_model": self.gpu_model, "driver_version": self.driver, "gpus": self.gpus,
                "toolkits": tuple(self.toolkits), "free_space_mb": dict(self.free_space_mb) or None, "gcc": self.gcc,
                "pypi_reachable": self.pypi_reachable, "bench_noise": self.bench_noise}


HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@-]{0,252}")  # what a host's name may be, in a goal file or an inventory


def host_name_problem(name: str) -> str | None:
    """Why `name` cannot name a host, or None. The name is a rule's `host:`, a word on every screen and an SSH
    target: `*` would be every host in a rule, a newline or an escape would print as lines of their own, a
    leading `-` would be an ssh option."""
    if name == "*":
        return ("a host cannot be named `*`: in a rule's `host:` that means every host; give it another name and its "
                "address as `target:`")
    if not HOST_NAME.fullmatch(name) or ".." in name:
        return (f"{name!r} is not a host name: a host name is letters, digits and ._:@- (not starting with - or .); "
                "give an address that needs more as `target:`")
    return None


class HostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    transport: Literal["ssh", "local", "sim"] = "ssh"
    sim: SimMachine | None = None  # transport sim: the machine to simulate
    target: str | None = None
    path_prefix: list[str] = Field(default_factory=list)
    python: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    trust_host_key: str | None = None
    identity_file: str | None = None  # ssh: a private key to offer first (an inventory's ansible_ssh_private_key_file)
    max_sessions: int = Field(default=8, ge=1, le=64)
    # "off": the reads the gate runs without approval run on this host without the read sandbox (the
    # operator's opt-out, for a host where none can be set up); the transcript records it.
    read_sandbox: Literal["auto", "off"] = "auto"

    @field_validator("name")
    @classmethod
    def _a_plain_name(cls, v: str) -> str:
        problem = host_name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _sim_only_for_sims(self) -> "HostEntry":
        if self.sim is not None and self.transport != "sim":
            raise ValueError(f"host {self.name!r}: `sim:` describes a simulated host; it needs `transport: sim`")
        return self


def host_entry_for(name: str, trust_host_key: str | None = None) -> HostEntry:
    """A host named by a bare word (goal file or --host): `local` is this machine, `sim` a fresh
    simulated GPU host, anything else an SSH target or ~/.ssh/config alias."""
    if name in ("local", "sim"):
        return HostEntry(name=name, transport=name)
    return HostEntry(name=name, transport="ssh", target=name, trust_host_key=trust_host_key)


class ToolkitCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: str | None = None  # default: every host of the goal
    path: str
    version: str


class ThroughputCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str = "after"
    compare_to: str = "before"
    min_ratio: float = 1.0


class OutputsCheck(BaseModel):
    """What the served model answered (check_outputs) after, against before: `same: true` asks for the same
    outputs prompt for prompt; otherwise the score on its questions may drop by `max_accuracy_drop` at most."""
    model_config = ConfigDict(extra="forbid")
    label: str = "after"
    compare_to: str = "before"
    same: bool = False
    max_accuracy_drop: float = Field(default=0.0, ge=0.0, le=1.0)


class CommandCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: str | None = None
    run: str  # must be read-only: success checks never change a host
    expect_exit: int = 0
    expect_output: str | None = None  # a substring of stdout


class SuccessCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")
    toolkit: ToolkitCheck | None = None
    throughput: ThroughputCheck | None = None
    outputs: OutputsCheck | None = None
    command: CommandCheck | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "SuccessCheck":
        given = [k for k in CHECK_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a success check has exactly one of: " + ", ".join(CHECK_KINDS))
        return self


CHECK_KINDS = ("toolkit", "throughput", "outputs", "command")


GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")  # Ansible's valid group names (no `-`, `.`, `:`)
ALWAYS_DESTRUCTIVE = ("restore_backup",)  # tools whose every step is destructive: a rule must say so to match
EVERY_HOST = "all"  # as in Ansible: the group of every host, which a goal file does not define


class Goal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    goal: str = Field(min_length=1)
    hosts: list[HostEntry] = Field(min_length=1)
    groups: dict[str, list[str]] = Field(default_factory=dict, max_length=256)
    model: str | None = None
    base_url: str | None = None
    authorizations: list[Authorization] = Field(default_factory=list)
    budget: Budget = Field(default_factory=Budget)
    success: list[SuccessCheck] = Field(default_factory=list)
    _groups: dict[str, list[str]] = PrivateAttr(default_factory=dict)  # each group's hosts, resolved once at load

    def baselines(self) -> list[str]:
        """The labels the goal's throughput checks compare with ("before"), and its outputs checks' (kept apart
        as "outputs:before"): each host measures them before its first change, and never after it (the gate's
        rule "no-baseline")."""
        return sorted({c.throughput.compare_to for c in self.success if c.throughput is not None}
                      | {"outputs:" + c.outputs.compare_to for c in self.success if c.outputs is not None})

    @field_validator("hosts", mode="before")
    @classmethod
    def _names_to_entries(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [host_entry_for(h).model_dump() if isinstance(h, str) else h for h in v]
        return v

    @field_validator("authorizations", mode="before")
    @classmethod
    def _members_come_from_groups(cls, v: Any) -> Any:
        for i, rule in enumerate(v if isinstance(v, list) else []):
            if isinstance(rule, dict) and "members" in rule:
                raise ValueError(f"authorizations[{i}]: `members` is not a key of a goal file's rule: put the hosts "
                                 "in a group under `groups:` and name the group in `host:`")
        return v

    @model_validator(mode="after")
    def _known_hosts_only(self) -> "Goal":
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError(f"host names must be unique, got {names}")
        groups = self._groups = resolve_groups(self.groups, names)
        known = f"hosts {names}" + (f" or groups {sorted(self.groups)}" if self.groups else "")
        for i, a in enumerate(self.authorizations):
            if a.host in groups:
                a.members = groups[a.host]
            elif a.host != "*" and a.host not in names:
                raise ValueError(f"authorizations[{i}] names host {a.host!r}, which is not in {known}")
            if a.tool is not None:
                a.args = check_tool_authorization(i, a.tool, a.args)
                if a.tool in ALWAYS_DESTRUCTIVE and not a.destructive:
                    raise ValueError(f"authorizations[{i}] ({a.tool}) would never match: every {a.tool} step is "
                                     "destructive; add `destructive: true` to the rule if that is what you mean")
        for i, c in enumerate(self.success):
            spec = c.toolkit or c.command
            if spec is not None and spec.host is not None and spec.host not in names and spec.host not in groups:
                raise ValueError(f"success[{i}] names host {spec.host!r}, which is not in {known}")
        return self

    def host_names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def hosts_of(self, name: str | None) -> list[str]:
        """The hosts a check's `host:` means: every host (left out, or `all`), a group's, or the one named."""
        if name is None:
            return self.host_names()
        return self._groups.get(name, [name])


def resolve_groups(groups: dict[str, list[str]], hosts: list[str]) -> dict[str, list[str]]:
    """Each group's hosts, through its children, in the order of `hosts:`; with `all` for every host.

    Raises ValueError (one line) for a name that is not a group name, that is a host's too (or differs
    from one only in case), an empty group, a member that is neither a host nor a group, or a cycle."""
    if EVERY_HOST in hosts:
        raise ValueError(f"hosts: a host cannot be named `{EVERY_HOST}`: that means every host (in a rule's `host:` "
                         "too); give it another name and its address as `target:`")
    folded = {h.casefold(): h for h in hosts}
    for name, members in groups.items():
        if not GROUP_NAME.fullmatch(name):
            raise ValueError(f"groups: {name!r} is not a group name (letters, digits and _, not starting with a "
                             "digit, at most 64)")
        if name == EVERY_HOST:
            raise ValueError(f"groups: `{EVERY_HOST}` is every host already: give the group another name")
        if name.casefold() in folded:
            raise ValueError(f"groups: {name!r} is also the name of host {folded[name.casefold()]!r}"
                             + (" (but for case)" if name not in hosts else "") + ": a group needs a name of its own")
        if not members:
            raise ValueError(f"groups: {name!r} has no members: list its hosts, or leave the group out")
    for name, members in groups.items():
        for m in members:
            if m not in groups and m not in hosts:
                raise ValueError(f"groups: {name!r} lists {m!r}, which is neither one of the hosts {hosts} nor a group")
    resolved: dict[str, set[str]] = {}

    def expand(name: str, path: tuple[str, ...]) -> set[str]:
        if name in path:
            raise ValueError(f"groups: {' > '.join((*path, name))} is a cycle: a group cannot contain itself")
        if name not in resolved:
            out: set[str] = set()
            for m in groups[name]:
                out |= expand(m, (*path, name)) if m in groups else {m}
            resolved[name] = out
        return resolved[name]

    for name in groups:
        expand(name, ())
    return {EVERY_HOST: list(hosts), **{g: [h for h in hosts if h in members] for g, members in resolved.items()}}


def check_tool_authorization(i: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """An authorization that can never match, or that leaves open what the tool will do, is a mistake:
    name the tool and the argument. Returns the rule's values in the tool's canonical form."""
    if tool not in TOOLS:
        raise ValueError(f"authorizations[{i}].tool {tool!r} is not a tool; tools: {', '.join(TOOLS)}")
    cls = type(default_tools([tool])[0])
    fields = cls.Args.model_fields
    for key, value in args.items():
        if key not in fields:
            raise ValueError(f"authorizations[{i}].args.{key} is not an argument of {tool}; "
                             f"its arguments: {', '.join(fields)}")
        if not cls.pinned:  # ssh_exec, web_search: nothing a rule could name changes what they do
            shell = (" A shell command is authorized by a rule with its exact text: {host: HOST, command: \"...\"}"
                     if tool == "ssh_exec" else "")
            raise ValueError(f"authorizations[{i}].args.{key}: a rule for {tool} names no arguments.{shell}")
        if key not in cls.pinned:
            raise ValueError(f"authorizations[{i}].args.{key}: an authorization does not decide {key} (it does not "
                             f"change what {tool} does); the arguments it decides: {', '.join(cls.pinned)}")
        if _wants_text(fields[key].annotation):
            items = value if isinstance(value, list) else [value]
            wrong = next((x for x in items if x is not None and not isinstance(x, str)), None)
            if wrong is not None:
                # A list of alternatives is shown whole, as it should read.
                fixed = "[" + ", ".join(f'"{as_written(x)}"' for x in items) + "]" if isinstance(value, list) else None
                raise ValueError(f"authorizations[{i}].args.{key} must be a string: {quote_hint(key, wrong, fixed)}")
    if tool == "restore_backup":
        _check_backup_ids(i, args.get("backup_id"))
    missing = [k for k in cls.pinned if fields[k].is_required() and k not in args]
    if missing:
        raise ValueError(f"authorizations[{i}] ({tool}) must name {', '.join(missing)}: a rule that leaves "
                         f"{'it' if len(missing) == 1 else 'them'} open would allow any value")
    return {k: [cls.canonical(k, x) for x in v] if isinstance(v, list) and not _list_arg(fields[k]) else
            cls.canonical(k, v) for k, v in args.items()}


# The ids pip_freeze_backup gives: the host's name as letters, digits and -, then the time (UTC) and 4 hex digits.
BACKUP_ID = re.compile(r"[A-Za-z0-9-]+-\d{8}-\d{6}-[0-9a-f]{4}")


def _check_backup_ids(i: int, value: Any) -> None:
    """A literal backup_id that no backup can have makes a rule that never matches: say so at load."""
    for v in value if isinstance(value, list) else [value]:
        if isinstance(v, str) and "*" not in v and not BACKUP_ID.fullmatch(v):
            raise ValueError(f"authorizations[{i}].args.backup_id {v!r} is not an id pip_freeze_backup gives "
                             "(HOST-YYYYMMDD-HHMMSS-xxxx, as gpu1-20261205-181200-3fa2), so the rule would never match: "
                             "give the id, or a pattern such as \"gpu1-*\"")


def _list_arg(field: Any) -> bool:
    return "list" in str(field.annotation)


def _wants_text(annotation: Any) -> bool:
    """str, str | None, list[str] or list[str] | None: an argument whose values are strings."""
    kinds = (annotation, *typing.get_args(annotation))
    return any(k is str or (typing.get_origin(k) is list and typing.get_args(k) == (str,)) for k in kinds)


def as_written(value: Any) -> str:
    """A YAML value as the file spelled it: an unquoted 13.10 is the number 13.1, but ruamel keeps its
    width, so the hint can show what the operator wrote."""
    if isinstance(value, float) and hasattr(value, "_width"):
        from ruamel.yaml.representer import RoundTripRepresenter  # lazy: only a goal file's numbers have it

        try:
            return str(RoundTripRepresenter().represent_scalar_float(value).value)
        except Exception:  # noqa: BLE001 - the plain spelling below is a fine hint too
            pass
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def quote_hint(key: str, value: Any, fixed: str | None = None) -> str:
    """What to write instead of a number (or true/false) where text belongs: `version: 13.0` is a float,
    and `13.10` even becomes 13.1. `fixed`: the value as it should be written, if not `value` quoted."""
    written = as_written(value)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    read = (f"YAML reads the unquoted {written} as the number {value}" if number and str(value) != written
            else f"YAML reads the unquoted {written} as a {'number' if number else 'boolean'}")
    quoted = fixed or f'"{written}"'
    return f"{read}; write it in quotes: {key}: {quoted}"


# pydantic's errors for a value that should have been text, and YAML gave a number or a boolean.
_TEXT_ERRORS = {"string_type", "literal_error", "string_pattern_mismatch", "enum"}


# A goal file is a page of YAML; the largest shipped is under 3 kB. The limits keep a wrong file
# (a log, a dataset) or an alias bomb from hanging the command before it says anything: the YAML
# parser takes about 1 s per 250 kB, and aliases can expand a few lines into billions of values.
MAX_GOAL_BYTES = 64 * 1024
MAX_GOAL_VALUES = 20_000


def load_goal(path: Path) -> Goal:
    """Parse and validate a goal file, with errors that name file, line and key."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError

    try:
        text = read_text_file(path, MAX_GOAL_BYTES, "goal file")
    except InputFileError as e:
        raise GoalError(str(e)) from None
    yaml = YAML(typ="rt")
    try:
        data = yaml.load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise GoalError(f"{path}{line}: not valid YAML: {e.problem}") from None
    except RecursionError:  # the YAML reader recurses once per level: [[[[...]]]] thousands deep
        raise GoalError(f"{path}: {TOO_DEEP}") from None
    if not isinstance(data, dict):
        raise GoalError(f"{path}:1: a goal file is a mapping with at least `goal:` and `hosts:`")
    try:
        plain = plain_values(data, [MAX_GOAL_VALUES])
    except TooManyValues:
        raise GoalError(f"{path}: the file expands to more than {MAX_GOAL_VALUES:,} values (YAML aliases `*name` "
                        "that repeat anchors): write the values out, or use fewer aliases") from None
    try:
        return Goal.model_validate(plain)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
            msg = err["msg"].removeprefix("Value error, ")
            named = re.match(r"(authorizations|success)\[(\d+)\]", msg)
            if not loc and named:  # a check across keys names the entry it is about
                loc = [named.group(1), int(named.group(2))]
                msg = msg[named.end():].lstrip(".: ") or msg
            elif not loc and msg.startswith(("groups: ", "hosts: ")):
                where, _, msg = msg.partition(": ")
                loc = [where]
            key = _dotted(loc) or "(top level)"
            line = _line_of(data, loc)
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            elif err["type"] == "missing":
                msg = "required key is missing"
            elif err["type"] in _TEXT_ERRORS and isinstance(err.get("input"), (int, float)):
                name = next((p for p in reversed(loc) if isinstance(p, str)), key)
                value = err["input"]
                in_list = bool(loc) and isinstance(loc[-1], int)  # one item: `toolkits: ["13.0"]`
                fixed = '["' + as_written(value) + '"]' if in_list else None
                msg = f"{msg}; {quote_hint(name, value, fixed)}"
            problems.append(f"{path}:{line}: {key}: {msg}")
        raise GoalError("\n".join(problems)) from None


class TooManyValues(Exception):
    """The YAML expands past its budget of values (aliases that repeat anchors), or nests past 100 levels."""


TOO_DEEP = "lists or mappings nested too deep to read (thousands of levels): write the values out flat"


def plain_values(node: Any, left: list[int], depth: int = 0) -> Any:
    """The YAML as plain dicts and lists, aliases expanded, within a budget of values (and of depth:
    an alias to its own ancestor is a loop)."""
    left[0] -= 1
    if left[0] < 0 or depth > 100:
        raise TooManyValues
    if isinstance(node, dict):
        return {str(k): plain_values(v, left, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [plain_values(v, left, depth + 1) for v in node]
    return node


def _dotted(loc: list) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _line_of(data: Any, loc: list) -> int:
    """Best line for a location: the deepest key or item that exists in the YAML."""
    line = 1
    node = data
    for p in loc:
        lc = getattr(node, "lc", None)
        try:
            if isinstance(node, dict) and p in node:
                if lc is not None:
                    line = lc.key(p)[0] + 1
                node = node[p]
            elif isinstance(node, list) and isinstance(p, int) and p < len(node):
                if lc is not None:
                    line = lc.item(p)[0] + 1
                node = node[p]
            else:
                break
        except (KeyError, TypeError, IndexError):
            break
    return line
