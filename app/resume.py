"""`agent resume TRANSCRIPT.jsonl`: go on with a scripted run that was stopped, or with a chat.

What a resume does, in order:

1. Reads the stopped part back (a last line cut short by a kill is left out) and re-drives it
   through the loop and the gate as a replay does: that gives the message list the model had,
   the backups of the ledger and the benchmark labels. A change whose outcome is unknown (its
   intent has no result, or it was stopped while it ran: agent/journal.py) is answered in those
   messages by a tool message that says "outcome unknown: check first".
2. Reads the goal file again (its path is in the session_start): gone, or saying something else
   than it did (goal, hosts, authorizations, checks), the resume stops with one line, exit 2.
3. Reaches every host (agent/preflight.py) and inspects each one again, since its state may have
   changed; checks every backup against its host (the hashes taken when it was written): a backup
   that is gone or changed is left out of the ledger, and the model is told so.
4. Goes on in a new transcript whose session_start links to the stopped one (`resumes`: its path,
   the hash of its last line, its last seq). A new file rather than lines appended to the old one:
   the old one is closed (its session_end says how it stopped), or ends where a killed process left
   it; either way it stays exactly as it was, a record that verifies on its own, and the link's hash
   ties the two. The new file holds in its `resumed` event everything it took from the old one, so
   `agent replay` re-drives only its own turns and needs no other file.
5. Ends as `agent run` does: checks, verdict, exit code, report.

A chat (stopped, or left by the operator) goes on as a chat on the same hosts: the same steps 1, 3
and 4 before its first prompt, and the approvals the operator gave for the session carry over only
once the operator, shown them, says yes. Where things stand goes to the model with the operator's
first request.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent.errors import SessionConfigError, interruption_reason
from agent.goal import Goal, GoalError, load_goal
from agent.journal import OUTCOME_UNKNOWN, Intent, changed_hosts, unknown_outcomes
from agent.loop import Outcome, Session
from agent.record.transcript import Part, TranscriptError, new_transcript_path, read_part, untrusted, verify

# How a stopped part may have ended for a resume to go on with it (no end at all: the process was killed).
RESUMABLE = ("interrupted", "crashed", "model_error", "budget")
# The result of a call the stopped process had not finished, or not started, and that changes nothing.
NOT_FINISHED = ("not finished: the session was stopped before this call wrote its result. It changed nothing "
                "on the host; send it again if you still need what it tells.")
INSPECTION_CHARS = 1_500  # of each host's inspection, in the message that tells the model where things stand


def resume(args) -> int:
    """Resume the run recorded in args.transcript; the exit code."""
    path = Path(args.transcript)
    if not path.is_file():
        raise SessionConfigError(f"no transcript at {path}: give the .jsonl file `agent run` printed at its end "
                                 "(`agent sessions` lists them)")
    try:
        part = read_part(path)
    except TranscriptError as e:
        raise SessionConfigError(f"cannot resume {path}: {e}") from None
    _trusted_part(path, getattr(args, "accept_unsealed", False))
    start = part.events[0] if part.events else {}
    if start.get("type") != "session_start":
        raise SessionConfigError(f"cannot resume {path}: it does not start with a session_start event")
    end = part.end
    if start.get("command") == "chat":
        return _resume_chat(args, part)
    if end is not None and end.get("status") not in RESUMABLE:
        raise SessionConfigError(f"nothing to resume: {path} ended {end.get('status')} ({end.get('reason') or '-'}); "
                                 "start a new run instead")
    if start.get("command") != "run" or not start.get("goal_file"):
        raise SessionConfigError(f"cannot resume {path}: only scripted runs (`agent run`) and chats can be resumed, "
                                 f"and this is a {start.get('command') or 'session'} session")
    goal = _same_goal(path, start)
    rebuilt = rebuild(part)
    _check_goal_message(goal, start, rebuilt)
    return _go_on(args, part, goal, rebuilt)


def _trusted_part(path: Path, accept_unsealed: bool) -> None:
    """The stopped part's messages, backups and approvals become the resumed session's, so the part must be
    the one written: refused when its chain or seal is broken (a missing end is how a kill stops it), and
    when this machine's key did not seal it unless --accept-unsealed (then said on stderr)."""
    check = verify(path)
    refused = untrusted(path, check, accept_unsealed, "a resumed run")
    if refused:
        raise SessionConfigError(f"cannot resume {refused}")
    if not check.sealed:
        print(f"agent: warning: {path}: {check.seal_summary()}; resumed as it is (--accept-unsealed)",
              file=sys.stderr)


