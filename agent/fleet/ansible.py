"""`agent recipe RECIPE.yaml --ansible`: a recipe as an Ansible playbook, for teams whose engine is Ansible.

The playbook does per host what `agent fleet` does, in the same order: the preflight (a host whose facts
differ from the preconditions is held: `meta: end_host`, nothing changed), a verified backup, the drain,
the benchmark before, the steps, the checks, the benchmark after and its gate, and on any failure the
restore from the backup (a `rescue:`), then the undrain of a node this play drained. The canary and the
batches are `serial`, the failure limit `max_fail_percentage`. The authorization each step needs is a
comment above it.

What runs on the hosts is agent/fleet/playbook_helper.py, carried in the playbook with the benchmark's
parsers and the gate's statistics, started from argument lists only. Every value that comes from the
recipe is written `!unsafe` (Ansible never templates it) as JSON inside a double-quoted scalar (no
newline, quote or `#` of a value can end it), and in comments only as JSON with every non-ASCII
character escaped: a recipe cannot add a task, a keyword or a template to the playbook.

A recipe is exported only if `agent fleet` would run it: each step's arguments are what its tool accepts,
each change is covered by one of the recipe's authorizations for every host, the success checks are
read-only, and nothing is forbidden.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.fleet.recipe import Recipe, RecipeError
from agent.safety.authorizations import Authorization
from agent.text import clip

STEP_TOOLS = ("install_runfile", "pip_install", "ssh_exec")  # the steps a playbook can take
HELPER = Path(__file__).with_name("playbook_helper.py")
_TOOLS = Path(__file__).parents[2] / "tools"
CARRIED = (_TOOLS / "bench_parsers.py", _TOOLS / "system_state.py", _TOOLS / "toolkit_sizes.py",
           _TOOLS / "restore_plan.py", _TOOLS / "outputs_probe.py", Path(__file__).with_name("stats.py"))
# The upgrade_agent_sim connection: `ANSIBLE_CONNECTION_PLUGINS=<this>` runs a playbook on simulated hosts.
CONNECTION_PLUGINS = Path(__file__).with_name("ansible_plugins") / "connection"
PLACEHOLDER_HOST = "each-host"  # the host a step's arguments are checked for: any host of the inventory


class ExportError(RecipeError):
    """A recipe that `agent fleet` would not run, so no playbook is written for it."""


# --------------------------------------------------------------------------- the YAML we write


class Unsafe(str):
    """A value from the recipe: `!unsafe "..."`, never templated, never able to end its scalar."""


class Jinja(str):
    """A template of our own writing (a registered result, the host's interpreter)."""


class Literal(str):
    """A block of our own text (the helper script): `!unsafe |`."""


@dataclass
class Task:
    body: dict
    comments: list[str] = field(default_factory=list)


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar of pure ASCII: every character outside printable ASCII, and the quote and
    backslash, escaped; YAML 1.1 and 1.2 loaders read it back identically."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def comment_text(value: Any) -> str:
    """A value as it may stand in a comment: JSON, all ASCII (a newline is `\\n`, U+2028 is `\\u2028`)."""
    return json.dumps(value, ensure_ascii=True, sort_keys=False)


def _scalar(value: Any) -> str:
    if isinstance(value, Unsafe):
        return "!unsafe " + _quoted(value)
    if isinstance(value, Jinja):
        return _quoted(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, str):  # our own words: quoted unless a plain name; a template is Jinja's, marked so
        if re.search(r"\{[{%#]", value):
            raise ValueError(f"a string of ours that Ansible would template: {value!r}")
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_./]*", value) and value not in ("true", "false", "null", "yes", "no"):
            return value
        return _quoted(value)
    raise TypeError(f"cannot write {type(value).__name__} into the playbook")


