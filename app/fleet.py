"""`agent recipe` and `agent fleet`: learn an upgrade on a canary, roll it over many hosts.

    agent recipe CANARY.jsonl -o RECIPE.yaml          # read the changes a finished run made and verified
    agent fleet RECIPE.yaml --inventory hosts.ini --limit gpu --canary 1 --batch 8 --max-fail 10

The rollout itself is agent/fleet/rollout.py; this file reads the flags, prints progress and the
recap, and gives the exit code: 0 when every host that was attempted ended ok or changed (held hosts
are reported, not failures), 1 when a host failed or the rollout stopped, 2 for a bad recipe or
inventory, 130 on Ctrl-C.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agent.errors import SessionConfigError
from agent.fleet.recipe import RecipeError
from agent.text import clip
from app.exit_codes import ExitCode


def make_recipe(args) -> int:
    from agent.fleet.recipe import dump_recipe, load_recipe, recipe_from_transcript  # lazy: per command

    path = Path(args.transcript)
    if not path.is_file():
        raise SessionConfigError(f"{'not a file' if path.exists() else 'no file'} at {path}: give the .jsonl of a finished run whose goal was met"
                                 + (", or a recipe" if args.ansible else ""))
    try:
        if args.ansible and path.suffix != ".jsonl":
            recipe = load_recipe(path)
        else:
            _trusted_record(path, getattr(args, "accept_unsealed", False))
            recipe = recipe_from_transcript(path, host=args.host)
        if args.ansible:
            return _write_playbook(args, recipe, path)
    except RecipeError as e:
        raise SessionConfigError(str(e)) from None
    text = dump_recipe(recipe)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        out = _output(args)
        out.write_text(text, encoding="utf-8")
        print(f"recipe: {out} ({len(recipe.steps)} step{'s' * (len(recipe.steps) != 1)}, "
              f"{len(recipe.authorizations)} rule{'s' * (len(recipe.authorizations) != 1)}, "
              f"{len(recipe.checks)} check{'s' * (len(recipe.checks) != 1)}"
              f"{', a benchmark gate' if recipe.benchmark else ''}); read it before "
              f"`agent fleet {out} --inventory ...`",
              file=sys.stderr)
    return ExitCode.OK


def _trusted_record(path: Path, accept_unsealed: bool) -> None:
    """A recipe is what the canary's record proves, so the record must be the one written: refused when its
    chain or seal is broken, and when this machine's key did not seal it unless --accept-unsealed (then
    said on stderr, since an edit with recomputed hashes would not show)."""
    from agent.record.transcript import untrusted, verify  # lazy: per command

    check = verify(path)
    refused = untrusted(path, check, accept_unsealed, "a recipe")
    if refused:
        raise SessionConfigError(refused)
    if not check.sealed:
        print(f"agent: warning: {path}: {check.seal_summary()}; read as it is (--accept-unsealed)", file=sys.stderr)


def _output(args) -> Path:
    out = Path(args.output)
    if out.exists() and not args.force:
        raise SessionConfigError(f"{out} exists: give another -o, or --force to write over it")
    return out


def _write_playbook(args, recipe, source: Path) -> int:
    from agent.fleet.ansible import playbook  # lazy: per command

    if args.canary < 0 or args.batch < 1 or not 0 <= args.max_fail <= 100:
        raise SessionConfigError("--canary is 0 or more, --batch 1 or more, --max-fail a percentage from 0 to 100")
    text = playbook(recipe, source=str(source), canary=args.canary, batch=args.batch, max_fail=args.max_fail)
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return ExitCode.OK
    out = _output(args)
    out.write_text(text, encoding="utf-8")
    steps = len(recipe.steps)
    print(f"playbook: {out} (preflight, backup, {steps} step{'s' * (steps != 1)}, {len(recipe.checks)} "
          f"check{'s' * (len(recipe.checks) != 1)}{', a benchmark gate' if recipe.benchmark else ''}, a rescue that "
          f"restores the backup); review it, then `ansible-playbook -i INVENTORY {out}`", file=sys.stderr)
    return ExitCode.OK


def run_fleet(args) -> int:
    from agent.fleet.ansible import check_steps  # lazy: per command
    from agent.fleet.inventory import InventoryError, inventory_warnings, load_inventory  # lazy: per command
    from agent.fleet.recipe import load_recipe  # lazy: per command
    from agent.fleet.rollout import (  # lazy: per command
        COUNTS_AS_FAILED, HELD, INTERRUPTED, WOULD_CHANGE, resumable, roll_out)

    if args.canary < 0 or args.batch < 1 or not 0 <= args.max_fail <= 100:
        raise SessionConfigError("--canary is 0 or more, --batch 1 or more, --max-fail a percentage from 0 to 100")
    if args.ask and args.json:
        raise SessionConfigError("--ask asks you at this terminal, --json is for scripts that nobody answers: use one")
    if args.check and (args.ask or args.resume):
        raise SessionConfigError("--check changes nothing, so there is nothing to --resume or to --ask about: "
                                 "leave those out")
    try:
        recipe = load_recipe(Path(args.recipe))
        inventory = load_inventory(Path(args.inventory))
        names = inventory.select(args.limit)
        entries = inventory.entries(names)
        check_steps(recipe, names)  # before any host is touched
    except (RecipeError, InventoryError) as e:
        raise SessionConfigError(str(e)) from None
    from agent.fleet.recipe import recipe_edits  # lazy: per command

    warnings = [f"{args.recipe}: {edit}" for edit in recipe_edits(recipe)] + inventory_warnings(inventory, names)
    if args.sims:  # an earlier rollout's machines: one that is not there (pruned, a new name) is built fresh
        from tools.hosts.sim import is_sim_root  # lazy: only with --sims

        fresh = [e.name for e in entries if e.transport == "sim" and not is_sim_root(Path(args.sims) / e.name)]
        if fresh:
            warnings.append(f"--sims {args.sims}: no simulated host there for {', '.join(fresh)}: a fresh machine "
                            f"is built for {'each' if len(fresh) > 1 else 'it'}")
    for warning in warnings:
        print(json.dumps({"event": "warning", "warning": warning}) if args.json else f"agent: warning: {warning}",
              file=sys.stdout if args.json else sys.stderr, flush=True)
    from app.run import trust_keys_of  # lazy: per command

    trust_keys_of(entries, args.trust_host_key)
    earlier, link, recover = None, None, {}
    canary, batch, max_fail = min(args.canary, len(entries)), args.batch, args.max_fail
    if args.resume:
        if args.dir:
            raise SessionConfigError("--resume DIR goes on in DIR: leave --dir out")
        out_dir = Path(args.resume)
        try:
            earlier, link, plan, recover = resumable(out_dir, Path(args.recipe), names)
        except RecipeError as e:
            raise SessionConfigError(str(e)) from None
        canary, batch, max_fail = plan.get("canary", canary), plan.get("batch", batch), plan.get("max_fail_percent",
                                                                                                  max_fail)
        if args.sims and plan.get("sims") and Path(args.sims).absolute() != Path(plan["sims"]):
            raise SessionConfigError(f"the rollout in {out_dir} ran on the simulated hosts in {plan['sims']}: leave "
                                     "--sims out to go on with them")
        args.sims = plan.get("sims") or args.sims
    else:
        out_dir = Path(args.dir) if args.dir else _default_dir()
        if any(out_dir.glob("fleet*.jsonl")):
            raise SessionConfigError(f"{out_dir} already holds a rollout (fleet.jsonl): give another --dir, or "
                                     f"--resume {out_dir} to go on with it")
    hand_over = _HandOver(args, recipe) if args.ask else None  # the model's endpoint is checked before any host
    began = time.monotonic()
    show = _Progress(args.json)
    show.intro(len(entries), canary, batch, max_fail, out_dir, carried=len(earlier or []))
    result = roll_out(recipe, Path(args.recipe), entries, canary=canary, batch=batch, max_fail_percent=max_fail,
                      out_dir=out_dir, on_event=show.event, earlier=earlier, resumes=link, hand_over=hand_over,
                      recover=recover, check=args.check, sim_dir=Path(args.sims) if args.sims else None,
                      warnings=warnings)
    show.recap(result, time.monotonic() - began)
    if result.stopped == "interrupted":
        if not args.json:
            print(f"agent: interrupted; go on with: agent fleet {args.recipe} -i {args.inventory}"
                  f"{' --limit ' + args.limit if args.limit else ''} --resume {out_dir}", file=sys.stderr)
        return ExitCode.INTERRUPTED  # the command line turns it into a signal's own code where one came
    if result.stopped or any(o.status in (*COUNTS_AS_FAILED, INTERRUPTED) for o in result.outcomes):
        return ExitCode.FAILED
    if args.check:
        if not args.json:
            would = sum(o.status == WOULD_CHANGE for o in result.outcomes)
            print(f"agent: --check: nothing was changed; {would} host{'s' * (would != 1)} would change",
                  file=sys.stderr)
        return ExitCode.FAILED if any(o.status in COUNTS_AS_FAILED for o in result.outcomes) else ExitCode.OK
    if result.outcomes and all(o.status == HELD for o in result.outcomes):
        if not args.json:
            print("agent: every host was held: the recipe's preconditions match none of them, nothing was changed",
                  file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.OK



class _HandOver:
    """`--ask`: the operator is asked about each held host; on a yes, the host's session with the model, at this
    terminal, every change approved by the operator (agent/fleet/handoff.py)."""

    def __init__(self, args, recipe):
        from agent.session_builder import make_model  # lazy: loads the model SDK, only with --ask
        from app.chat import TerminalApprover  # lazy: as above
        from app.ui import make_view  # lazy: as above

        self.recipe = recipe
        self.model = make_model(args.model, args.base_url, args.model_timeout)
        self.view = make_view(verbosity=getattr(args, "verbosity", None))
        self.approver_of = lambda: TerminalApprover(view=self.view)

    def __call__(self, held, entry, transcript: Path, sims: dict, start_info: dict):
        from agent.fleet.handoff import run_handoff  # lazy: with the first yes

        self.view.info(f"{held.host} was held: {held.reason.removeprefix('held: ')}.")
        question = (f"hand {held.host} to the model ({self.model.name}) in a session of its own? Every change it "
                    "makes there is asked of you. [y/N] ")
        while True:
            try:
                answer = self.view.read_line(question).strip().lower()
            except EOFError:
                answer = "n"
            if answer in ("y", "yes", "n", "no", ""):
                break
            self.view.warn("answer y or n")
        if answer not in ("y", "yes"):
            self.view.info(f"{held.host} stays held")
            return None
        self.view.info(f"{held.host}: the model's session is recorded in {transcript}")
        return run_handoff(self.recipe, entry, held, model=self.model, approver=self.approver_of(),
                           transcript=transcript, listeners=[self.view], start_info=start_info, sims=sims)


def _default_dir() -> Path:
    from agent.record.transcript import new_transcript_path  # lazy: only without --dir

    path = new_transcript_path("fleet")
    return path.with_suffix("")


class _Progress:
    """One line per batch and per host as it ends (or one JSON object per line), then the recap."""

    def __init__(self, as_json: bool):
        self.as_json = as_json

    def _say(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def intro(self, hosts: int, canary: int, batch: int, max_fail: float, out_dir: Path, carried: int = 0) -> None:
        if not self.as_json:
            again = f" (resumed: {carried} host{'s' * (carried != 1)} carried over)" if carried else ""
            self._say(f"fleet: {hosts} host{'s' * (hosts != 1)}, canary {min(canary, hosts)}, batches of {batch}, "
                      f"stop when more than {max_fail:g}% of the hosts attempted fail; transcripts in {out_dir}{again}")

    def event(self, kind: str, data: dict) -> None:
        if self.as_json:
            print(json.dumps({"event": kind, **data}), flush=True)
        elif kind == "batch":
            what = "canary" if data["canary"] else f"batch {data['batch']}"
            self._say(f"-- {what}: {', '.join(data['hosts'])}")
        elif kind == "host":
            ended = data.get("ended") or data["status"]
            why = str(data["reason"]).removeprefix(f"{data['status']}: ")  # said once, not in both columns
            self._say(f"   {data['host']:<16} {ended:<18} {clip(why, 160)}")

    def recap(self, result, elapsed: float) -> None:
        counts = result.counts()
        if self.as_json:
            print(json.dumps({"event": "recap", "counts": counts, "stopped": result.stopped,
                              "transcript": str(result.transcript), "report": str(result.page),
                              "hosts": [o.as_dict() for o in result.outcomes]}), flush=True)
            return
        self._say(f"\nRECAP {'*' * 60}")
        for o in result.outcomes:
            marks = [f"{k}={int(o.status == k or (k, o.status) == ('ok', 'already at target'))}"
                     for k in ("ok", "changed", "failed", "held")]
            extra = (" rolled_back=1" if o.rolled_back else "") + (" handed_over=1" if o.handed_over else "")
            self._say(f"{o.host:<16}: {'  '.join(marks)}  [{o.ended()}]{extra}")
        said = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        self._say(f"\n{said}; {elapsed:.0f} s" + (f"; stopped: {result.stopped}" if result.stopped else ""))
        self._say(f"fleet transcript: {result.transcript}\nreport:           {result.page}")
