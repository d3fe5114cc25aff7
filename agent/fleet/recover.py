"""A host a killed rollout left mid-way, put back from its verified backup before it is rolled over again.

SIGINT and SIGTERM let a rollout finish the running step and restore the host (agent/fleet/rollout.py). A
SIGKILL, a crash of the machine or an OOM kill leaves the host's transcript without an end: `agent fleet
--resume` reads it (`killed_midway`) and, where a change had begun, restores the host in a session of its own
(`restore_killed`) from the backup that transcript recorded, once the transcript verifies (chain and seal) and
the backup's files on the host still match the hashes recorded when it was taken. The restored host is then
rolled over again like any other; a host that cannot be restored is failed, and says why.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from agent.fleet.host import FAILED, RESTORED, ROLLBACK_REQUEST, HostOutcome, RecipeModel, host_goal, last_line_hash
from agent.fleet.recipe import Recipe
from agent.goal import HostEntry

# What the host's record may show without anything of its stack having changed: the backup writes only under
# the backup directory, a benchmark reads. A drain is a change to the scheduler, not to the stack (see below).
_NOT_THE_STACK = ("pip_freeze_backup", "run_bench", "drain_node", "undrain_node")
KILLED_WHY = "the earlier rollout was killed while this host was being changed"


def killed_midway(events: list[dict]) -> str | None:
    """What a host's record without an outcome calls for: "restore" (a change to its stack began and no restore
    ended after it), "drained" (we drained it and never put it back: left for the operator), or None (as it
    was: roll it over again)."""
    results = {(e.get("turn"), e.get("call_id")): e for e in events if e.get("type") == "tool_result"}
    state = None
    drained = False
    for e in events:
        if e.get("type") != "intent":
            continue
        result = results.get((e.get("turn"), e.get("call_id")))
        ok = bool(result and result.get("ok"))
        tool = e.get("tool")
        if tool == "drain_node":
            drained = drained or ok or result is None
        elif tool == "undrain_node":
            drained = drained and not ok
        elif tool == "restore_backup":
            state = None if ok else "restore"
        elif tool not in _NOT_THE_STACK:
            state = "restore"
    return state or ("drained" if drained else None)


def recorded_backup(events: list[dict], host: str):
    """The last verified backup of `host` a record holds: one its session took, or one an earlier restore
    session was given (its `resumed` event)."""
    from tools.base import BackupRecord  # lazy: with a resume

    found = None
    fields = BackupRecord.model_fields
    for e in events:
        candidates = [e] if e.get("type") == "backup" else \
            list(e.get("backups") or []) if e.get("type") == "resumed" else []
        for c in candidates:
            if c.get("host") == host and c.get("verified"):
                found = BackupRecord.model_validate({k: v for k, v in c.items() if k in fields})
    return found


def restore_killed(recipe: Recipe, entry: HostEntry, killed: Path, transcript: Path, batch: int,
                   stop: threading.Event, sim_dir: Path | None, start_info: dict):
    """`entry` put back from the backup `killed` (its transcript, without an end) recorded, in a session recorded
    in `transcript`: a HostOutcome, RESTORED when it is as it was, FAILED with why when not."""
    from agent.finish import read_end  # lazy: the fleet's start-up stays small
    from agent.loop import Outcome  # lazy: with a session
    from agent.preflight import reach_hosts  # lazy: as above
    from agent.record.transcript import TranscriptError, read_part, untrusted, verify  # lazy: with a resume
    from agent.session_builder import build_session  # lazy: loads the model SDK's types
    from tools.base import ToolError  # lazy: as above
    from tools.hosts import HostError  # lazy: as above
    from tools.pip_freeze_backup import read_backup  # lazy: as above

    began = time.monotonic()
    goal = host_goal(recipe, entry)
    model = RecipeModel(recipe, entry.name, stop)
    built = build_session(hosts=goal.hosts, model=model, mode="scripted", authorizations=goal.authorizations,
                          baselines=goal.baselines(), budget=goal.budget, transcript=transcript,
                          listeners=[model.listen], sim_dir=sim_dir,
                          start_info={"goal": goal.goal, "command": "fleet", "restores_after_kill": str(killed),
                                      **start_info})
    session = built.session
    status, reason = FAILED, ""
    with session.closing():
        refused = untrusted(killed, verify(killed), False, "a restore after a kill")
        record = None
        if refused is None:
            try:
                record = recorded_backup(read_part(killed).events, entry.name)
            except TranscriptError as e:
                refused = f"{killed}: {e}"
        unreached = reach_hosts(session.hosts, [entry.name]) if refused is None else []
        if refused is not None:
            reason = f"{KILLED_WHY}, and its record cannot be trusted for a restore: {refused}"
        elif unreached:
            reason = f"{KILLED_WHY}, and it cannot be reached now: {unreached[0].problem}"
        elif record is None:
            reason = f"{KILLED_WHY} before its backup verified: restore it by hand (`agent show {killed}`)"
        else:
            try:
                read_backup(session.hosts.get(entry.name), record.backup_id, record)
            except (HostError, ToolError) as e:
                reason = f"{KILLED_WHY}, and its backup is no longer usable: {e}"
            else:
                # The backup as the killed session's verified record holds it, so the gate lets it be restored.
                session.resume_from({"from": str(killed), "backups": [record.model_dump(mode="json")],
                                     "changed_hosts": [entry.name]})
                model.backup_id = record.backup_id
                outcome = session.send(ROLLBACK_REQUEST.format(why=KILLED_WHY))
                if model.rolled_back:
                    status, reason = RESTORED, f"{KILLED_WHY}; restored from its backup {record.backup_id}"
                else:
                    reason = f"{KILLED_WHY}; THE RESTORE FAILED: the host is half-changed, see {transcript}"
                read_end(session, goal, outcome, run_checks=False)  # what the host shows now
                session.ending = outcome
        if model.backup_id is None:  # nothing was sent: the session ends with why
            session.ending = Outcome("preflight" if refused or unreached else "done", reason)
        session.emit("goal_result", met=False, verdict="not met", exit_code=0 if status == RESTORED else 1,
                     reason=reason, checks_ok=None, fleet_status=status, gate=None, rolled_back=model.rolled_back)
    return HostOutcome(host=entry.name, status=status, reason=reason, batch=batch, transcript=str(transcript),
                       last_hash=last_line_hash(transcript), rolled_back=model.rolled_back,
                       duration_s=round(time.monotonic() - began, 3))