def _emit(value: Any, indent: int, lines: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, dict):
        for key, v in value.items():
            if not re.fullmatch(r"[a-z_][a-z0-9_.]*", key):
                raise ValueError(f"a key of ours must be a simple name, not {key!r}")
            if isinstance(v, Literal):
                lines.append(f"{pad}{key}: !unsafe |")
                lines.extend(f"{pad}  {ln}" if ln else "" for ln in v.splitlines())
            elif isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{key}:")
                _emit(v, indent + 2, lines)
            elif isinstance(v, (dict, list)):
                lines.append(f"{pad}{key}: {'{}' if isinstance(v, dict) else '[]'}")
            else:
                lines.append(f"{pad}{key}: {_scalar(v)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, Task):
                lines.append("")
                lines.extend(f"{pad}# {c}" for c in item.comments)
                item = item.body
            if isinstance(item, dict) and item:
                first = len(lines)
                _emit(item, indent + 2, lines)
                lines[first] = pad + "- " + lines[first][indent + 2:]
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    else:
        lines.append(pad + _scalar(value))


def to_yaml(value: Any) -> str:
    lines: list[str] = []
    _emit(value, 0, lines)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- what `agent fleet` would run


def _tool(name: str):
    from tools import default_tools  # lazy: per command

    found = default_tools([name])
    if not found:
        raise ExportError(f"no tool named {name!r}")
    return found[0]


def _checked(what: str, tool_name: str, args: dict):
    """The tool's own reading of the arguments, and its action (what the gate judges)."""
    tool = _tool(tool_name)
    try:
        parsed = tool.Args.model_validate({"host": PLACEHOLDER_HOST, **args})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ExportError(f"{what}: {tool_name} refuses its arguments ({where + ': ' if where else ''}"
                          f"{first['msg'].removeprefix('Value error, ')}); agent fleet would not run it either") from None
    return parsed, tool.action(parsed)


def _covering_rule(what: str, tool_name: str, action, rules: list[tuple[int, Authorization]],
                   whose: str = "for every host (`host: \"*\"`)",
                   then: str = "agent fleet would refuse it, so no playbook is written") -> int | None:
    """The index of the rule that allows the action on every host; None for a read-only one."""
    from agent.safety.policy import classify_action  # lazy: per command
    from tools.base import RiskClass  # lazy: per command

    risk = classify_action(action)
    if risk.cls is RiskClass.FORBIDDEN:
        raise ExportError(f"{what}: the safety layer forbids it ({risk.reason}); no playbook runs it")
    if risk.cls is RiskClass.READ_ONLY:
        return None
    for i, rule in rules:
        if rule.check(tool_name, action, risk) == []:
            return i
    raise ExportError(f"{what} is a change ({risk.reason}) that none of the recipe's authorizations {whose} "
                      f"allows: {then}; add the rule it needs and review it")


def _runfile_is_its_version(what: str, values: dict) -> None:
    """What install_runfile checks on the host before anything, said before a playbook is written."""
    from tools.install_runfile import RUNFILE_NAME  # lazy: per command

    name = values["runfile"].rstrip("/").rsplit("/", 1)[-1]
    m = RUNFILE_NAME.search(name)
    if not m:
        raise ExportError(f"{what}: {name!r} does not look like a CUDA runfile (cuda_X.Y.Z_DRIVER_linux.run)")
    if ".".join(m.group("cuda").split(".")[:2]) != values["version"]:
        raise ExportError(f"{what}: the runfile is CUDA {m.group('cuda')} but version {values['version']} was asked "
                          "for; the step would fail on every host")


@dataclass
class Plan:
    """The recipe, checked, as the helper's values: what each task passes."""

    steps: list[tuple[str, dict, int | None]]  # tool, the helper's values (or the command), the rule's index
    checks: list[tuple[str, dict]]
    backup: dict
    restore: dict
    restore_rule: int
    drain_rules: tuple[int, int] | None


def _step(n: int, step, rules: list[tuple[int, Authorization]], **said) -> tuple[str, dict, int | None]:
    """One step as its tool reads it, and the rule that allows it (None: a read); ExportError otherwise."""
    what = f"step {n} ({step.tool})"
    parsed, action = _checked(what, step.tool, step.args)
    values = parsed.model_dump(mode="json", exclude={"host"})
    if step.tool == "install_runfile":
        _runfile_is_its_version(what, values)
    return step.tool, values, _covering_rule(what, step.tool, action, rules, **said)


def check_steps(recipe: Recipe, hosts: list[str]) -> None:
    """What `agent fleet` checks before it touches any host: each step, as its tool reads it, allowed on each
    host by the recipe's rules, and the rollback too; the first that is not, as a one-line RecipeError. A step
    no rule covers used to be found on the canary, after its first changes and a rollback."""
    for host in hosts:
        rules = [(i, a) for i, a in enumerate(recipe.authorizations) if a.covers_host(host)]
        said = {"whose": f"on {host}", "then": "the rollout would stop there, so no host is touched"}
        for n, step in enumerate(recipe.steps, 1):
            _step(n, step, rules, **said)
        _, action = _checked("the rollback", "restore_backup", {"backup_id": "backup", **recipe.restore})
        if _covering_rule("the rollback (restore_backup)", "restore_backup", action, rules, **said) is None:
            raise RecipeError("the rollback (restore_backup) reads as no change: it cannot be the recipe's rollback")


def check_recipe(recipe: Recipe) -> Plan:
    rules = [(i, a) for i, a in enumerate(recipe.authorizations) if a.host == "*"]
    steps = []
    for n, step in enumerate(recipe.steps, 1):
        if step.tool not in STEP_TOOLS:
            raise ExportError(f"step {n} ({step.tool}): a playbook takes only {', '.join(STEP_TOOLS)} as steps (the "
                              "backup, the drain and the rollback are its own tasks)")
        steps.append(_step(n, step, rules))
    backup, _ = _checked("the backup", "pip_freeze_backup", recipe.backup)
    restore_args = {"backup_id": "backup", **recipe.restore}
    restore, action = _checked("the rollback", "restore_backup", restore_args)
    restore_rule = _covering_rule("the rollback (restore_backup)", "restore_backup", action, rules)
    if restore_rule is None:
        raise ExportError("the rollback (restore_backup) reads as no change: it cannot be the recipe's rollback")
    drain_rules = None
    if recipe.drain is not None:
        found = []
        for tool_name in ("drain_node", "undrain_node"):
            args = {k: v for k, v in recipe.drain.call(PLACEHOLDER_HOST, undrain=tool_name == "undrain_node").items()
                    if k != "host"}
            if tool_name == "undrain_node":
                args["drain_id"] = "0" * 8  # a drain_id of the shape drain_node gives
            _, action = _checked(f"the {tool_name.split('_')[0]}", tool_name, args)
            found.append(_covering_rule(f"the {tool_name}", tool_name, action, rules))
        drain_rules = (found[0], found[1])
    checks = []
    for n, check in enumerate(recipe.checks, 1):
        if check.toolkit is not None:
            checks.append(("check_toolkit", {"path": check.toolkit.path, "version": check.toolkit.version}))
        elif check.command is not None:
            from agent.safety.classifier import classify  # lazy: per command
            from tools.base import RiskClass  # lazy: per command

            risk = classify(check.command.run)
            if risk.cls is not RiskClass.READ_ONLY:
                raise ExportError(f"check {n}: a success check must be read-only, and `{check.command.run}` is "
                                  f"{risk.cls.value} ({risk.reason})")
            checks.append(("check_command", check.command.model_dump(mode="json", exclude={"host"})))
        elif check.outputs is not None:
            continue  # judged after the answers are asked again (the playbook's outputs_gate task)
        else:
            raise ExportError(f"check {n}: a throughput check is the benchmark's gate in a recipe, not a check")
    if recipe.benchmark is not None:
        for label in ("before", "after"):
            call = {k: v for k, v in recipe.benchmark.call(PLACEHOLDER_HOST, label).items() if k != "host"}
            _, action = _checked(f"the benchmark {label}", "run_bench", call)
            _covering_rule(f"the benchmark {label}", "run_bench", action, rules)
    return Plan(steps=steps, checks=checks, backup=backup.model_dump(mode="json", exclude={"host"}),
                restore=restore.model_dump(mode="json", exclude={"host", "backup_id"}), restore_rule=restore_rule,
                drain_rules=drain_rules)


# --------------------------------------------------------------------------- the playbook


def helper_source() -> str:
    """The script the playbook runs on each host: the benchmark parsers, the gate, then the helper."""
    parts = []
    for path in (*CARRIED, HELPER):
        text = path.read_text(encoding="utf-8").replace("from __future__ import annotations\n", "")
        parts.append(f"# ---- {path.parent.name}/{path.name}\n{text.strip()}\n")
    return "from __future__ import annotations\n\n" + "\n\n".join(parts)


def _helper_task(name: str, command: str, values: dict, *runtime: str, register: str,
                 comments: list[str] | None = None, **extra) -> Task:
    argv = [Jinja("{{ upgrade_python }}"), "-", command, Unsafe(json.dumps(values, sort_keys=True)),
            *(Jinja(r) for r in runtime)]
    body = {"name": Unsafe(name),
            "ansible.builtin.command": {"argv": argv, "stdin": Jinja("{{ upgrade_helper }}")},
            "register": register,
            "changed_when": Jinja(f"{register}.rc == 0 and ({register}.stdout | from_json).changed"), **extra}
    if _holds_a_credential(values):  # Ansible would print its arguments on a failure, and with -v always
        body["no_log"] = True
    return Task(body=body, comments=comments or [])


def _holds_a_credential(values: dict) -> bool:
    from agent.record.redact import Redactor  # lazy: only while a playbook is written

    text = json.dumps(values, sort_keys=True)
    return Redactor(environ={}).text(text) != text


def _rule_comment(recipe: Recipe, index: int | None) -> list[str]:
    if index is None:
        return ["read-only: it needs no authorization"]
    rule = recipe.authorizations[index]
    return [f"approved by the recipe's authorizations[{index}]" + (" (destructive)" if rule.destructive else "")
            + ": " + comment_text(rule.model_dump(mode="json", exclude_defaults=True))]


def playbook(recipe: Recipe, *, source: str, canary: int, batch: int, max_fail: float) -> str:
    """The playbook's text; ExportError when `agent fleet` would not run the recipe."""
    plan = check_recipe(recipe)
    tasks: list[Task] = [
        _helper_task("preflight: read the facts the recipe's preconditions name", "facts",
                     {"preconditions": recipe.preconditions.model_dump(mode="json")}, register="upgrade_preflight",
                     comments=["the canary's facts: " + comment_text(recipe.preconditions.model_dump(mode="json"))]),
        Task({"name": Unsafe("preflight: a host whose facts differ is held, and nothing on it is changed"),
              "ansible.builtin.debug": {"msg": Jinja("held: {{ (upgrade_preflight.stdout | from_json).mismatches | "
                                                     "join('; ') }}")},
              "when": Jinja("(upgrade_preflight.stdout | from_json).mismatches | length > 0")}),
        Task({"name": Unsafe("preflight: end a held host here"), "ansible.builtin.meta": "end_host",
              "when": Jinja("(upgrade_preflight.stdout | from_json).mismatches | length > 0")}),
        _helper_task("backup: the Python environment and the CUDA system state, verified by sha256, its restore "
                     "rehearsed", "backup", plan.backup, "{{ inventory_hostname }}",
                     register="upgrade_backup",
                     comments=["taking a backup needs no approval: it writes only its own new folder"]),
        Task({"name": Unsafe("backup: a host whose restore could not fetch every pin again is held, nothing changed"),
              "ansible.builtin.debug": {"msg": Jinja("held: {{ (upgrade_backup.stdout | from_json).held }}")},
              "when": Jinja("(upgrade_backup.stdout | from_json).held | length > 0")}),
        Task({"name": Unsafe("backup: end a held host here"), "ansible.builtin.meta": "end_host",
              "when": Jinja("(upgrade_backup.stdout | from_json).held | length > 0")}),
    ]
    if recipe.drain is not None:
        tasks.append(_helper_task(f"drain: take the node out of {recipe.drain.scheduler} and wait for its jobs",
                                  "drain", recipe.drain.model_dump(mode="json"), "{{ inventory_hostname }}",
                                  register="upgrade_drain", comments=_rule_comment(recipe, plan.drain_rules[0])))
    block: list[Task] = []
    bench = recipe.benchmark.model_dump(mode="json") if recipe.benchmark else None
    if bench is not None:
        block.append(_helper_task("benchmark before", "bench", bench, "before", register="upgrade_bench_before",
                                  comments=["read-only: a benchmark workload"]))
    answers = recipe.outputs.model_dump(mode="json") if recipe.outputs else None
    if answers is not None:
        block.append(_helper_task("the served model's answers before", "outputs", answers, "before",
                                  register="upgrade_answers_before",
                                  comments=["read-only: check_outputs' prompts, greedy, on the host's loopback"]))
    for n, (tool_name, values, rule) in enumerate(plan.steps, 1):
        name = f"step {n} of {len(plan.steps)}: {tool_name}"
        if tool_name == "ssh_exec":
            body: dict = {"name": Unsafe(name),
                          "ansible.builtin.shell": {"cmd": Unsafe(values["command"]), "executable": "/bin/bash",
                                                    **({"chdir": Unsafe(values["cwd"])} if values.get("cwd") else {})},
                          "timeout": int(values.get("timeout") or 600)}
            if values.get("env"):
                body["environment"] = {k: Unsafe(v) for k, v in values["env"].items()
                                       if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)}
            block.append(Task(body=body, comments=_rule_comment(recipe, rule)))
        else:
            block.append(_helper_task(name, tool_name, values, register=f"upgrade_step_{n}",
                                      comments=_rule_comment(recipe, rule)))
    for n, (command, values) in enumerate(plan.checks, 1):
        block.append(_helper_task(f"check {n} of {len(plan.checks)}: {command.removeprefix('check_')}", command,
                                  values, register=f"upgrade_check_{n}"))
    if bench is not None:
        block.append(_helper_task("benchmark after", "bench", bench, "after", register="upgrade_bench_after"))
        block.append(_helper_task(f"benchmark gate: after >= before - {recipe.benchmark.gate.max_drop_percent:g}% "
                                  f"at {recipe.benchmark.gate.confidence:.0%} (a bootstrap interval)", "gate", bench,
                                  "{{ upgrade_bench_before.stdout_lines | last }}",
                                  "{{ upgrade_bench_after.stdout_lines | last }}", register="upgrade_gate"))
    for n, check in enumerate([c.outputs for c in recipe.checks if c.outputs is not None], 1):
        if n == 1:
            block.append(_helper_task("the served model's answers after", "outputs", answers, "after",
                                      register="upgrade_answers_after"))
        rule = "the same outputs as before" if check.same else \
            f"a score at most {check.max_accuracy_drop:.2%} below before's"
        block.append(_helper_task(f"answers check: {rule}", "outputs_gate", check.model_dump(mode="json"),
                                  "{{ upgrade_answers_before.stdout_lines | last }}",
                                  "{{ upgrade_answers_after.stdout_lines | last }}", register=f"upgrade_answers_{n}"))
    rescue = [
        _helper_task("rollback: restore the host from its backup", "restore", plan.restore,
                     "{{ (upgrade_backup.stdout | from_json).backup_dir }}", register="upgrade_restore",
                     comments=_rule_comment(recipe, plan.restore_rule)),
        Task({"name": Unsafe("rollback: the host failed, and was restored"),
              "ansible.builtin.fail": {"msg": Jinja("rolled back: {{ ansible_failed_task.name }} failed: "
                                                    "{{ ansible_failed_result.stderr | default("
                                                    "ansible_failed_result.msg) }}")}}),
    ]
    guarded: dict[str, Any] = {"name": Unsafe("the upgrade, undone from the backup if any part of it fails"),
                               "block": block, "rescue": rescue}
    if recipe.drain is not None:
        guarded["always"] = [_helper_task(
            f"undrain: put the node back into {recipe.drain.scheduler} (only a drain of this play, and never after a "
            "failed rollback)", "undrain", {"scheduler": recipe.drain.scheduler, "reason": recipe.drain.reason},
            "{{ inventory_hostname }}", "{{ upgrade_drain.stdout_lines | last }}", register="upgrade_undrain",
            comments=_rule_comment(recipe, plan.drain_rules[1]),
            when=Jinja("(upgrade_drain.stdout | from_json).drained_by_us and (upgrade_restore is not defined or "
                       "upgrade_restore is succeeded)"))]
    tasks.append(Task(body=guarded))
    _read_only_in_check_mode(tasks[0], tasks[3:])
    plays = _plays(recipe, tasks, canary, batch, max_fail)
    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest() if Path(source).is_file() else "-"
    learned = recipe.learned_from
    head = [
        "# An Ansible playbook for the recipe " + comment_text(str(source)) + f" (sha256 {digest}),",
        ("# learned on " + comment_text(learned.host) + " from " + comment_text(learned.transcript) + "."
         if learned else "# written by hand."),
        "# Written by `agent recipe RECIPE --ansible`: review it as you would the recipe.",
        "#",
        f"#   ansible-playbook -i INVENTORY -f {max(batch, canary)} playbook.yml [--limit GROUP] [--check]",
        "#",
        "# Per host, as `agent fleet` does it: the preflight (a host whose facts differ is held and ends, with",
        "# changed=0), a verified backup, " + ("the drain, " if recipe.drain else "")
        + "the benchmark before, the steps, the checks, the benchmark after",
        "# and its gate; any failure restores the host from its backup (rescue:) and fails it"
        + (", and a node this play drained goes back (always:)." if recipe.drain else "."),
        (f"# Two plays, as agent fleet rolls out: the canary play takes {canary} host(s) at a time until one has "
         "changed and passed",
         "# (a held host hands the role on; a failed canary stops the playbook), then the batches play takes the "
         f"rest, {batch} at a time.") if canary > 0 else f"# One play: batches of {batch}, no canary.",
        f"# Run it with forks of at least {max(batch, canary)} (-f {max(batch, canary)}), or a batch runs in parts.",
        "# --check runs the preflight and shows who would be held or changed; it changes nothing. A task whose values",
        "# hold a credential (an index URL with a token) is no_log.",
        f"# Unlike agent fleet: max_fail_percentage ({max_fail:g}) counts the failures of each batch on its own (agent",
        "# fleet's --max-fail counts all the hosts attempted so far); the backup holds pip's freeze, the index of each",
        "# local-version pin and the system state (no `pip inspect`); the record is Ansible's output, not a transcript.",
        "# The backup's restore is rehearsed (pip resolves every pin without installing): a host whose restore could",
        "# not fetch them all is held, as agent fleet holds it; the restore reinstalls from the indexes it recorded.",
        "# Set agent_python in the inventory to the interpreter of the environment the recipe changes.",
        "# The helper script at the end runs on each host with that interpreter; recipe values are !unsafe.",
    ]
    return "\n".join(line for part in head for line in ([part] if isinstance(part, str) else part)) + "\n" + \
        to_yaml(plays)


