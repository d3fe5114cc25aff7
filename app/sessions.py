"""`agent sessions`: the recent sessions of the transcript directory, and how to resume a stopped run.

Each transcript is read at its two ends only (its first line, and the last lines), so listing a
directory of long sessions stays quick. Status:

- finished: it closed with its final answer (a run: with exit code 0);
- interrupted: stopped by Ctrl-C or a signal, or killed (no end event at all); a run can be resumed (a chat
  can be resumed however it ended: the conversation goes on);
- resumed: interrupted, and a later session goes on from it (named);
- failed: any other end (goal not met, refused, budget, model server, crash, hosts not reached).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from agent.record.transcript import default_transcript_dir
from app.exit_codes import ExitCode

TAIL_BYTES = 256 * 1024  # the end of a transcript that holds its goal_result and session_end


def list_sessions(args) -> int:
    where = Path(args.dir) if args.dir else default_transcript_dir()
    if args.limit < 1:
        print(f"agent: --limit {args.limit}: give a number of sessions, at least 1", file=sys.stderr)
        return ExitCode.USAGE
    found = sessions(where)[:args.limit]
    if args.json:
        print(json.dumps(found, indent=2))
        return ExitCode.OK
    if not found:
        print(f"no sessions in {where}")
        return ExitCode.OK
    for s in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(s["started"])) if s["started"] else "-"
        hosts = ",".join(s["hosts"]) or "-"
        print(f"{when}  {s['status']:<11} {s['command']:<6} {hosts:<16} {s['goal'] or '-'}")
        print(f"      {s['path']}" + (f"  ({s['reason']})" if s["reason"] else ""))
        if s.get("resumed_by"):
            print(f"      resumed in {s['resumed_by']}")
        if s.get("resume"):
            print(f"      resume: {s['resume']}")
    return ExitCode.OK


def sessions(where: Path) -> list[dict]:
    """Every transcript of `where`, newest first, as a summary."""
    if not where.is_dir():
        return []
    paths = sorted(where.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    found = [s for s in (summary(p) for p in paths) if s is not None]
    resumed_by = {s["resumes"]: s["path"] for s in found if s.get("resumes")}
    for s in found:
        later = resumed_by.get(s["path"])
        if later is not None and s["status"] == "interrupted":
            s["status"], s["resumed_by"] = "resumed", later
            s.pop("resume", None)
    return found


def summary(path: Path) -> dict | None:
    """One transcript's status, hosts, goal and start; None when it is not a transcript."""
    start = _first_event(path)
    if start is None or start.get("type") != "session_start":
        return None
    tail = _last_events(path)
    end = next((e for e in reversed(tail) if e.get("type") == "session_end"), None)
    result = next((e for e in reversed(tail) if e.get("type") == "goal_result"), None)
    command = start.get("command") or "chat"
    status, reason = _status(end, result)
    goal = " ".join(str(start.get("goal") or "").split())
    out = {"path": str(path.absolute()), "status": status, "reason": reason, "command": command,
           "hosts": list(start.get("hosts") or []), "goal": goal[:100] + ("..." if len(goal) > 100 else ""),
           "started": start.get("t"), "ended": end.get("t") if end else None,
           "resumes": (start.get("resumes") or {}).get("path")}
    if (status == "interrupted" and command == "run" and start.get("goal_file")) or command == "chat":
        out["resume"] = f"agent resume {shlex.quote(str(path.absolute()))}"  # a chat goes on however it ended
    return out


def _status(end: dict | None, result: dict | None) -> tuple[str, str]:
    if end is None:
        return "interrupted", "the process ended without closing its record"
    status, reason = end.get("status"), end.get("reason") or ""
    if status == "interrupted":
        return "interrupted", reason
    if result is not None:
        return ("finished" if result.get("exit_code") == 0 else "failed"), result.get("reason") or ""
    return ("finished" if status == "done" else "failed"), reason if status != "done" else ""


def _first_event(path: Path) -> dict | None:
    try:
        with open(path, "rb") as f:
            line = f.readline()
        return json.loads(line)
    except (OSError, ValueError):
        return None


def _last_events(path: Path) -> list[dict]:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read()
    except OSError:
        return []
    lines = data.split(b"\n")
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first piece may be the end of a longer line
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
