"""The rollback a report prints: the commands that undo what the session changed, by hand.

The Python packages come back the way the restore_backup tool would bring them back: the
commands are its own `restore_plan`, given the backup and the final freeze when one was
recorded, so the printed rollback cannot drift from what the tool runs. The CUDA toolkits
come back by pointing the `cuda` link back, then removing what install_runfile installed.
"""

from __future__ import annotations

import re
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
    """Point the `cuda` link back if it moved (first, so it never dangles), then remove what was installed."""
    cmds = []
    before = view.link_before
    moved = [s for s in view.installs if s.data.get("symlink_after") != s.data.get("symlink_before")]
    if before and (moved or (view.link_after and view.link_after != before)):
        cmds.append(f"ln -sfn {shlex.quote(before)} {shlex.quote(_cuda_link(report, view))}")
    return cmds + [f"rm -rf {shlex.quote(s.data['toolkit_path'])}" for s in view.installs]


def _cuda_link(report: Report, view: ToolkitView) -> str:
    """Where the host's `cuda` link lies: beside the installed toolkit."""
    for s in view.installs:
        m = re.fullmatch(r"(.*)/usr/local/cuda-[\d.]+", s.data["toolkit_path"])
        if m:
            return m.group(1) + "/usr/local/cuda"
    return "/usr/local/cuda"
