"""Rolling a recipe over a fleet: the canary first, then batches in parallel, a failure threshold.

Each host is a session of its own with its own transcript, run through the same loop, gate, journal
and end checks as `agent run`. Its model is the recipe (`RecipeModel`): it makes the recipe's calls
one turn at a time and decides from their recorded results, so a host's transcript verifies and
replays as any other, and costs no tokens. What it does, on each host:

1. inspect_host: the host's facts against the recipe's preconditions. A host that differs is held
   (nothing changed) and reported.
2. pip_freeze_backup, then the benchmark before (`runs` measured runs) and, with `outputs:` in the recipe,
   what the served model answers (check_outputs, label "before").
3. The steps, one a turn. The gate allows each only by the recipe's authorizations, and only after
   the backup verified. A step that fails ends the steps.
   With a `drain:` in the recipe, drain_node after the backup (waiting for the node's jobs), and
   undrain_node at the end once the host is upgraded or rolled back; a node someone else drained
   is left drained, and one whose rollback failed too.
4. The benchmark and the answers after; the success checks (the recipe's `outputs` check among them) and
   the final state (`read_end`, agent/finish.py, as every session ends); the benchmark gate
   (agent/fleet/stats.py).
5. Any of those failing: restore_backup of the host's own backup, as a request of its own in the
   same session, so the rollback is its own recorded step.

The fleet's own transcript (hash-chained like every other) holds the plan, each batch, and each
host's outcome with the path and last-line hash of that host's transcript, which ties them together.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent.fleet.host import (  # noqa: F401  (the statuses, imported from here by the command and the tests)
    ALREADY, CHANGED, COUNTS_AS_FAILED, FAILED, HELD, INTERRUPTED, NOT_RUN, OK, RESTORED, ROLLBACK_REQUEST,
    UNDRAIN_REQUEST, UNREACHABLE, WOULD_CHANGE, HostOutcome, RecipeModel, answers_said, gate_of, host_goal,
    last_line_hash, without_answers)
from agent.fleet.recipe import Recipe
from agent.goal import HostEntry

# --------------------------------------------------------------------------- one host


def run_host(recipe: Recipe, entry: HostEntry, batch: int, transcript: Path, stop: threading.Event,
             sim_dir: Path | None, start_info: dict) -> HostOutcome:
    """One host's rollout, in a session and a transcript of its own."""
    from agent.finish import read_end  # lazy: the fleet's start-up stays small
    from agent.loop import Outcome  # lazy: the loop and the gate load with a host's session, not with the module
    from agent.preflight import reach_hosts  # lazy: as above
    from agent.session_builder import build_session, goal_message  # lazy: the session builder loads the model SDK

    began = time.monotonic()
    goal = host_goal(recipe, entry)
    model = RecipeModel(recipe, entry.name, stop, check=bool(start_info.get("check")))
    built = build_session(hosts=goal.hosts, model=model, mode="scripted", authorizations=goal.authorizations,
                          baselines=goal.baselines(), budget=goal.budget, transcript=transcript,
                          listeners=[model.listen], sim_dir=sim_dir,
                          start_info={"goal": goal.goal, "command": "fleet", **start_info})
    session = built.session
    gate: dict | None = None
    checks_ok: bool | None = None
    with session.closing():
        unreached = reach_hosts(session.hosts, [entry.name])
        if unreached:
            reason = unreached[0].problem
            session.emit("preflight", host=entry.name, ok=False, problem=reason)
            status = UNREACHABLE
        else:
            outcome = session.send(goal_message(goal))
            session.ending = outcome
            status, reason = _judge_apply(model, outcome)
            if status == ALREADY:
                checks_ok = read_end(session, without_answers(goal), outcome)  # the recipe's checks prove it
                if checks_ok is False:
                    status, reason = HELD, ("held: its facts are the target's, but a check failed (see the "
                                            "transcript): not what the canary ended as")
            if status == CHANGED:
                checks_ok = read_end(session, goal, outcome)
                gate = gate_of(recipe, model.bench)
                why = _why_failed(checks_ok, gate, _short_of_target(recipe, model.final_facts))
                if why:
                    status, reason = FAILED, why + answers_said(model)
                else:
                    reason = (f"{model.changed} step{'s' * (model.changed != 1)} ran, the checks passed"
                              + (f", gate: {gate['detail']}" if gate else "") + answers_said(model))
            if status == FAILED and model.backup_id and not model.interrupted:
                session.send(ROLLBACK_REQUEST.format(why=reason))
                reason += "; rolled back" if model.rolled_back else "; THE ROLLBACK FAILED: see the transcript"
            elif status == INTERRUPTED and model.changed and model.backup_id:
                # Half-changed: the step that ran when the interrupt came finished, and the host is put back
                # from its verified backup rather than left between the two stacks.
                session.send(ROLLBACK_REQUEST.format(why=reason))
                if model.rolled_back:
                    status, reason = RESTORED, reason + "; restored from its backup"
                else:
                    reason += "; THE RESTORE FAILED: the host is half-changed, see the transcript"
            reason += _undrain(session, model, status)
            if status != CHANGED and session.changed_hosts:
                # What a failed, rolled back or stopped host shows at the very end (a changed one was read for
                # its checks, and nothing ran after).
                read_end(session, goal, outcome, run_checks=False)
        session.emit("goal_result", met=status in (OK, CHANGED, ALREADY),
                     verdict="met" if status in (OK, CHANGED, ALREADY) else "not met",
                     exit_code=0 if status in (OK, CHANGED, HELD, ALREADY, WOULD_CHANGE) else 1, reason=reason,
                     checks_ok=checks_ok, fleet_status=status, gate=gate, rolled_back=model.rolled_back)
        if unreached:
            session.ending = Outcome("preflight", reason)
    return HostOutcome(host=entry.name, status=status, reason=reason, batch=batch, transcript=str(transcript),
                       last_hash=last_line_hash(transcript), gate=gate, rolled_back=model.rolled_back,
                       drained=model.drained, undrained=model.undrained,
                       steps_ok=model.changed, steps_begun=model.begun, duration_s=round(time.monotonic() - began, 3),
                       bench={label: {"median": d.get("median"), "values": d.get("values")}
                              for label, d in model.bench.items() if isinstance(d, dict)})