# --------------------------------------------------------------------------- reading the stopped part


class Rebuilt:
    """What the stopped part left: the model's messages, the ledger, the labels, the unknown changes."""

    def __init__(self, session: Session, unknown: list[Intent], store: dict):
        self.messages = session.messages[1:] if session.messages[:1] and \
            session.messages[0].get("role") == "system" else list(session.messages)
        self.backups = session.gate.ledger.all()
        self.session_approvals = session.gate.session_approvals()
        self.unknown = unknown
        self.store = store
        self.measured = session.gate.measured.facts()  # the gate's benchmark labels and changed hosts


def rebuild(part: Part) -> Rebuilt:
    """Re-drive the stopped part as a replay does, with "outcome unknown" for its unfinished changes."""
    from agent.batch import CallResult  # lazy: per command
    from agent.record.replay import drive  # lazy: per command
    from tools import default_tools  # lazy: per command
    from tools.base import Registry  # lazy: per command

    unknown = unknown_outcomes(part.events)
    open_calls = {(u.turn, u.call_id) for u in unknown}

    def result_for(turn, prepared, recorded):
        if (turn, prepared.call.id) in open_calls:
            return CallResult(content=OUTCOME_UNKNOWN, ok=False, error="outcome unknown", status="unknown")
        if recorded is None and part.end is None:
            # Killed in the middle of a batch, before this call wrote a result. A change writes its
            # intent before it starts (answered above), so this one changed nothing.
            return CallResult(content=NOT_FINISHED, ok=False, error="not finished", status="cancelled")
        return None

    report, session = drive(part.events[0], iter(part.events[1:]), Registry(default_tools()), result_for,
                            cut_short=part.end is None)
    if not report.ok:
        raise SessionConfigError(f"cannot rebuild the session from {part.path}: {report.message.splitlines()[0]}")
    store = {key: dict(value) if isinstance(value, dict) else value for key, value in session.store.items()}
    for ev in part.events:  # the labels this part measured, benchmarks and outputs (a replay runs no tool)
        data = ev.get("data") if isinstance(ev.get("data"), dict) else None
        if ev.get("type") == "tool_result" and ev.get("tool") in ("run_bench", "check_outputs") and ev.get("ok") \
                and data and data.get("label"):
            store.setdefault(ev["tool"], {})[data["label"]] = data
    return Rebuilt(session, unknown, store)


def _same_goal(path: Path, start: dict) -> Goal:
    goal_file = Path(start["goal_file"])
    if not goal_file.is_file():
        raise SessionConfigError(f"cannot resume {path}: its goal file {goal_file} is gone; the run's authorizations "
                                 "come from it, so it must be there as it was")
    try:
        goal = load_goal(goal_file)
    except GoalError as e:
        raise SessionConfigError(f"cannot resume {path}: its goal file no longer loads: {e}") from None
    recorded_rules = (start.get("policy") or {}).get("authorizations", [])
    now_rules = [a.model_dump(exclude_defaults=True) for a in goal.authorizations]
    what = [name for name, same in (
        ("its goal", goal.goal == start.get("goal")),
        ("its hosts", sorted(goal.host_names()) == sorted(start.get("hosts", []))),
        ("its authorizations", _plain(now_rules) == _plain(recorded_rules)),
    ) if not same]
    if what:
        raise SessionConfigError(f"cannot resume {path}: the goal file {goal_file} changed since the run began "
                                 f"({', '.join(what)}); the run may only go on under the rules it started with: put "
                                 "the file back as it was, or start a new run")
    return goal


