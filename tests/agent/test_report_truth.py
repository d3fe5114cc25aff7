"""The report's toolkit view and rollback come from the recorded states, before and after.

A scripted model drives the real tools on a simulated GPU host through an interactive gate, as a chat does:
a backup first (no inspection: the state before is the backup's own system reading), the 13.0 toolkit, an
approved `ln -sfn` of the `cuda` link to it, then the final state read as the end of a chat records it. A
second session restores the backup with `system: true`, which removes the toolkit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import ScriptedOperator, registry, section, table_rows

from agent.loop import Session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter
from agent.report import build_report, render_markdown
from agent.safety.policy import ApprovalAnswer, SafetyPolicy
from tools.base import ArtifactStore, ToolContext
from tools.hosts import HostPool
from tools.inspect_host import InspectHost
from tools.sim import build_sim

from helpers import events

OLD, NEW, LINK = "/usr/local/cuda-12.8", "/usr/local/cuda-13.0", "/usr/local/cuda"


def record_final_state(session: Session, pool: HostPool, sim) -> None:
    ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(None), store={})
    final = InspectHost().run(ctx, InspectHost().parse_args({"host": "sim"}))
    freeze = pool.get("sim").run(f"{sim.python} -m pip freeze --all")
    session.emit("final_state", host="sim", python=sim.python, freeze=freeze.stdout,
                 inspect=final.model_dump(mode="json"), error=None)


def chat_session(path: Path, sim, script: list, answers: dict) -> Session:
    operator = ScriptedOperator(answers)
    pool = HostPool([sim.host_spec()])
    session = Session(model=ScriptedModel(script), registry=registry(),
                      gate=SafetyPolicy(scope={"sim"}, mode="interactive", approver=operator),
                      transcript=TranscriptWriter(path), hosts=pool, start_info={"command": "chat"})
    operator.session = session
    return session


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("linked")
    sim = build_sim(tmp / "gpu")
    runfile = {"host": "sim", "runfile": sim.runfiles["13.0"].url, "version": "13.0", "checksum": sim.runfiles["13.0"].md5}
    path = tmp / "chat.jsonl"
    session = chat_session(path, sim, [
        turn(calls=[("pip_freeze_backup", {"host": "sim"})]),
        turn(calls=[("install_runfile", runfile)]),
        turn(calls=[("ssh_exec", {"host": "sim", "command": f"ln -sfn {NEW} {LINK}"})]),
        turn("CUDA 13.0 is installed and the cuda link points at it."),
    ], {"install_runfile": ApprovalAnswer.YES_ONCE, "ln -sfn": ApprovalAnswer.YES_ONCE})
    assert session.send("install CUDA 13.0 and point cuda at it").status == "done"
    record_final_state(session, HostPool([sim.host_spec()]), sim)
    session.close("done", "operator left")
    return path, sim


def test_the_state_before_is_the_backups_system_reading_when_nothing_was_inspected_first(linked):
    path, _ = linked
    md = render_markdown(build_report(path))
    backup = events(path, "backup")[0]["backup_id"]
    assert f"Before: the system reading of backup {backup} (turn 1, call 1, system.txt)" in md
    assert table_rows(md, f"`{OLD}`") == [[f"`{OLD}`", "`12.8`", "yes", "yes", "unchanged"]]
    assert table_rows(md, f"`{NEW}`") == [[f"`{NEW}`", "`13.0`", "no", "yes", "added"]]


def test_a_link_moved_by_a_command_is_read_from_the_final_state_and_pointed_back_first(linked):
    path, sim = linked
    md = render_markdown(build_report(path))
    assert f"`cuda` symlink: `{OLD}` before, `{NEW}` after (moved)." in md
    assert "nvcc on PATH: `not recorded` before, `13.0" in md, section(md, "What changed")
    toolkits = section(md, "Rollback").split("CUDA toolkits on `sim`", 1)[1].split("```sh\n", 1)[1]
    commands = toolkits.split("\n```", 1)[0].splitlines()
    assert commands == [f"ln -sfn {OLD} {LINK}", f"rm -rf {NEW}"]  # the link back before its target goes
    host = HostPool([sim.host_spec()]).get("sim")
    for command in commands:
        assert host.run(command).ok, command
    assert host.run(f"readlink {LINK}").stdout.strip() == OLD and host.run(f"test -e {OLD}/bin/nvcc").ok
    assert not host.run(f"test -e {NEW}").ok


def test_a_restore_of_the_system_state_reports_what_it_removed(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    runfile = {"host": "sim", "runfile": sim.runfiles["13.0"].url, "version": "13.0", "checksum": sim.runfiles["13.0"].md5}
    path = tmp_path / "restore.jsonl"
    session = chat_session(path, sim, [
        turn(calls=[("pip_freeze_backup", {"host": "sim"})]),
        turn(calls=[("install_runfile", runfile)]),
        turn("installed"),
    ], {"install_runfile": ApprovalAnswer.YES_ONCE, "restore_backup": ApprovalAnswer.YES_ONCE})
    assert session.send("install CUDA 13.0").status == "done"
    backup = events(path, "backup")[0]["backup_id"]
    session.model = ScriptedModel([turn(calls=[("restore_backup", {"host": "sim", "backup_id": backup, "system": True})]),
                                   turn("rolled back")])
    assert session.send("roll it back").status == "done"
    session.close("done", "operator left")
    (restore,) = [e for e in events(path, "tool_result") if e["tool"] == "restore_backup"]
    assert f"rm -rf {NEW}" in restore["data"]["system_commands"], restore["data"]
    # The terminal's rows say it too (they said "removed: nothing" after a restore that removed a toolkit).
    from app.ui.results import result_rows

    rows = dict(result_rows("restore_backup", restore["data"]))
    assert f"rm -rf {NEW}" in rows["system"] and rows["removed"] != "nothing", rows
    md = render_markdown(build_report(path))
    verified = section(md, "Verified")
    assert f"ran on the system state: rm -rf {NEW}" in verified.replace("\\", ""), verified
    # Without a final state, what the restore ran says the after: the toolkit is gone again.
    assert "the install_runfile and restore_backup results" in md.replace("\\", "")
    # No reading says 12.8's version here (a system reading lists paths): not guessed.
    assert not table_rows(md, f"`{NEW}`") and table_rows(md, f"`{OLD}`") == [[f"`{OLD}`", "`?`", "yes", "yes",
                                                                               "unchanged"]]