def _undrain(session, model: RecipeModel, status: str) -> str:
    """Back into its scheduler, when we drained it and it is healthy (upgraded, or rolled back); what to add to the
    host's reason."""
    if model.drained == "someone else's":
        return "; it was drained by someone else before: left drained"
    if model.drained == "timed out":
        return "; LEFT DRAINED: its jobs outlived the drain's timeout (undrain it by hand once they end)"
    if model.drained != "ours":
        return ""
    if model.interrupted or (status == FAILED and not model.rolled_back):
        return "; LEFT DRAINED: it is not known to be healthy"
    session.send(UNDRAIN_REQUEST)
    return "; back in its scheduler" if model.undrained else "; the undrain failed: it is still drained"


def _judge_apply(model: RecipeModel, outcome) -> tuple[str, str]:
    if model.held:
        return HELD, "held: " + "; ".join(model.held)
    if model.at_target:
        return ALREADY, "already at target: its facts are what the canary ended with, and its checks pass"
    if model.check and not model.failed:
        return WOULD_CHANGE, (f"would change: its facts match the preconditions; {len(model.recipe.steps)} "
                              f"step{'s' * (len(model.recipe.steps) != 1)} would run (--check: nothing was changed)")
    if model.interrupted:
        return INTERRUPTED, "the rollout was interrupted" + (f" after {model.changed} step(s)" if model.changed else "")
    if model.failed:
        return FAILED, model.failed
    if outcome.status != "done":
        return FAILED, f"the session ended {outcome.status}: {outcome.reason}"
    return CHANGED, ""


def _short_of_target(recipe: Recipe, facts: dict | None) -> str:
    """How the host, as read at its end, differs from what the canary ended as ('' when it does not, or when the
    recipe does not say): the steps ran and the checks passed, yet torch may be another build than the canary's."""
    if recipe.target is None:
        return ""
    if facts is None:
        return "its state at the end could not be read, so its upgrade is not proven"
    off = recipe.target.differences(facts)
    return "; ".join(f"it ended with {key} {now!r} where the canary ended with {want!r}" for key, now, want in off)


