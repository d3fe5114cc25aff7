"""restore_backup: bring a Python environment back to a pip_freeze_backup, then prove it."""

from __future__ import annotations

import json
import shlex

from pydantic import BaseModel, Field

from tools.base import Action, Risk, RiskClass, StrictArgs, Tool, ToolContext, ToolError, run_live, truncate_for_model
from tools.hosts import HostError
from tools.pip_freeze_backup import PIP_ENV, parse_freeze, read_backup

# Never uninstalled to match a backup: removing the installer tooling would break the restore itself.
KEEP = {"pip", "setuptools", "wheel"}


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

    Uninstalls what the backup did
    not have, reinstall the exact pinned versions with --no-deps from the index each one needs (local
    versions such as +cu128 from their own index), then freeze again and report the difference from the
    backup, which is empty when the restore worked. Destructive: it needs the operator's approval.
    """

    name = "restore_backup"

    class Args(StrictArgs):
        host: str = Field(description="host in this session")
        backup_id: str = Field(description="the id pip_freeze_backup returned")
        python: str | None = Field(default=None, description="interpreter to restore (default: the one backed up)")

    class Result(BaseModel):
        backup_id: str
        python: str
        uninstalled: list[str]
        installed: list[str]
        commands: list[str]
        remaining_diff: list[str]
        restored: bool
        checked_against: str  # what the backup's files were checked against before use

    def action(self, args) -> Action:
        return Action(host=args.host, subject=f"restore_backup {args.backup_id} python={args.python or '(backed up)'}",
                      risk=Risk(cls=RiskClass.DESTRUCTIVE, rule="tool:restore_backup",
                                reason="uninstalls and reinstalls packages to match a backup"),
                      args={"backup_id": args.backup_id, "python": args.python}, interpreter=args.python)

    def run(self, ctx: ToolContext, args) -> "RestoreBackup.Result":
        record = ctx.known_backup(args.backup_id)
        if record is not None and record.host != args.host:
            raise ToolError(f"backup {args.backup_id} is of host {record.host}, not {args.host}")
        try:
            host = ctx.hosts.get(args.host)
        except HostError as e:
            raise ToolError(str(e)) from None
        _, want, indexes, manifest = read_backup(host, args.backup_id, record)
        checked_against = ("the hashes recorded when this session took it" if record is not None else
                           "the host's own SHA256SUMS only: the backup was not taken in this session")
        py = args.python or manifest["python"]
        q = shlex.quote(py)

        part_way = f"the environment may be part-way restored: run restore_backup {args.backup_id} again to finish it"

        def pip(cmd: str, what: str, cancelled_leaves: str = part_way) -> str:
            ctx.emit("progress", {"step": what})
            r = run_live(ctx, host, f"{q} -m pip {cmd}", timeout=1800, env=PIP_ENV, cancel=ctx.cancel)
            if r.cancelled:
                raise ToolError(f"cancelled {ctx.cancel_reason()} while {what}; {cancelled_leaves}")
            if not r.ok:
                raise ToolError(f"`pip {cmd}` failed (exit {r.exit_code}) while restoring {args.backup_id}: "
                                f"{truncate_for_model((r.stderr or r.stdout).strip(), 2000)}")
            return r.stdout

        have = parse_freeze(pip("freeze --all", "reading the environment", "nothing was changed yet"))
        commands: list[str] = []
        extras = sorted(n for n in have if n not in want and n not in KEEP)
        if extras:
            cmd = "uninstall -y " + " ".join(shlex.quote(n) for n in extras)
            pip(cmd, "uninstalling what the backup did not have")
            commands.append(f"{py} -m pip {cmd}")
        changed = [line for name, line in want.items() if have.get(name) != line]
        by_index: dict[str | None, list[str]] = {}
        for line in changed:
            by_index.setdefault(indexes.get(line), []).append(line)
        for index, lines in sorted(by_index.items(), key=lambda kv: kv[0] or ""):
            cmd = "install --no-deps " + (f"--index-url {shlex.quote(index)} " if index else "") + \
                  " ".join(shlex.quote(x) for x in sorted(lines))
            pip(cmd, f"reinstalling {len(lines)} pinned packages" + (f" from {index}" if index else ""))
            commands.append(f"{py} -m pip {cmd}")
        after = parse_freeze(pip("freeze --all", "checking the result",
                                 "the packages were reinstalled but not checked: compare `pip freeze --all` "
                                 "with the backup's freeze.txt"))
        remaining = freeze_diff(want, after)
        return self.Result(backup_id=args.backup_id, python=py, uninstalled=extras, installed=sorted(changed),
                           commands=commands, remaining_diff=remaining, restored=not remaining,
                           checked_against=checked_against)

    def render(self, result) -> str:
        return json.dumps(result.model_dump(mode="json"))