def _check_goal_message(goal: Goal, start: dict, rebuilt: Rebuilt) -> None:
    """The success checks and the rest of the goal message, as the model first read them."""
    from agent.compaction import split_summary  # lazy: per command
    from agent.session_builder import goal_message  # lazy: per command

    first = next((m.get("content") for m in rebuilt.messages if m.get("role") == "user"), None)
    if isinstance(first, str) and split_summary(first)[0] != goal_message(goal):
        raise SessionConfigError(f"cannot resume: the goal file {start['goal_file']} changed since the run began (what "
                                 "it asks, allows or checks); put it back as it was, or start a new run")


def _plain(value):
    import json

    return json.loads(json.dumps(value, sort_keys=True, default=str))


# --------------------------------------------------------------------------- going on


def _go_on(args, part: Part, goal: Goal, rebuilt: Rebuilt) -> int:
    from agent.session_builder import build_session, goal_budget, make_model  # lazy: per command
    from app.run import busy, print_ending, trust_flagged_keys  # lazy: per command
    from app.ui import JsonLines, make_view  # lazy: per command

    start = part.events[0]
    trust_flagged_keys(goal, args.trust_host_key)
    model = make_model(args.model or goal.model or start.get("model"), args.base_url or goal.base_url,
                       args.model_timeout)
    path = Path(args.transcript_out) if args.transcript_out else new_transcript_path("resume")
    view = JsonLines() if args.json else make_view(verbosity=getattr(args, "verbosity", None))
    built = build_session(hosts=goal.hosts, model=model, mode="scripted", authorizations=goal.authorizations,
                          baselines=goal.baselines(), plan=bool((start.get("policy") or {}).get("plan")),
                          budget=goal_budget(goal), transcript=path, listeners=[view], sims=_sims(part, goal),
                          start_info={"goal": goal.goal, "goal_file": start["goal_file"], "command": "run",
                                      "resumes": part.link()})
    with busy(view):
        code, unreached = _execute(goal, built.session, part, rebuilt)
    print_ending(path, unreached, args.json, resumes=part.path, server=getattr(model, "base_url", None))
    return code


def _sims(part: Part, goal: Goal) -> dict:
    """The simulated hosts the stopped part ran on, opened again where they are."""
    return {e.name: open_sim(part, e.name, "run") for e in goal.hosts if e.transport == "sim"}


def open_sim(part: Part, name: str, what: str):
    """The simulated host `name` the stopped part ran on, where it is; one line if it is gone or unrecorded."""
    root = (part.events[0].get("sim_roots") or {}).get(name)
    if not root or not Path(root).is_dir():
        raise SessionConfigError(f"cannot resume {part.path}: the simulated host {name} it ran on "
                                 f"{'is not recorded' if not root else f'is gone ({root})'}; a fresh one would "
                                 f"not be the machine the {what} changed")
    from tools.sim import Sim  # lazy: only a sim host loads the sim

    return Sim.open(Path(root))