def _why_failed(checks_ok: bool | None, gate: dict | None, off_target: str = "") -> str:
    whys = [off_target] if off_target else []
    if checks_ok is False:
        whys.append("a success check failed")
    if gate is not None and not gate["passed"]:
        whys.append(f"the benchmark gate failed: {gate['detail']}")
    return "; ".join(whys)


# --------------------------------------------------------------------------- the fleet


@dataclass
class FleetResult:
    outcomes: list[HostOutcome]
    stopped: str | None  # why the rollout stopped before its last batch, if it did
    transcript: Path
    page: Path | None = None  # the HTML report

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.outcomes:
            out[o.status] = out.get(o.status, 0) + 1
        return out


def plan_batches(hosts: list[str], canary: int, batch: int) -> list[list[str]]:
    """The canary hosts first (a batch of their own), then batches of `batch` hosts, in inventory order."""
    first, rest = hosts[:canary], hosts[canary:]
    return ([first] if first else []) + [rest[i:i + batch] for i in range(0, len(rest), batch)]


def over_threshold(outcomes: list[HostOutcome], max_fail_percent: float) -> str | None:
    """Why the rollout stops here, or None: failed (and unreachable) hosts over the share of hosts attempted."""
    attempted = [o for o in outcomes if o.status not in (HELD, NOT_RUN, ALREADY)]
    failed = [o for o in attempted if o.status in COUNTS_AS_FAILED]
    if not attempted or not failed:
        return None
    share = 100 * len(failed) / len(attempted)
    if share > max_fail_percent:
        return (f"{len(failed)} of {len(attempted)} hosts attempted failed ({share:.0f}%), over --max-fail "
                f"{max_fail_percent:g}%")
    return None


