"""The rollback a report prints: the commands that undo what the session changed, by hand.

The Python packages come back the way the restore_backup tool would bring them back: the
commands are its own `restore_plan`, given the backup and the final freeze when one was
recorded, so the printed rollback cannot drift from what the tool runs. The CUDA toolkits
come back to the state before (the first inspection or the backup's system reading) from the state
after (the final state, else what the installs and restores did): the `cuda` link first, then the
toolkits that were not there before.
"""

from __future__ import annotations

import shlex

from agent.report.data import PackageDiff, Report, ToolkitView
from tools.restore_plan import restore_plan


def package_rollback(diff: PackageDiff) -> list[str]:
    """The shell commands that put the environment back to the backup: restore_backup's own plan.

    With the final freeze recorded, the plan the tool would run against it (uninstall what the
    backup did not have, reinstall the changed pins); without it, the plan for an unknown
    current state (the local-version pins, then the whole freeze). `restore_plan` says how.
    """
    b = diff.backup
    have = diff.after if diff.changes is not None else None
    return restore_plan(b.python, b.freeze, b.indexes, b.remote_dir, have).lines


def toolkit_rollback(report: Report, view: ToolkitView) -> list[str]:
    """The commands that return the toolkits to the state before, in order: the `cuda` link first (pointed
    back, or taken away if there was none), so it never points at a toolkit the next command removes; then
    the toolkits that were not there before. A toolkit the session removed cannot be put back by a command:
    a comment says so."""
    link = shlex.quote(view.link_path)
    before_known = view.before_step is not None or bool(view.installs)
    after_known = view.after_known
    moved = any(s.data.get("symlink_after") != s.data.get("symlink_before") for s in view.installs) \
        or bool(view.changed_by_hand)
    cmds = []
    if before_known and ((view.link_after != view.link_before) if after_known else moved):
        # Without a reading after, pointing it back is right whatever the link is now.
        cmds.append(f"ln -sfn {shlex.quote(view.link_before)} {link}" if view.link_before else
                    f"rm -f {link}")  # there was no link before
    added = [r.path for r in view.rows if r.change == "added"]
    # What the installs put there, at least: all of it without a reading after, and, with one, a toolkit the
    # reading could not see (installed outside the places inspect_host looks).
    seen = {r.path for r in view.rows}
    added += [s.data["toolkit_path"] for s in view.installs
              if s.data["toolkit_path"] not in added and (not after_known or s.data["toolkit_path"] not in seen)]
    cmds += [f"rm -rf {shlex.quote(p)}" for p in added]
    cmds += [f"# {r.path} was removed during the session: reinstall it from its runfile" for r in view.rows
             if r.change == "removed"]
    return cmds