def _execute(goal: Goal, session: Session, part: Part, rebuilt: Rebuilt):
    """As app/run.py execute_goal, with the hosts looked at again and the earlier part restored first."""
    from agent.preflight import reach_hosts  # lazy: per command
    from app.run import finish_run, preflight_failed  # lazy: per command

    with session.closing():
        outcome = None
        try:
            unreached = reach_hosts(session.hosts, goal.host_names())
            if unreached:
                return preflight_failed(session, unreached), unreached
            inspections = _inspect_hosts(session, goal.host_names())
            backups, dropped = _check_backups(session, rebuilt)
            session.resume_from({"from": str(part.path), "messages": rebuilt.messages,
                                 "backups": [b.model_dump(mode="json") for b in backups],
                                 "dropped_backups": dropped, "unknown": [u.as_record() for u in rebuilt.unknown],
                                 "changed_hosts": changed_hosts(part.events), "store": rebuilt.store,
                                 "measured": rebuilt.measured})
            outcome = session.send(resume_message(part, inspections, backups, dropped, rebuilt.unknown))
        except KeyboardInterrupt as e:
            outcome = Outcome("interrupted", interruption_reason(e))
        return finish_run(goal, session, outcome), []


def _inspect_hosts(session: Session, names: list[str]) -> dict[str, str]:
    """One inspect_host per host, recorded as a `host_state` event; what the model reads of each."""
    from tools.base import ToolContext, ToolError  # lazy: per command
    from tools.hosts import HostError  # lazy: per command
    from tools.inspect_host import InspectHost  # lazy: per command

    tool = InspectHost()
    seen: dict[str, str] = {}
    for name in names:
        ctx = ToolContext(hosts=session.hosts, artifacts=session.artifacts, call_id=f"resume-inspect-{name}",
                          redact=session.transcript.redactor.text)
        try:
            result = tool.run(ctx, tool.parse_args({"host": name}))
        except (HostError, ToolError) as e:
            session.emit("host_state", host=name, inspect=None, error=str(e))
            seen[name] = f"could not be inspected: {e}"
            continue
        session.emit("host_state", host=name, inspect=result.model_dump(mode="json"), error=None)
        text = session.transcript.redactor.text(tool.render(result))
        seen[name] = text if len(text) <= INSPECTION_CHARS else text[:INSPECTION_CHARS] + " [...]"
    return seen


def _check_backups(session: Session, rebuilt: Rebuilt):
    """Every backup of the stopped part read back on its host against the hashes recorded when it was taken."""
    from tools.base import ToolError  # lazy: per command
    from tools.hosts import HostError  # lazy: per command
    from tools.pip_freeze_backup import read_backup  # lazy: per command

    kept, dropped = [], []
    for record in rebuilt.backups:
        try:
            if record.kind == "pip-freeze":
                read_backup(session.hosts.get(record.host), record.backup_id, record)
            kept.append(record)
        except (HostError, ToolError) as e:
            dropped.append({"backup_id": record.backup_id, "host": record.host, "problem": str(e)})
    return kept, dropped


def resume_message(part: Part, inspections: dict[str, str], backups, dropped: list[dict],
                   unknown: list[Intent], what: str = "run") -> str:
    """The user message the resumed session starts with: where things stand now."""
    end = part.end
    how = f"{end.get('status')}: {end.get('reason')}" if end else "the process ended without closing its record"
    ended = "was stopped" if what == "run" else "ended"
    lines = [f"[This {what} {ended} ({how}) and goes on now. The hosts may have changed since; they were "
             "inspected again:"]
    lines += [f"- {name}: {text}" for name, text in inspections.items()]
    if backups:
        lines.append("Backups read back on their hosts and still intact: "
                     + ", ".join(f"{b.backup_id} ({b.host})" for b in backups) + ".")
    for d in dropped:
        lines.append(f"Backup {d['backup_id']} of {d['host']} is no longer usable ({d['problem']}): take a new one "
                     "before any change to that host.")
    if unknown:
        lines.append(f"{len(unknown)} change(s) were running when the run stopped, and their outcome is unknown: "
                     + "; ".join(f"{u.tool} on {u.host} ({u.subject}, call {u.call_id})" for u in unknown)
                     + ". Check the host's state with read-only calls before you run any of them again: the safety "
                       "layer sends such a change back until you have.")
    lines.append("Go on with the goal from where it stopped; do not repeat steps that already succeeded.]"
                 if what == "run" else "Do not repeat steps that already succeeded. The operator's request follows.]")
    return "\n".join(lines)


