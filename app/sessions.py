"""`agent sessions`: the recent sessions of the transcript directory, and how to resume a stopped run.

Each transcript is read at its two ends only (its first line, and the last lines), so listing a
directory of long sessions stays quick. Status:

- finished: it closed with its final answer (a run: with exit code 0);
- interrupted: stopped by Ctrl-C or a signal, or killed (no end event at all); a run can be resumed (a chat
  can be resumed however it ended: the conversation goes on);
- resumed: a later part goes on from it (named): that part is the one to resume, and it lists the session's
  first goal or request and how many parts it has;
- failed: any other end (goal not met, refused, budget, model server, crash, hosts not reached).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from agent.record.transcript import default_transcript_dir, first_event, line_hash
from agent.report.build import MAX_PARTS, operator_request
from app.exit_codes import ExitCode

TAIL_BYTES = 256 * 1024  # the end of a transcript that holds its goal_result and session_end
HEAD_BYTES = 256 * 1024  # the start of a chat, where its first request lies


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
        if s.get("parts", 1) > 1:
            print(f"      part {s['parts']} of a resumed session, which began in {s['resumes_first']}")
        if s.get("link_problem"):
            print(f"      the link to the part it resumes does not hold: {s['link_problem']}")
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
    resumed_by = {s["resumes"]: s["path"] for s in found
                  if s.get("resumes") and (s["parts"] > 1 or not s.get("link_problem"))}  # a link that holds
    for s in found:
        later = resumed_by.get(s["path"])
        if later is not None:
            # The session goes on in the later part: that is the one to resume, never this one again (a second
            # resume of it would fork the story).
            s["resumed_by"] = later
            s.pop("resume", None)
            s["status"] = "resumed"
    return found


def summary(path: Path) -> dict | None:
    """One transcript's status, hosts, goal and start; None when it is not a transcript."""
    start = first_event(path)
    if start is None or start.get("type") != "session_start":
        return None
    tail = _last_events(path)
    end = next((e for e in reversed(tail) if e.get("type") == "session_end"), None)
    result = next((e for e in reversed(tail) if e.get("type") == "goal_result"), None)
    command = start.get("command") or "chat"
    status, reason = _status(end, result)
    chain, link_problem = _earlier_parts(path, start)
    first_path, first = chain[0] if chain else (path, start)
    # The session's title is its first part's: the goal, or a chat's first request (not the note a resumed
    # part starts with).
    goal = " ".join(str(first.get("goal") or _first_request(first_path) or "").split())
    out = {"path": str(path.absolute()), "status": status, "reason": reason, "command": command,
           "hosts": list(start.get("hosts") or []), "goal": goal[:100] + ("..." if len(goal) > 100 else ""),
           "started": start.get("t"), "ended": end.get("t") if end else None,
           "resumes": str(chain[-1][0].absolute()) if chain else (start.get("resumes") or {}).get("path"),
           "parts": len(chain) + 1, "session_started": first.get("t"), "resumes_first": str(first_path.absolute())}
    if link_problem:
        out["link_problem"] = link_problem
    if (status == "interrupted" and command == "run" and start.get("goal_file")) or command == "chat":
        out["resume"] = f"agent resume {shlex.quote(str(path.absolute()))}"  # a chat goes on however it ended
    return out


def _earlier_parts(path: Path, start: dict) -> tuple[list[tuple[Path, dict]], str | None]:
    """The parts this one resumes, oldest first, each with its session_start, and the problem with a link
    (None: each holds). Read at their ends only: a link holds when the earlier file's last line has the hash
    and seq the link recorded (`agent show --verify` checks the whole chain of each)."""
    chain: list[tuple[Path, dict]] = []
    seen = {path.absolute()}
    while isinstance(start.get("resumes"), dict) and len(chain) < MAX_PARTS:
        link = start["resumes"]
        recorded = Path(str(link.get("path", "")))
        earlier = next((c for c in (recorded, path.parent / recorded.name) if c.is_file()), None)
        if earlier is None:
            return chain, f"the earlier part {recorded} is not there (nor beside this transcript)"
        if earlier.absolute() in seen:
            return chain, f"the earlier part {earlier} links back to a later one"
        last = _last_line(earlier)
        if last is None or line_hash(last) != link.get("last_hash"):
            return chain, f"the earlier part {earlier} was changed after this part began: its last line's hash differs"
        earlier_start = first_event(earlier)
        if earlier_start is None:
            return chain, f"the earlier part {earlier} has no session_start"
        chain.insert(0, (earlier, earlier_start))
        seen.add(earlier.absolute())
        path, start = earlier, earlier_start
    return chain, None


def _first_request(path: Path) -> str | None:
    """A chat's first request: the first user note near the start of its first part."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    for line in head.split(b"\n")[1:]:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("type") == "note" and ev.get("kind") == "user":
            return operator_request(str(ev.get("text") or ""))
    return None


def _last_line(path: Path) -> bytes | None:
    """The last whole line of a file (what a resumed part's link hashes), None when it has none."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read()
    except OSError:
        return None
    lines = [line for line in data.split(b"\n") if line.strip()]
    if data and not data.endswith(b"\n") and lines:
        try:
            json.loads(lines[-1])
        except ValueError:
            lines.pop()  # a last line cut short by a kill: the link names the one before it
    return lines[-1] if lines else None


def _status(end: dict | None, result: dict | None) -> tuple[str, str]:
    if end is None:
        return "interrupted", "the process ended without closing its record"
    status, reason = end.get("status"), end.get("reason") or ""
    if status == "interrupted":
        return "interrupted", reason
    if result is not None:
        return ("finished" if result.get("exit_code") == 0 else "failed"), result.get("reason") or ""
    return ("finished" if status == "done" else "failed"), reason if status != "done" else ""


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
