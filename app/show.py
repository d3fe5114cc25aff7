"""`agent show` (a transcript as a timeline, its report, its verification) and `agent replay`."""

from __future__ import annotations

import json
from pathlib import Path

from app.exit_codes import ExitCode
from app.exit_codes import fail as _fail


def cmd_show(args) -> int:
    from agent.record.timeline import steps  # lazy: per command
    from agent.record.transcript import TranscriptError, first_event, verify  # lazy: per command

    path = Path(args.transcript)
    if not path.exists():
        return _fail(f"no transcript at {path}")
    start = first_event(path) or {}
    if not args.verify and start.get("command") == "fleet" and "plan" in start:  # the rollout's own record (a
        return _show_fleet(path, args)  # host's session under it names its fleet, and is shown as any session)
    if args.report or args.html:
        from agent.report import build_report, render_html, write_report  # lazy: per command

        try:
            if args.report:
                print(f"report: {write_report(path)}")
            if args.html:
                render_html(build_report(path), Path(args.html))
                print(f"html: {args.html}")
        except TranscriptError as e:
            return _fail(str(e), ExitCode.FAILED)
        return ExitCode.OK
    if args.verify:
        report = verify(path)
        link, link_problem = _link_of(path)
        ok = report.ok and link_problem is None
        if args.json:
            out = {"ok": ok, "events": report.events, "status": report.status, "problems": report.problems,
                   "seal": {"state": report.seal, "sealed": report.sealed, "line": report.seal_line,
                            "key_id": report.key_id, "says": report.seal_summary()},
                   "cut_line": report.cut_line}
            if link is not None:
                out["resumes"] = {"path": str(link), "ok": link_problem is None, "problem": link_problem}
            print(json.dumps(out))
        else:
            print(f"{path}: {report.events} events, status {report.status or '-'}: "
                  + ("chain intact" if report.ok else "PROBLEMS"))
            print(f"  {report.seal_summary()}")
            if report.cut_line:
                print("  its last line was cut short (the process was killed while writing it): left out, "
                      "the lines before it checked")
            for p in report.problems:
                print(f"  {p}")
            if link is not None:
                print(f"  links to {link} (the part it resumes): " + ("intact" if link_problem is None
                                                                      else f"PROBLEM: {link_problem}"))
        return ExitCode.OK if ok else ExitCode.FAILED
    try:
        if args.json:
            for s in steps(path):
                print(json.dumps(s, ensure_ascii=False, default=str))
            return ExitCode.OK
        from agent.record.transcript import iter_events  # lazy: per command
        from app.ui import PlainPrinter  # lazy: per command

        printer = PlainPrinter(live=False)
        for ev in iter_events(path):
            printer(ev)
    except TranscriptError as e:
        return _fail(str(e), ExitCode.FAILED)
    return ExitCode.OK


def _show_fleet(path: Path, args) -> int:
    """A fleet's record shown as a fleet: its recipe, each host's outcome and transcript, the recap (it has no
    model and no turns of its own; each host's transcript is a session, shown by `agent show` of that file)."""
    from agent.record.transcript import TranscriptError, iter_events  # lazy: per command

    try:
        evs = list(iter_events(path))
    except TranscriptError as e:
        return _fail(str(e), ExitCode.FAILED)
    if args.report or args.html:
        page = path.with_suffix(".html")
        return _fail(f"{path} is a fleet's record: its report is {page}" + ("" if page.exists() else
                     " (not written: the rollout did not reach its end)") + "; `agent show HOST-TRANSCRIPT --report` "
                     "reports one host's session", ExitCode.USAGE)
    hosts = [e for e in evs if e.get("type") == "fleet_host"]
    if args.json:
        for e in hosts:
            print(json.dumps({k: v for k, v in e.items() if k not in ("v", "prev")}, default=str))
        return ExitCode.OK
    start, end = evs[0], next((e for e in reversed(evs) if e.get("type") == "session_end"), None)
    result = next((e for e in reversed(evs) if e.get("type") == "fleet_result"), {})
    print(f"fleet of {len(start.get('hosts') or [])} host(s), recipe {start.get('recipe')}")
    print(f"  goal: {' '.join(str(start.get('goal') or '-').split())}")
    for e in hosts:
        print(f"  {e.get('host')}: {e.get('ended') or e.get('status')}" + (f" ({e['reason']})" if e.get("reason") else "")
              + (f", batch {e['batch']}" if isinstance(e.get("batch"), int) and e["batch"] >= 0 else "")
              + (" (carried from the earlier part)" if e.get("carried") else ""))
        if e.get("transcript"):
            print(f"      transcript: {e['transcript']}")
    counts = ", ".join(f"{n} {k}" for k, n in (result.get("counts") or {}).items())
    print(f"  result: {counts or '-'}" + (f"; stopped: {result['stopped']}" if result.get("stopped") else ""))
    print(f"  end: {end.get('status')}: {end.get('reason')}" if end else "  end: none (the rollout did not close "
          "its record)")
    return ExitCode.OK


def _link_of(path: Path):
    """The earlier part a resumed transcript links to, and the problem with the link (None: it holds)."""
    from agent.record.transcript import linked_part  # lazy: per command

    try:
        with open(path, "rb") as f:
            start = json.loads(f.readline())
    except (OSError, ValueError):
        return None, None
    return linked_part(path, start) if isinstance(start, dict) else (None, None)


def cmd_replay(args) -> int:
    from agent.record.replay import replay  # lazy: per command
    from agent.record.transcript import TranscriptError  # lazy: per command
    from tools import default_tools  # lazy: per command
    from tools.base import Registry  # lazy: per command

    failed = 0
    for name in args.transcripts:
        path = Path(name)
        if not path.exists():
            return _fail(f"no transcript at {path}")
        try:
            report = replay(path, Registry(default_tools()))
        except TranscriptError as e:
            print(f"{path}: {e}")
            failed += 1
            continue
        if args.json:
            print(json.dumps({"transcript": str(path), "ok": report.ok, "turns": report.turns,
                              "compared": report.compared, "message": report.message}))
        else:
            print(f"{path}: {report.message}")
        failed += not report.ok
    return ExitCode.FAILED if failed else ExitCode.OK
