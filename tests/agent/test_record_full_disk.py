"""A record that cannot be written ends the run in one line, with exit 6, and runs nothing more.

The disks are real: /dev/full, and a tiny tmpfs mounted in a user and mount namespace of its own
(`unshare -rm`), sized so that the session's first lines fit and a tool's result or its artifact
does not. What was written stays a valid hash chain, closed by its session_end when that fits.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.budget import Budget
from agent.errors import RecordWriteError
from agent.loop import Session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter, iter_events, verify, write_failure_line
from agent.safety.policy import SafetyPolicy
from tools.base import Action, ArtifactStore, Registry, Risk, RiskClass, StrictArgs, Tool

from fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]
PAGE = 4096
pytestmark = pytest.mark.timeout(180)


def agent_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def goal_file(tmp_path: Path) -> Path:
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: show what a file holds\nhosts: [{name: local, transport: local}]\nbudget: {turns: 4}\n")
    return goal


def script_printing(path: Path) -> list[Reply]:
    """A model that prints a file, then would print it again: the second step must never be asked for."""
    call = ("ssh_exec", {"host": "local", "command": f"cat {path}"})
    return [Reply(calls=[call]), Reply(calls=[call]), Reply(text="done")]


def run_agent(args: list[str], small_disk: Path | None = None, size: int = 0,
              copy_to: Path | None = None) -> subprocess.CompletedProcess:
    """`agent ARGS`, on a tmpfs of `size` bytes mounted at `small_disk` when one is given (its files are
    copied to `copy_to` afterwards: the mount is gone with the namespace)."""
    command = [sys.executable, "-m", "app.cli", *args]
    if small_disk is not None:
        script = ('mount -t tmpfs -o "$3" tmpfs "$1" || exit 90; disk=$1 copy=$2; shift 3; "$@"; rc=$?; '
                  'cp -a "$disk"/. "$copy"/; exit $rc')
        options = f"size={size}" if size else "ro,size=64k"
        command = ["unshare", "-rm", "sh", "-c", script, "sh", str(small_disk), str(copy_to), options, *command]
    return subprocess.run(command, capture_output=True, text=True, env=agent_env(), timeout=120, cwd=ROOT)


def namespaces_allowed() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif(not namespaces_allowed(),
                                      reason="this machine does not allow a user and mount namespace (unshare -rm)")


def line_sizes(transcript: Path) -> list[tuple[str, int]]:
    return [(json.loads(line)["type"], len(line)) for line in transcript.read_bytes().splitlines(keepends=True)]


def room_for_the_start(tmp_path: Path, printed: Path) -> int:
    """Bytes of a tmpfs that hold the session's lines before its first tool result, plus two pages for its end.

    Measured on a run of the same script to an ordinary disk, so the test follows the schemas as they grow.
    """
    measured = tmp_path / "measured.jsonl"
    with FakeOpenAI(script_printing(printed)) as model:
        run_agent(["run", str(goal_file(tmp_path)), "--base-url", model.base_url, "--transcript", str(measured)])
    sizes = line_sizes(measured)
    first_result = [t for t, _ in sizes].index("tool_result")
    start = sum(n for _, n in sizes[:first_result])
    assert sizes[first_result][1] > 3 * PAGE  # the result cannot fit in the room left for the end
    return (math.ceil(start / PAGE) + 2) * PAGE


def assert_one_line(stderr: str, *parts: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])


# --------------------------------------------------------------------------- real disks


def test_a_transcript_on_a_full_device_ends_the_run_before_anything_runs(tmp_path):
    with FakeOpenAI(script_printing(tmp_path)) as model:
        r = run_agent(["run", str(goal_file(tmp_path)), "--base-url", model.base_url, "--transcript", "/dev/full"])
        asked = len(model.requests)
    assert r.returncode == 6, r.stderr
    assert_one_line(r.stderr, "agent: could not write the transcript /dev/full (event 0, session_start)",
                    "No space left on device (ENOSPC)", "free space on /dev or choose another path with --transcript")
    assert asked == 0


def run_on_small_disk(tmp_path, printed, size: int):
    """`agent run` of a model that has `printed` shown, its transcript on a filesystem of `size` bytes
    (0: read-only); (the process, how many requests the model got, the disk, the copy kept of it)."""
    disk, copy = tmp_path / "disk", tmp_path / "copy"
    disk.mkdir()
    copy.mkdir()
    with FakeOpenAI(script_printing(printed)) as model:
        r = run_agent(["run", str(goal_file(tmp_path)), "--base-url", model.base_url, "--transcript",
                       str(disk / "t.jsonl")], disk, size, copy)
        return r, len(model.requests), disk, copy


@needs_namespaces
def test_a_disk_that_fills_up_under_a_tool_result_stops_the_session_and_keeps_a_valid_chain(tmp_path):
    printed = tmp_path / "printed.txt"
    printed.write_text("x" * 11_999 + "\n")  # under the model's limit: no artifact, only the result's line
    r, asked, disk, copy = run_on_small_disk(tmp_path, printed, room_for_the_start(tmp_path, printed))
    seq = [t for t, _ in line_sizes(tmp_path / "measured.jsonl")].index("tool_result")  # as the schemas have it
    assert r.returncode == 6, r.stderr
    assert_one_line(r.stderr, f"agent: could not write the transcript {disk / 't.jsonl'} (event {seq}, tool_result)",
                    "No space left on device (ENOSPC)", f"free space on {disk} or choose another path with --transcript")
    assert asked == 1  # the model was never asked for a next step
    report = verify(copy / "t.jsonl")
    assert report.ok and report.ended, report  # the partial line was cut off, and the end still fit
    types = [e["type"] for e in iter_events(copy / "t.jsonl")]
    assert "tool_result" not in types and types.count("tool_start") == 1 and types[-1] == "session_end"


@needs_namespaces
def test_an_artifact_that_does_not_fit_stops_the_session_and_is_named(tmp_path):
    printed = tmp_path / "printed.txt"
    printed.write_text("".join(f"line {i:05d} of a long output\n" for i in range(1_500)))  # kept as an artifact
    r, asked, disk, copy = run_on_small_disk(tmp_path, printed, room_for_the_start(tmp_path, printed))
    assert r.returncode == 6, r.stderr
    artifact = disk / "t.artifacts" / "00001-call_1_0-stdout.txt"
    assert_one_line(r.stderr, f"agent: could not write the artifact {artifact}", "No space left on device (ENOSPC)",
                    f"free space on {disk} or choose another path with --transcript")
    assert asked == 1
    assert not list((copy / "t.artifacts").glob("*")), "a partial artifact is not left behind"
    report = verify(copy / "t.jsonl")
    assert report.ok and report.ended, report


@needs_namespaces
def test_a_read_only_filesystem_is_one_line_and_nothing_runs(tmp_path):
    r, asked, disk, copy = run_on_small_disk(tmp_path, tmp_path, 0)
    assert r.returncode == 6, r.stderr
    assert_one_line(r.stderr, f"agent: could not write the transcript {disk / 't.jsonl'}",
                    "Read-only file system (EROFS)", f"{disk} is mounted read-only: choose another path with --transcript")
    assert asked == 0


# --------------------------------------------------------------------------- the session, in process


class SavesAnArtifact(Tool):
    """Saves its output beside the transcript."""

    name = "save_output"

    class Args(StrictArgs):
        host: str

    class Result(StrictArgs):
        saved: str | None

    def action(self, args):
        return Action(host=args.host, subject=f"save on {args.host}",
                      risk=Risk(cls=RiskClass.READ_ONLY, rule="test", reason="writes only beside the transcript"))

    def run(self, ctx, args):
        return self.Result(saved=ctx.artifacts.save(f"{ctx.call_id}-out.txt", "x" * 100))


def test_an_artifact_lost_in_a_batch_of_several_calls_stops_the_session_after_that_batch(tmp_path):
    """Calls of one batch run on threads; a failed artifact there still stops the session at the batch's end."""
    path = tmp_path / "t.jsonl"
    (tmp_path / "t.artifacts").write_text("a file where the artifacts' folder should be")  # mkdir fails: EEXIST
    calls = [("save_output", {"host": f"h{i}"}) for i in range(3)]
    model = ScriptedModel([turn(calls=calls), turn(calls=calls), turn("done")])
    session = Session(model=model, registry=Registry([SavesAnArtifact()]), gate=SafetyPolicy(scope={"h0", "h1", "h2"}),
                      transcript=TranscriptWriter(path), budget=Budget(turns=5))
    with pytest.raises(RecordWriteError, match=r"could not write the artifact .*t\.artifacts/0000\d-call"):
        with session.closing():
            session.send("go")
    events = list(iter_events(path))
    assert [e["type"] for e in events].count("model_request") == 1  # no second turn
    assert events[-1]["type"] == "session_end" and "RecordWriteError" in events[-1]["reason"]
    assert verify(path).ok