# Jinja of ours: whether a host of this run already changed and passed (facts persist across a run's plays).
_PROVEN = "groups['all'] | map('extract', hostvars) | selectattr('upgrade_proven', 'defined') | list | length > 0"


def _plays(recipe: Recipe, tasks: list[Task], canary: int, batch: int, max_fail: float) -> list[dict]:
    """The canary play (while no host has changed and passed, `canary` hosts at a time; a held one hands the role
    on, a failed one stops the playbook) and the batches play (every host the canary play did not take)."""
    common = {"hosts": "all", "gather_facts": False,
              "vars": {"upgrade_python": Jinja("{{ agent_python | default('python3') }}"),
                       "upgrade_helper": Literal(helper_source())}}
    name = clip(_first_line(recipe.goal), 160) or "upgrade-agent recipe"
    batches = {"name": Unsafe(f"{name} (batches)"), **common, "serial": batch, "max_fail_percentage": max_fail,
               "tasks": [Task({"name": Unsafe("batches: a host the canary play took is done"),
                               "ansible.builtin.meta": "end_host",
                               "when": Jinja("upgrade_seen | default(false)")}), *tasks]}
    if canary <= 0:
        return [batches]
    proven = Task({"name": Unsafe("canary: the upgrade is proven on this host"),
                   "ansible.builtin.set_fact": {"upgrade_proven": True},
                   "when": Jinja("not ansible_check_mode")})
    canary_play = {"name": Unsafe(f"{name} (canary)"), **common, "serial": canary, "max_fail_percentage": 0,
                   "tasks": [Task({"name": Unsafe("canary: once a host changed and passed (or in --check), the rest "
                                                  "go with the batches"), "ansible.builtin.meta": "end_host",
                                   "when": Jinja(f"ansible_check_mode or ({_PROVEN})")}),
                             Task({"name": Unsafe("canary: this host is taken here"),
                                   "ansible.builtin.set_fact": {"upgrade_seen": True}}),
                             *tasks, proven]}
    return [canary_play, batches]


def _read_only_in_check_mode(preflight: Task, after: list[Task]) -> None:
    """`--check`: the preflight runs (it only reads) and says who is held; every task from the backup on is skipped,
    since each needs what an earlier one, skipped in check mode, would have printed."""
    preflight.body["check_mode"] = False
    for task in after:
        when = task.body.get("when")
        task.body["when"] = Jinja(f"not ansible_check_mode and ({when})" if when else "not ansible_check_mode")


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return clip(line, 200)
