"""What a restore runs: the pip commands that bring an environment back to a backup, and the check, before
any of them changes anything, that every pin can be fetched where its install looks.

restore_backup runs the plan; pip_freeze_backup rehearses it before the first change; the session report
prints it as the rollback by hand.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from tools.base import PIP_ENV, ToolContext, ToolError, truncate_for_model

# Never uninstalled to match a backup: removing the installer tooling would break the restore itself.
KEEP = {"pip", "setuptools", "wheel"}


@dataclass(frozen=True)
class PipCommand:
    """One pip command of a restore: the shell line, the part after `-m pip`, and what it is for."""

    line: str
    args: str
    what: str


def pip_command(python: str, args: str, what: str) -> PipCommand:
    return PipCommand(line=f"{shlex.quote(python)} -m pip {args}", args=args, what=what)


@dataclass(frozen=True)
class RestorePlan:
    """The pip commands that bring an environment back to a backup, in the order they run."""

    uninstall: list[str]  # names the backup did not have
    install: list[str]  # requirement lines reinstalled by name, sorted
    commands: list[PipCommand]

    @property
    def lines(self) -> list[str]:
        return [c.line for c in self.commands]


def restore_plan(python: str, want: dict[str, str] | None, indexes: dict[str, str | None], remote_dir: str,
                 have: dict[str, str] | None = None, index_url: str | None = None) -> RestorePlan:
    """What restores `python` to a backup: its freeze `want`, the index of each local-version pin, its dir.

    `index_url` is the mirror to restore from, for a machine without a route to PyPI (or to
    PyTorch's index): the pins without an index of their own come from it, and it is searched
    before the index recorded for a local-version pin. Without it, those pins come from what the
    host's pip configuration names (PyPI by default).

    With the current freeze `have`: uninstall what the backup did not have (never pip, setuptools
    or wheel), then reinstall every pin that differs with --no-deps, grouped by the index each
    one needs, PyPI's group first. Without it (or without the backup's freeze): reinstall the
    local-version pins from their indexes, then the backup's whole freeze.txt, which pip skips
    where it is already satisfied, so the local versions are not looked up on PyPI; packages
    added since the backup stay.
    """
    def by_index(pins: list[str]) -> list[tuple[str | None, list[str]]]:
        groups: dict[str | None, list[str]] = {}
        for pin in pins:
            groups.setdefault(indexes.get(pin), []).append(pin)
        return sorted(((index, sorted(lines)) for index, lines in groups.items()), key=lambda kv: kv[0] or "")

    def install(index: str | None, lines: list[str], what: str) -> PipCommand:
        where = [u for u in (index_url, index) if u]
        where = list(dict.fromkeys(where))  # the mirror first; each index once
        options = "".join(f"--{'extra-' if i else ''}index-url {shlex.quote(u)} " for i, u in enumerate(where))
        return pip_command(python, "install --no-deps " + options + " ".join(shlex.quote(x) for x in lines),
                           what + (f" from {' and '.join(where)}" if where else ""))

    if want is None or have is None:
        groups = [(index, lines) for index, lines in by_index(list(indexes)) if index]
        commands = [install(index, lines, f"reinstalling {len(lines)} local-version pins") for index, lines in groups]
        whole = f"-r {shlex.quote(remote_dir + '/freeze.txt')}"
        commands.append(pip_command(python, "install --no-deps " + (f"--index-url {shlex.quote(index_url)} " if index_url
                                                                   else "") + whole,
                                    "reinstalling the backup's whole freeze"))
        return RestorePlan(uninstall=[], install=sorted(pin for _, lines in groups for pin in lines),
                           commands=commands)
    extras = sorted(n for n in have if n not in want and n not in KEEP)
    changed = [line for name, line in want.items() if have.get(name) != line]
    commands = []
    if extras:
        commands.append(pip_command(python, "uninstall -y " + " ".join(shlex.quote(n) for n in extras),
                                    "uninstalling what the backup did not have"))
    commands += [install(index, lines, f"reinstalling {len(lines)} pinned packages")
                 for index, lines in by_index(changed)]
    return RestorePlan(uninstall=extras, install=sorted(changed), commands=commands)


def fetch_problem(ctx: ToolContext, host, plan: RestorePlan, index_url: str | None) -> str | None:
    """Why the plan's installs could not fetch their pins (the first install that cannot), or None when pip
    finds every one where the install looks."""
    for command in plan.commands:
        said = unfetchable(ctx, host, command)
        if said is not None:
            hint = ("" if index_url else "; if this machine has no route to PyPI, give index_url: a mirror that "
                    "holds these versions")
            return f"{why_unfetchable(command, index_url)}{hint}. pip said: {truncate_for_model(said, 1500)}"
    return None


def unfetchable(ctx: ToolContext, host, command: PipCommand, wheels_only: bool = False) -> str | None:
    """What pip said when an install's pins cannot all be fetched where it looks; None when they can, or when the
    command is no install, or this pip cannot tell (--dry-run, which resolves without installing, is 22.2 and
    later). `wheels_only`: a pin that only a source package provides counts as not fetched."""
    if not command.args.startswith("install "):
        return None
    ctx.emit("progress", {"step": "checking that " + command.what.replace("reinstalling", "the index has")})
    # One retry, not pip's five with back-off: an index that is not there is said in seconds, not a minute.
    # Wheels only where nobody approved the check (a backup's rehearsal): reading a source package's metadata
    # means running its build code.
    only = "--only-binary :all: " if wheels_only else ""
    line = command.line.replace(" -m pip install ", f" -m pip install --dry-run --ignore-installed --retries 1 {only}",
                                1)
    r = host.run(line, timeout=600, env=PIP_ENV, cancel=ctx.cancel)
    if r.cancelled:
        raise ToolError(f"cancelled {ctx.cancel_reason()} while checking the indexes; nothing was changed")
    out = (r.stderr or r.stdout).strip()
    if r.ok or "no such option: --dry-run" in out:
        return None
    # pip's warnings about each index location come first; what it could not find is at the end.
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    return "\n".join(errors) if errors else out


def why_unfetchable(command: PipCommand, index_url: str | None) -> str:
    """'reinstalling 7 pinned packages cannot be fetched from the index the host's pip configuration names'."""
    where = (f"the mirror {index_url}" if index_url and index_url in command.line else
             "the index the host's pip configuration names (PyPI if it names none)"
             if "--index-url" not in command.line else "the index it names")
    return f"{command.what} cannot be fetched from {where}"