def roll_out(recipe: Recipe, recipe_path: Path, entries: list[HostEntry], *, canary: int, batch: int,
             max_fail_percent: float, out_dir: Path, sim_dir: Path | None = None,
             on_event: Callable[[str, dict], None] = lambda kind, data: None,
             earlier: list[HostOutcome] | None = None, resumes: dict | None = None,
             hand_over: HandOver | None = None, recover: dict[str, Path] | None = None,
             check: bool = False, warnings: list[str] | None = None) -> FleetResult:
    """Roll the recipe out; the fleet transcript is `out_dir/fleet.jsonl` (`fleet-N.jsonl` for the Nth part of a
    resumed rollout), each host's `out_dir/<host>.jsonl`. `earlier`: the outcomes a stopped part left, carried
    over and not run again; `resumes`: the link to that part (its path, last line's hash and seq); `recover`: the
    hosts a killed part left mid-way, each with its record, restored from that record's backup before their turn.
    `hand_over`: once every batch ran (the rollout not stopped), each held host is given to it (`--ask`), with
    the path of its session's transcript, `out_dir/ask/<host>.jsonl`; what it returns replaces the host's outcome,
    None leaves the host held. `check`: every host inspected and judged, in batches, none changed. `warnings`: what
    the operator was told before it began (recipe edits, inventory variables not honoured), kept in the record."""
    from agent.record.transcript import Redactor, TranscriptWriter, remember_session  # lazy: with the rollout
    from agent.session_builder import versions  # lazy: the versions read the SDK's

    out_dir.mkdir(parents=True, exist_ok=True)
    sim_dir = sim_dir or out_dir / "sims"  # a simulated host's trees lie with the rollout's records, not in /tmp
    carried = list(earlier or [])
    part = 1 + sum(1 for _ in out_dir.glob("fleet*.jsonl")) if resumes else 1
    fleet_path = out_dir / ("fleet.jsonl" if part == 1 else f"fleet-{part}.jsonl")
    writer = TranscriptWriter(fleet_path, Redactor())
    remember_session(fleet_path)
    by_name = {e.name: e for e in entries}
    done_before = {o.host for o in carried}
    proven = any(o.status == CHANGED for o in carried)  # a canary, or a later host, changed and passed
    first_batch = 1 + max((o.batch for o in carried), default=-1)
    batches = plan_batches([n for n in by_name if n not in done_before], 0 if proven or check else canary, batch)
    writer.write("session_start", command="fleet", versions=versions(), recipe=str(recipe_path.absolute()),
                 recipe_sha256=hashlib.sha256(recipe_path.read_bytes()).hexdigest(), hosts=list(by_name),
                 plan={"canary": canary, "batch": batch, "max_fail_percent": max_fail_percent, "batches": batches,
                       "first_batch": first_batch, "sims": str(sim_dir.absolute()),
                       **({"check": True} if check else {})},
                 goal=recipe.goal, **({"resumes": resumes} if resumes else {}),
                 **({"warnings": warnings} if warnings else {}))
    for o in carried:
        writer.write("fleet_host", **o.as_dict(), carried=True)
    stop = threading.Event()
    outcomes: list[HostOutcome] = list(carried)
    stopped: str | None = None
    status, reason = "done", ""
    info = {"fleet": str(fleet_path.absolute()), "recipe": str(recipe_path.absolute()),
            **({"check": True} if check else {})}
    remaining = [n for n in by_name if n not in done_before]
    try:
        b = first_batch
        while remaining:
            # Until a canary has changed and passed, the next hosts are canaries: one that was held (or already
            # at the target) proves nothing about the change, and hands the role on.
            is_canary = canary > 0 and not proven and not check
            names, remaining = (remaining[:canary], remaining[canary:]) if is_canary else \
                (remaining[:batch], remaining[batch:])
            writer.write("fleet_batch", batch=b, canary=is_canary, hosts=names)
            on_event("batch", {"batch": b, "canary": is_canary, "hosts": names})
            done, interrupted = _run_batch(recipe, [by_name[n] for n in names], b, out_dir, stop, sim_dir, info,
                                           on_event, recover or {})
            for o in done:
                writer.write("fleet_host", **o.as_dict())
            outcomes += done
            b += 1
            if interrupted:
                raise KeyboardInterrupt
            if check:  # nothing changes: every host is looked at, whatever the others showed
                stopped = None
            elif is_canary and any(o.status in COUNTS_AS_FAILED for o in done):
                stopped = "the canary failed: the recipe does not hold on this fleet"
            else:
                stopped = over_threshold(outcomes, max_fail_percent)
                proven = proven or (is_canary and any(o.status == CHANGED for o in done))
            if stopped and remaining:
                break
            stopped = None  # past the last batch there is nothing left to stop
        if hand_over is not None and stopped is None:
            outcomes = _hand_over_held(outcomes, by_name, hand_over, writer, out_dir, sim_dir, info, on_event)
    except KeyboardInterrupt as e:
        from agent.errors import interruption_reason  # lazy: only on an interrupt

        stop.set()
        stopped, status, reason = "interrupted", "interrupted", interruption_reason(e)
    finally:
        ran = {o.host for o in outcomes}
        for name in by_name:
            if name not in ran:
                o = HostOutcome(host=name, status=NOT_RUN, reason=stopped or "not reached", batch=-1)
                outcomes.append(o)
                writer.write("fleet_host", **o.as_dict())
        result = FleetResult(outcomes, stopped, fleet_path)
        writer.write("fleet_result", counts=result.counts(), stopped=stopped,
                     failed=[o.host for o in outcomes if o.status in COUNTS_AS_FAILED],
                     held=[o.host for o in outcomes if o.status == HELD])
        writer.write("session_end", status=status, reason=reason or (stopped or "every batch ran"))
        from agent.fleet.report import write_fleet_html  # lazy: the report, at the end

        result.page = write_fleet_html(fleet_path)
    return result


# (held outcome, its host, the transcript for its session, the host's sims by name, start info) -> new outcome or None
HandOver = Callable[[HostOutcome, HostEntry, Path, dict, dict], "HostOutcome | None"]


def _hand_over_held(outcomes: list[HostOutcome], by_name: dict[str, HostEntry], hand_over: HandOver, writer,
                    out_dir: Path, sim_dir: Path, info: dict, on_event) -> list[HostOutcome]:
    """Each held host offered to `hand_over`, in inventory order; the outcomes with those it changed."""
    out = list(outcomes)
    for i, o in enumerate(outcomes):
        if o.status != HELD or o.handed_over:
            continue
        entry = by_name[o.host]
        sims: dict = {}
        if entry.transport == "sim" and (sim_dir / entry.name).exists():
            from tools.sim import Sim  # lazy: only a simulated host is opened again

            sims[entry.name] = Sim.open(sim_dir / entry.name)  # the same host the rollout inspected and held
        (out_dir / "ask").mkdir(exist_ok=True)
        path = out_dir / "ask" / f"{entry.name}.jsonl"
        for n in range(2, 1000):  # a hand-over interrupted before: its record stays, the new one is another file
            if not path.exists():
                break
            path = out_dir / "ask" / f"{entry.name}-{n}.jsonl"
        new = hand_over(o, entry, path, sims, info)
        writer.write("fleet_handoff", host=o.host, handed_over=new is not None,
                     **({"transcript": new.transcript, "last_hash": new.last_hash} if new else {}))
        if new is not None:
            out[i] = new
            writer.write("fleet_host", **new.as_dict())
            on_event("host", new.as_dict())
            if new.status == INTERRUPTED:  # Ctrl-C (or a signal) in its session: no other host is handed over
                raise KeyboardInterrupt
    return out


