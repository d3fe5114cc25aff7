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
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

from agent.record.transcript import default_transcript_dir, first_event, line_hash, session_index
from agent.report.build import MAX_PARTS, operator_request
from app.exit_codes import ExitCode
from tools.hosts.sim import is_sim_root

TAIL_BYTES = 256 * 1024  # the end of a transcript that holds its goal_result and session_end
HEAD_BYTES = 256 * 1024  # the start of a chat, where its first request lies


def list_sessions(args) -> int:
    where = Path(args.dir) if args.dir else default_transcript_dir()
    if getattr(args, "prune", False):
        return prune(where, args.older_than, args.dry_run, args.json)
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


def transcript_paths(where: Path) -> list[Path]:
    """The transcripts of `where`, and (for the default directory) those the product wrote elsewhere, as the
    session index lists them (agent/record/transcript.py remember_session); newest first."""
    paths = set(where.glob("*.jsonl")) if where.is_dir() else set()
    if where == default_transcript_dir():
        try:
            listed = session_index().read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            listed = []
        paths |= {Path(line) for line in listed if line.strip()}
    dated = []
    for p in paths:
        try:
            if p.is_file():
                dated.append((p.stat().st_mtime, p))
        except OSError:
            continue
    return [p for _, p in sorted(dated, key=lambda d: d[0], reverse=True)]


def sessions(where: Path) -> list[dict]:
    """Every transcript of `where` (and of the session index), newest first, as a summary."""
    found = [s for s in (summary(p) for p in transcript_paths(where)) if s is not None]
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
    if command == "fleet" and "plan" in start:  # a rollout's record: what became of its hosts
        reason = _rollout_outcome(tail, start) or reason
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


def _rollout_outcome(tail: list[dict], start: dict) -> str:
    """A rollout's hosts by how they ended (`--check`: what would happen), from its fleet_host events."""
    hosts: dict[str, str] = {}
    for e in tail:
        if e.get("type") == "fleet_host" and e.get("host"):
            hosts[e["host"]] = e.get("ended") or e.get("status") or "?"
    counts: dict[str, int] = {}
    for ended in hosts.values():
        counts[ended] = counts.get(ended, 0) + 1
    said = ", ".join(f"{n} {k}" for k, n in counts.items())
    return (f"--check: {said}" if (start.get("plan") or {}).get("check") else said) if said else ""


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


# --------------------------------------------------------------------------- --prune


def prune(where: Path, older_than_days: float, dry_run: bool, as_json: bool) -> int:
    """Remove the simulated hosts of the sessions that no longer need them: those started more than
    `older_than_days` ago, and finished or failed runs, demos and rollouts of any age. A simulated host a session
    that can still be resumed (an interrupted run, any chat, a stopped rollout) goes on on is kept, whatever else
    names it; transcripts and reports are the record, and are never removed."""
    if older_than_days < 0:
        print(f"agent: --older-than {older_than_days:g}: give a number of days, 0 or more", file=sys.stderr)
        return ExitCode.USAGE
    cutoff = time.time() - older_than_days * 86400
    keep: set[Path] = set()
    drop: dict[Path, str] = {}  # a sim's root -> the session it was made for
    for s in sessions(where):
        roots = sim_roots(Path(s["path"]))
        # A chat goes on however it ended; a stopped run or rollout can be resumed. An earlier part of a resumed
        # session shares its sims with the later part, whose own status decides.
        needed = s["command"] == "chat" or s["status"] == "interrupted"
        if (s["session_started"] or s["started"] or 0) < cutoff or not needed:
            drop.update({root: s["path"] for root in roots})
        else:
            keep.update(roots)
    if not dry_run:
        _compact_index()
    removed, freed = [], 0
    for root, session in sorted(drop.items()):
        if root in keep:
            continue
        size = _size(root)
        if not dry_run:
            shutil.rmtree(root, onerror=_writable_then_retry)
            if root.exists():
                print(f"agent: could not remove all of {root}", file=sys.stderr)
                continue
        removed.append({"sim": str(root), "session": session, "bytes": size})
        freed += size
    if as_json:
        print(json.dumps({"removed": removed, "freed_bytes": freed, "dry_run": dry_run}, indent=2))
        return ExitCode.OK
    for r in removed:
        print(f"{'would remove' if dry_run else 'removed'} {r['sim']} ({_mib(r['bytes'])}, of {r['session']})")
    verb = "would free" if dry_run else "freed"
    print(f"{len(removed)} simulated host{'s' * (len(removed) != 1)}, {verb} {_mib(freed)}; "
          f"{len(keep)} kept for sessions that can still be resumed; transcripts and reports are kept")
    return ExitCode.OK


def _compact_index() -> None:
    """The session index without the transcripts that are gone, each listed once."""
    index = session_index()
    try:
        listed = index.read_text(encoding="utf-8", errors="replace").splitlines()
        there = [line for line in dict.fromkeys(listed) if line.strip() and Path(line).is_file()]
        if len(there) != len(listed):
            tmp = index.with_name(index.name + ".tmp")
            tmp.write_text("".join(f"{line}\n" for line in there), encoding="utf-8")
            os.replace(tmp, index)
    except OSError:
        pass


def sim_roots(path: Path) -> set[Path]:
    """The simulated hosts a session ran on, as its first line records them (a rollout: every host under its
    `sims` folder), each only if it is one: a folder with a sim's state in it, nothing else is ever removed."""
    start = first_event(path) or {}
    named = [Path(str(r)) for r in (start.get("sim_roots") or {}).values()]
    sims = (start.get("plan") or {}).get("sims") if start.get("command") == "fleet" else None
    if sims and Path(str(sims)).is_dir():
        named += [p for p in Path(str(sims)).iterdir()]
    return {p for p in named if not p.is_symlink() and is_sim_root(p)}  # removed: never through a link


def _size(root: Path) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):  # links are not followed: only the sim's own files count
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


def _writable_then_retry(func, path, _exc) -> None:
    """A sim has read-only folders (as a real /usr has): made writable by their owner, then removed."""
    try:
        os.chmod(os.path.dirname(path), 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
        func(path)
    except OSError:
        pass


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