def test_once_a_line_could_not_be_written_only_the_end_is_tried(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = TranscriptWriter(path)
    writer.write("note", kind="test", text="kept")
    real = writer._file
    writer._file = open("/dev/full", "ab", buffering=0)  # noqa: SIM115 - the next write meets a full device
    with pytest.raises(RecordWriteError, match=r"\(event 1, note\): No space left on device \(ENOSPC\)"):
        writer.write("note", kind="test", text="lost")
    writer._file.close()
    writer._file = real
    with pytest.raises(RecordWriteError, match="event 1, note"):  # the first reason stands; nothing is written
        writer.write("note", kind="test", text="a later step")
    writer.write("session_end", status="crashed", reason="the record could not be written")
    report = verify(path)
    assert report.ok and report.ended and report.events == 2, report


@pytest.mark.parametrize("code, advice", [
    (errno.ENOSPC, "free space on / or choose another path with --transcript"),
    (errno.EDQUOT, "free space within your disk quota on / or choose another path with --transcript"),
    (errno.EROFS, "/ is mounted read-only: choose another path with --transcript"),
    (errno.EACCES, "/no-such-records-dir is not writable by this user: choose another path with --transcript"),
    (errno.EIO, "the disk under / reported an I/O error (see dmesg): choose another path with --transcript"),
])
def test_each_reason_says_what_to_do(code, advice):
    line = write_failure_line("the transcript /no-such-records-dir/t.jsonl", Path("/no-such-records-dir/t.jsonl"),
                              OSError(code, os.strerror(code)))
    assert line == (f"could not write the transcript /no-such-records-dir/t.jsonl: {os.strerror(code)} "
                    f"({errno.errorcode[code]}); {advice}")
    assert "\n" not in line


def test_the_artifact_store_remembers_its_first_failure_and_saves_nothing_after(tmp_path):
    root = tmp_path / "t.artifacts"
    root.write_text("not a folder")
    store = ArtifactStore(root)
    assert store.save("a.txt", "x") is None and store.subdir("backup") is None
    target, error = ArtifactStore.failure(root)
    assert target == root / "00001-a.txt" and isinstance(error, OSError)
    root.unlink()
    assert store.save("b.txt", "y") is None and not root.exists()  # the record already lacks one: no more


def test_a_backup_copy_that_cannot_be_written_whole_leaves_no_part_of_it(tmp_path):
    store = ArtifactStore(tmp_path / "t.artifacts")
    (tmp_path / "t.artifacts" / "backup-x" / "freeze.txt").mkdir(parents=True)  # that file cannot be written
    assert store.save_folder("backup-x", {"manifest.json": b"{}", "freeze.txt": b"torch==2.10.0"}) is None
    assert not (tmp_path / "t.artifacts" / "backup-x" / "manifest.json").exists()
    target, error = ArtifactStore.failure(tmp_path / "t.artifacts")
    assert target.name == "freeze.txt" and isinstance(error, IsADirectoryError)
    assert ArtifactStore(tmp_path / "elsewhere").save_folder("b", {"f": b"x"}) == (
        tmp_path / "elsewhere" / "b", "elsewhere/b")
