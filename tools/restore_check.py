"""Before a restore changes anything: can its installs fetch every pin where they look?

pip_freeze_backup asks it of the whole freeze (the rehearsal), restore_backup of the plan it is about to run.
"""

from __future__ import annotations

from tools.base import PIP_ENV, ToolContext, ToolError, truncate_for_model
from tools.restore_plan import PipCommand, RestorePlan, dry_run


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
    line = dry_run(command, wheels_only)
    if line is None:
        return None
    ctx.emit("progress", {"step": "checking that " + command.what.replace("reinstalling", "the index has")})
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
