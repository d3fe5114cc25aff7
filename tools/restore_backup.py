"""restore_backup: bring a Python environment back to a pip_freeze_backup, then prove it.

`restore_plan` says which pip commands bring an environment back to a backup; the tool runs
exactly those, and the session report prints the same plan as its rollback by hand.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field, field_validator

from tools.base import (
    Action,
    Risk,
    RiskClass,
    StrictArgs,
    Tool,
    ToolContext,
    ToolError,
    run_live,
    sha256_hex,
    truncate_for_model,
)
from tools.hosts import HostError
from tools.pip_freeze_backup import PIP_ENV, parse_freeze, read_backup
from tools.pip_install import PipInstallArgs
from tools.restore_check import fetch_problem
from tools.restore_plan import PipCommand, RestorePlan, pip_command, restore_plan
from tools.system_state import SCRIPT as SYSTEM_SCRIPT
from tools.system_state import SystemState, parse_system_state, system_diff, system_rollback


def freeze_diff(want: dict[str, str], have: dict[str, str]) -> list[str]:
    """Differences between two freezes, one line each: '- torch==2.10.0+cu128 (now torch==2.10.0+cu130)'."""
    out = []
    for name in sorted(set(want) | set(have)):
        w, h = want.get(name), have.get(name)
        if w == h:
            continue
        if w is None:
            out.append(f"+ {h} (not in the backup)")
        elif h is None:
            out.append(f"- {w} (missing now)")
        else:
            out.append(f"~ {w} (now {h})")
    return out


class RestoreBackup(Tool):
    """Restore a Python environment to a pip_freeze_backup, then prove it with a freeze diff.

    It uninstalls what the backup did not have, reinstalls the exact pinned versions with --no-deps from
    the index each one needs (local versions such as +cu128 from their own index), then freezes again and
    reports the difference from the backup, which is empty when the restore worked. Before it uninstalls
    anything it checks that every pin can be fetched; on a machine without a route to PyPI, give
    `index_url`, the host's own mirror of the backed-up versions. Destructive: in a chat
    the operator approves it; in a scripted run it runs only if a goal file rule for restore_backup says
    `destructive: true`.
    """

    name = "restore_backup"
    pinned = ("backup_id", "python", "index_url", "system")

    class Args(StrictArgs):
        host: str = Field(description="host in this session")
        backup_id: str = Field(description="the id pip_freeze_backup returned")
        python: str | None = Field(default=None, description="interpreter to restore (default: the one backed up)")
        index_url: str | None = Field(default=None, description=(
            "the mirror to restore from (https:// or file:///), for a machine without a route to PyPI or "
            "PyTorch's index: searched first for every pin, before the index the backup recorded for a "
            "local-version pin (+cu128); it must hold the backed-up versions, which the index a trial installed "
            "from (e.g. a cu130 one) usually does not. Default: the pins without an index of their own come from "
            "the host's pip configuration (PyPI unless it says otherwise)"))
        system: bool = Field(default=False, description=(
            "also roll back the system state the backup recorded: put the cuda link back and remove the CUDA "
            "toolkits installed at /usr/local/cuda-* since (a toolkit installed elsewhere is not recorded, and stays; "
            "system packages and the driver are compared and reported, not changed)"))

        @field_validator("index_url")
        @classmethod
        def _index(cls, v: str | None) -> str | None:
            return None if v is None else PipInstallArgs._index(v)

    class Result(BaseModel):
        backup_id: str
        python: str
        uninstalled: list[str]
        installed: list[str]
        commands: list[str]
        remaining_diff: list[str]
        system_commands: list[str] = Field(default_factory=list, description="what rolled back the system state")
        system_diff: list[str] = Field(default_factory=list, description=(
            "how the system state (toolkits, cuda link, CUDA/NVIDIA packages, driver) still differs from the backup"))
        system_recorded: bool = Field(default=False, description="whether the backup recorded the system state")
        restored: bool
        checked_against: str  # what the backup's files were checked against before use

    def action(self, args) -> Action:
        subject = (f"restore_backup {args.backup_id} python={args.python or '(backed up)'}"
                   + (f" index={args.index_url}" if args.index_url else "") + (" system=true" if args.system else ""))
        return Action(host=args.host, subject=subject,
                      risk=Risk(cls=RiskClass.DESTRUCTIVE, rule="tool:restore_backup",
                                reason="uninstalls and reinstalls packages to match a backup"),
                      args={"backup_id": args.backup_id, "python": args.python, "index_url": args.index_url,
                            "system": args.system},
                      defaults={"python": None, "index_url": None, "system": False},
                      interpreter=args.python)

    def run(self, ctx: ToolContext, args) -> "RestoreBackup.Result":
        record = ctx.known_backup(args.backup_id)
        if record is not None and record.host != args.host:
            raise ToolError(f"backup {args.backup_id} is of host {record.host}, not {args.host}")
        try:
            host = ctx.hosts.get(args.host)
        except HostError as e:
            raise ToolError(str(e)) from None
        remote, want, indexes, manifest = read_backup(host, args.backup_id, record)
        checked_against = ("the hashes recorded when this session took it" if record is not None else
                           "the host's own SHA256SUMS only: the backup was not taken in this session")
        py = args.python or manifest["python"]

        part_way = f"the environment may be part-way restored: run restore_backup {args.backup_id} again to finish it"

        def pip(command: PipCommand, cancelled_leaves: str = part_way) -> str:
            ctx.emit("progress", {"step": command.what})
            r = run_live(ctx, host, command.line, timeout=1800, env=PIP_ENV, cancel=ctx.cancel)
            if r.cancelled:
                raise ToolError(f"cancelled {ctx.cancel_reason()} while {command.what}; {cancelled_leaves}")
            if not r.ok:
                raise ToolError(f"`pip {command.args}` failed (exit {r.exit_code}) while restoring {args.backup_id}: "
                                f"{truncate_for_model((r.stderr or r.stdout).strip(), 2000)}")
            return r.stdout

        have = parse_freeze(pip(pip_command(py, "freeze --all", "reading the environment"), "nothing was changed yet"))
        plan = restore_plan(py, want, indexes, remote, have, args.index_url)
        self._can_fetch(ctx, host, plan, args)
        for command in plan.commands:
            pip(command)
        after = parse_freeze(pip(pip_command(py, "freeze --all", "checking the result"),
                                 "the packages were reinstalled but not checked: compare `pip freeze --all` "
                                 "with the backup's freeze.txt"))
        remaining = freeze_diff(want, after)
        backed_up = read_system_state(host, remote, manifest, record, args.backup_id)
        system_commands, system_left = [], []
        if backed_up is not None:
            system_commands, system_left = self._system(ctx, host, backed_up, args)
        elif args.system:
            raise ToolError(f"backup {args.backup_id} recorded no system state (it was taken by an older version); "
                            "the Python environment was restored; roll the system back by hand, as the report says")
        whole = not remaining and (not args.system or not system_left)
        return self.Result(backup_id=args.backup_id, python=py, uninstalled=plan.uninstall, installed=plan.install,
                           commands=plan.lines, remaining_diff=remaining, restored=whole,
                           checked_against=checked_against, system_commands=system_commands,
                           system_diff=system_left, system_recorded=backed_up is not None)

    def _system(self, ctx: ToolContext, host, backed_up: SystemState, args) -> tuple[list[str], list[str]]:
        """Compare the host's system state with the backup's, and with `system`, roll back what a tool can."""
        now = read_host_system_state(host, ctx)
        if not args.system:
            return [], system_diff(backed_up, now)
        if not (backed_up.complete and now.complete):
            which = "the backup's" if not backed_up.complete else "the host's current"
            raise ToolError(f"{which} reading of the system state is incomplete, so what was installed since cannot "
                            "be told apart: the Python environment was restored; the system state was not changed, "
                            "roll it back by hand")
        rollback = system_rollback(backed_up, now)
        for command in rollback.commands:
            ctx.emit("progress", {"step": command})
            r = host.run(command, timeout=600, cancel=ctx.cancel)
            if not r.ok or r.cancelled:
                raise ToolError(f"`{command}` failed (exit {r.exit_code}) while rolling back the system state; the "
                                f"Python environment was restored: {(r.stderr or r.stdout).strip()[-500:]}")
        return rollback.commands, system_diff(backed_up, read_host_system_state(host, ctx))

    def _can_fetch(self, ctx: ToolContext, host, plan: RestorePlan, args) -> None:
        """Before anything is uninstalled: can every pin be found where its install looks? A machine without a
        route to PyPI would otherwise lose the packages added since the backup and then fail to fetch the old
        ones."""
        problem = fetch_problem(ctx, host, plan, args.index_url)
        if problem is not None:
            raise ToolError(f"nothing was changed: {problem}")

    def render(self, result) -> str:
        return json.dumps(result.model_dump(mode="json"))


def read_host_system_state(host, ctx: ToolContext) -> SystemState:
    r = host.run(SYSTEM_SCRIPT, timeout=120, cancel=ctx.cancel)
    return parse_system_state(r.stdout)


def read_system_state(host, remote: str, manifest: dict, record, backup_id: str) -> SystemState | None:
    """The backup's system.txt, checked like its other files; None when the backup has none."""
    if "system.txt" not in (manifest.get("files") or {}):
        return None
    data = host.read_file(f"{remote}/system.txt")
    expected = record.files.get("system.txt") if record is not None else manifest["files"]["system.txt"]
    if sha256_hex(data) != expected:
        raise ToolError(f"backup {backup_id} on {host.name}: system.txt was changed after the backup was taken")
    return parse_system_state(data.decode())