def _run_batch(recipe: Recipe, entries: list[HostEntry], b: int, out_dir: Path, stop: threading.Event,
               sim_dir: Path | None, start_info: dict, on_event,
               recover: dict[str, Path]) -> tuple[list[HostOutcome], bool]:
    """The batch's hosts side by side; their outcomes in inventory order, and whether Ctrl-C (or a signal) came.

    On an interrupt no host starts another step, the steps running end and are recorded, and each host's
    outcome says how far it got: the interrupt is not let through before that, a second one included."""
    interrupted = False
    pool = cf.ThreadPoolExecutor(max_workers=len(entries), thread_name_prefix="fleet")
    futures = {pool.submit(_run_host_safely, recipe, e, b, new_host_record(out_dir, e.name), stop, sim_dir,
                           start_info, recover.get(e.name)): e.name for e in entries}
    pending = set(futures)
    while pending:
        try:
            finished, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for f in finished:
                on_event("host", f.result().as_dict())
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
    pool.shutdown(wait=True)
    order = {e.name: i for i, e in enumerate(entries)}
    return sorted((f.result() for f in futures), key=lambda o: order[o.host]), interrupted


def host_records(out_dir: Path, name: str) -> list[Path]:
    """A host's transcripts in a rollout's directory, oldest first: `<host>.jsonl`, then `<host>-2.jsonl`... for
    each time a resumed rollout rolled it over again (one restored after an interrupt)."""
    found = [p for p in out_dir.glob(f"{name}*.jsonl") if p.stem == name or
             (p.stem.startswith(name + "-") and p.stem[len(name) + 1:].isdigit())]
    return sorted(found, key=lambda p: int(p.stem[len(name) + 1:] or 1))


def new_host_record(out_dir: Path, name: str) -> Path:
    taken = host_records(out_dir, name)
    return out_dir / (f"{name}.jsonl" if not taken else f"{name}-{len(taken) + 1}.jsonl")