# --------------------------------------------------------------------------- a chat


def _resume_chat(args, part: Part) -> int:
    """The chat goes on: same hosts (a simulated one where it was), the conversation and ledger rebuilt."""
    from argparse import Namespace  # lazy: per command

    from app.chat import start_chat  # lazy: per command

    start = part.events[0]
    entries, sims = _chat_hosts(part)
    rebuilt = rebuild(part)
    chat_args = Namespace(model=args.model or start.get("model"), base_url=args.base_url,
                          model_timeout=args.model_timeout, plain=getattr(args, "plain", False), plan=False,
                          verbosity=getattr(args, "verbosity", None),
                          transcript=args.transcript_out or str(new_transcript_path("chat")))

    def before_prompt(chat) -> None:
        session = chat.session
        chat.view.info(f"resuming {part.path}: the hosts are inspected again and its backups read back…")
        inspections = _inspect_hosts(session, [e.name for e in entries])
        backups, dropped = _check_backups(session, rebuilt)
        carried = _confirm_approvals(chat, rebuilt.session_approvals)
        session.resume_from({"from": str(part.path), "messages": rebuilt.messages,
                             "backups": [b.model_dump(mode="json") for b in backups], "dropped_backups": dropped,
                             "unknown": [u.as_record() for u in rebuilt.unknown],
                             "changed_hosts": changed_hosts(part.events), "store": rebuilt.store,
                             "measured": rebuilt.measured, "session_approvals": [list(k) for k in carried]})
        chat.pending_notes.append(resume_message(part, inspections, backups, dropped, rebuilt.unknown, "chat"))
        for d in dropped:
            chat.view.warn(f"backup {d['backup_id']} of {d['host']} is no longer usable: {d['problem']}")
        chat.view.info(f"resumed: {sum(1 for m in rebuilt.messages if m.get('role') == 'user')} requests, "
                       f"{len(backups)} backups read back intact, {len(rebuilt.unknown)} changes of unknown outcome")

    return start_chat(chat_args, entries, {"command": "chat", "resumes": part.link()}, sims, before_prompt)


def _chat_hosts(part: Part):
    """The chat's hosts as it last had them (those added with /host add too), and its simulated ones opened."""
    from agent.goal import HostEntry  # lazy: per command

    start = part.events[0]
    specs = {s["name"]: s for s in start.get("host_specs") or []}
    for ev in part.events:
        if ev.get("type") == "note" and ev.get("kind") == "host_added":
            specs[ev["host"]] = {"name": ev["host"], "transport": ev.get("transport"), "target": ev.get("target")}
    entries, sims = [], {}
    for name, spec in specs.items():
        transport = spec.get("transport")
        if transport == "sim":
            sims[name] = open_sim(part, name, "chat")
        entries.append(HostEntry(name=name, transport=transport, python=spec.get("python") if transport != "sim"
                                 else None, target=spec.get("target") if transport == "ssh" else None))
    return entries, sims


def _confirm_approvals(chat, approvals: list[tuple]) -> list[tuple]:
    """The approvals for the session that go on: all of them if the operator says yes when shown them, else none."""
    if not approvals:
        return []
    rows = [(host or "-", f"{tool}: {subject}") for tool, host, subject in approvals]
    chat.view.card(f"{len(approvals)} approval(s) for the session were given before it stopped", rows, "warn")
    try:
        answer = chat.view.read_line("carry them over? [y/N] ").strip().lower()
    except (EOFError, KeyboardInterrupt):
        answer = ""
    carried = answer in ("y", "yes")
    chat.session.emit("note", kind="session_approvals", carried=carried, by="operator",
                      approvals=[list(k) for k in approvals])
    chat.view.info("carried over: each runs again without asking" if carried
                   else "not carried over: each will be asked again")
    return approvals if carried else []
