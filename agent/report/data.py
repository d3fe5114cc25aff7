"""What a report states, as collected from a transcript: the steps, the backups and the views derived from them.

Plain dataclasses and nothing else. `build.build_report` fills them in one pass over the
transcript; every layer above (the rollback commands, the format-neutral document, the
Markdown and HTML renderers) reads them and never goes back to the transcript, so all
formats tell the same story from the same facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.record.transcript import VerifyReport
from tools.system_state import CUDA_LINK, SystemState


@dataclass
class Step:
    """One tool call with everything recorded about it: arguments, decision, approvals, result."""

    turn: int
    index: int
    tool: str
    arguments: Any
    host: str | None = None
    subject: str = ""
    risk: str | None = None
    verdict: str | None = None  # allow | deny | skip | malformed
    rule: str | None = None
    reason: str | None = None
    approved_by: str | None = None
    backup_id: str | None = None
    approvals: list[dict] = field(default_factory=list)  # the operator's answers (approval events)
    status: str | None = None  # ok | error | refused | skipped | malformed | cancelled | crashed
    ok: bool = False
    content: str = ""
    data: dict | None = None
    error: str | None = None
    duration_s: float | None = None
    part: int | None = None  # which part of a resumed session (1 is the first); None: a session of one part

    @property
    def where(self) -> str:
        # Each part numbers its turns from 1, so a resumed session's steps say their part too.
        return (f"part {self.part}, " if self.part else "") + f"turn {self.turn}, call {self.index + 1}"

    @property
    def succeeded(self) -> bool:
        return self.ok and self.status == "ok" and isinstance(self.data, dict)


@dataclass
class Backup:
    """A pip_freeze_backup result and the freeze it holds (read from the copy beside the transcript)."""

    step: Step
    backup_id: str
    host: str
    python: str
    remote_dir: str
    local_dir: Path | None  # the copy that was found, None if none was
    freeze: dict[str, str] | None  # normalized name -> requirement line
    missing: str | None  # why `freeze` is None
    indexes: dict[str, str | None]
    package_count: int | None
    system: SystemState | None = None  # the system reading it holds (system.txt), when the copy has a complete one


@dataclass
class PackageChange:
    name: str
    before: str | None  # the requirement line, None when absent
    after: str | None

    @property
    def change(self) -> str:
        return "added" if self.before is None else "removed" if self.after is None else "changed"


@dataclass
class PackageDiff:
    host: str
    python: str
    backup: Backup
    after_source: str | None  # where the after state comes from; None when there is none
    changes: list[PackageChange] | None  # None when before or after is unknown
    after: dict[str, str] | None = None  # the after freeze (normalized name -> requirement line), when known


@dataclass
class ToolkitRow:
    path: str
    version: str | None
    before: bool
    after: bool | None  # None: not known

    @property
    def change(self) -> str:
        if self.after is None:
            return "unknown"
        return "added" if self.after and not self.before else "removed" if self.before and not self.after \
            else "unchanged"


@dataclass
class ToolkitView:
    host: str
    before_step: Step | None  # what the state before was read from: the first inspection or the first backup
    after_source: str | None
    rows: list[ToolkitRow]
    link_before: str | None
    link_after: str | None
    on_path_before: str | None  # "none" when the inspection found none; None when not recorded
    on_path_after: str | None
    installs: list[Step]
    before_source: str | None = None  # how the state before is known, for the reader
    link_path: str = CUDA_LINK  # where the host's `cuda` link lies
    changed_by_hand: list[Step] = field(default_factory=list)  # commands that could have changed the toolkits
    after_known: bool = False  # the toolkits and link after are known (read at the end, or from the tools' results)


@dataclass
class Comparison:
    """A run_bench result with compare_to, and the baseline result it was compared with."""

    step: Step
    baseline: Step | None


@dataclass
class PartInfo:
    """One file of a session: a resumed session is several, each its own hash chain, linked oldest first."""

    number: int
    path: Path
    verification: VerifyReport
    start: dict = field(default_factory=dict)
    end: dict | None = None
    checks: int = 0


@dataclass
class Report:
    transcript: Path
    verification: VerifyReport
    start: dict
    goal: str | None
    user_messages: list[str]
    steps: list[Step]
    final_answer: str | None
    final_answer_turn: int | None
    final_answer_done: bool  # False: the model never stopped calling tools; `final_answer` is its last text
    end: dict | None
    final_states: dict[str, dict]
    checks: list[dict]
    goal_result: dict | None
    backups: list[Backup]
    timeline: list[tuple[str, Any]]  # (kind, payload) in transcript order
    # Derived from the above, so both renderers tell the same story.
    packages: list[PackageDiff] = field(default_factory=list)
    toolkits: list[ToolkitView] = field(default_factory=list)
    benchmarks: list[Step] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    parts: list[PartInfo] = field(default_factory=list)  # oldest first; the last is `transcript`
    link_problem: str | None = None  # why an earlier part was not read (its link does not hold)

    @property
    def approved(self) -> list[Step]:
        """Steps that ran because someone approved them (not read-only, not the backup rule)."""
        return [s for s in self.steps if s.verdict == "allow" and (s.approved_by or s.approvals)]

    @property
    def refused(self) -> list[Step]:
        return [s for s in self.steps if s.verdict == "deny"]

    @property
    def failed(self) -> list[Step]:
        return [s for s in self.steps if s.status in ("error", "crashed", "malformed", "cancelled")]

    @property
    def changing(self) -> list[Step]:
        """Steps that ran and could change a host."""
        return [s for s in self.steps if s.verdict == "allow" and s.risk not in ("read-only", None)
                and s.status not in ("refused", "skipped", None)]