def resumable(out_dir: Path, recipe_path: Path, names: list[str]) -> tuple[list[HostOutcome], dict, dict,
                                                                           dict[str, Path]]:
    """What a stopped rollout in `out_dir` leaves to carry over, the link to its last part, its plan (canary,
    batch, max_fail_percent: a resumed rollout keeps them), and the hosts to restore first, each with the record
    its killed session left (agent/fleet/recover.py).

    A host with an outcome keeps it. One that is as it was (restored after the interrupt, or stopped before any
    change to its stack) is rolled over again. One whose session was killed mid-way (its record has no outcome)
    after a change began is restored from the backup that record holds, then rolled over again; one we drained
    and never put back stays interrupted, for the operator to look at.
    Raises RecipeError (one line) when there is nothing to go on with, or the recipe or the hosts changed."""
    from agent.fleet.recipe import RecipeError  # lazy: recipes load with the command, not the module
    from agent.record.transcript import TranscriptError, read_part  # lazy: with a resume

    parts = sorted(out_dir.glob("fleet*.jsonl"), key=lambda p: int(p.stem.partition("-")[2] or 1))
    if not parts:
        raise RecipeError(f"{out_dir}: no fleet.jsonl there: give the --dir of the rollout to resume")
    try:
        last = read_part(parts[-1])
    except TranscriptError as e:
        raise RecipeError(f"cannot resume {parts[-1]}: {e}") from None
    start = last.events[0] if last.events else {}
    if start.get("type") != "session_start" or start.get("command") != "fleet":
        raise RecipeError(f"{parts[-1]}: not the record of a rollout")
    if start.get("recipe_sha256") != hashlib.sha256(recipe_path.read_bytes()).hexdigest():
        raise RecipeError(f"{recipe_path} is not the recipe the rollout in {out_dir} began with (its digest "
                          "differs): a rollout goes on only with the recipe it started with")
    if sorted(start.get("hosts", [])) != sorted(names):
        raise RecipeError(f"the inventory (with --limit) names other hosts than the rollout in {out_dir} "
                          f"({', '.join(start.get('hosts', []))}): give the same inventory and --limit")
    result = next((e for e in last.events if e["type"] == "fleet_result"), None)
    if result is not None and result.get("stopped") not in ("interrupted",):
        why = result.get("stopped") or "every batch ran"
        raise RecipeError(f"nothing to resume in {out_dir}: that rollout ended ({why}); look at its failed hosts and "
                          "start a new rollout (--limit) for the rest")
    carried: dict[str, HostOutcome] = {}
    for ev in last.events:
        if ev["type"] == "fleet_host" and ev["status"] not in (NOT_RUN, INTERRUPTED, RESTORED):
            fields = {k: v for k, v in ev.items() if k in HostOutcome.__dataclass_fields__}
            carried[ev["host"]] = HostOutcome(**fields)
    recover: dict[str, Path] = {}
    for name in names:
        records = host_records(out_dir, name)
        if name in carried or not records:
            continue
        try:
            found = _outcome_from_host_record(name, records[-1])
        except TranscriptError as e:
            raise RecipeError(f"cannot resume: {records[-1]}: {e}") from None
        if isinstance(found, HostOutcome):
            carried[name] = found
        elif found == "restore":
            recover[name] = records[-1]
    link = last.link()  # the form every resumed transcript keeps, which `agent show --verify` follows
    return [carried[n] for n in names if n in carried], link, start.get("plan", {}), recover


def _outcome_from_host_record(name: str, path: Path) -> "HostOutcome | str | None":
    """What a host's last record says it is: its outcome to carry over, "restore" (to restore first), or None (as
    it was: rolled over again)."""
    from agent.fleet.recover import killed_midway  # lazy: with a resume
    from agent.record.transcript import read_part  # lazy: with a resume

    events = read_part(path).events
    result = next((e for e in events if e["type"] == "goal_result" and e.get("fleet_status")), None)
    if result is not None and result["fleet_status"] not in (INTERRUPTED, RESTORED):
        return HostOutcome(host=name, status=result["fleet_status"], reason=result.get("reason", ""), batch=-1,
                           transcript=str(path), last_hash=last_line_hash(path), gate=result.get("gate"),
                           rolled_back=result.get("rolled_back"))
    if result is not None and result["fleet_status"] == RESTORED:
        return None
    left = killed_midway(events)
    if left == "drained":
        return HostOutcome(host=name, status=INTERRUPTED, batch=-1, transcript=str(path),
                           last_hash=last_line_hash(path),
                           reason="LEFT DRAINED when the rollout stopped: look at it (`agent show "
                                  f"{path}`), undrain it, then roll over it again (--limit)")
    return left


def _run_host_safely(recipe, entry, b, path, stop, sim_dir, start_info, killed: Path | None = None) -> HostOutcome:
    try:
        if killed is not None:  # left mid-way by a killed rollout: put back first, then rolled over again
            from agent.fleet.recover import restore_killed  # lazy: only on a resume after a kill

            restored = restore_killed(recipe, entry, killed, path, b, stop, sim_dir, start_info)
            if restored.status != RESTORED or stop.is_set():
                return restored
            path = new_host_record(path.parent, entry.name)
            outcome = run_host(recipe, entry, b, path, stop, sim_dir, start_info)
            outcome.reason = f"restored from its backup after the kill, then: {outcome.reason}"
            outcome.restored_first = restored.transcript
            return outcome
        return run_host(recipe, entry, b, path, stop, sim_dir, start_info)
    except Exception as e:  # noqa: BLE001 - one host's crash is that host's failure, not the fleet's
        return HostOutcome(host=entry.name, status=FAILED, reason=f"crashed: {type(e).__name__}: {e}", batch=b,
                           transcript=str(path), last_hash=last_line_hash(path))
