"""The end of a scripted run: the state the session left, and the goal file's success checks.

Both are the product's own read-only verification, not the model's claim: they run through
the host layer after the model has finished, and each result is a transcript event
(`final_state`, `check`, then `goal_result`) that the report cites.

Every piece of it only reads, so all of it runs at once: each host's pip freeze and inspection,
on every host, beside every check. Waiting for each in turn would add their times up at the end
of every run; the events are still written in the one order, hosts by name, then checks.
"""

from __future__ import annotations

import concurrent.futures as cf
import shlex
import threading
from dataclasses import dataclass
from typing import Any

from agent.goal import CHECK_KINDS, Goal, OutputsCheck, SuccessCheck
from agent.loop import Session
from agent.safety.classifier import classify
from tools.base import RiskClass, ToolContext, ToolError
from tools.hosts import HostError
from tools.inspect_host import InspectHost, parse_nvcc

# At most this many commands of the end at once (two per host, one per check).
MAX_PARALLEL = 16
# After a Ctrl-C, how long the running commands get to stop (their cancel kills them) before the run goes on.
CANCEL_WAIT_S = 30.0


@dataclass
class CheckResult:
    ok: bool
    detail: str


END_READ = "final_state"  # session.store[END_READ][host] -> its inspection at the end, as recorded


def verify_end(goal: Goal | None, session: Session, hosts: list[str] | None = None,
               run_checks: bool = True, failures: list[str] | None = None) -> bool | None:
    """Record the final state of `hosts` (every host in scope by default), run the goal's success checks
    (unless `run_checks` is false, or there is no goal: a chat), and say whether they all passed (None
    when none ran). Each failed check's line is appended to `failures`, for the verdict to name.

    On Ctrl-C the running commands are stopped, what had finished is recorded, and the interrupt goes on.
    """
    cancel = threading.Event()
    backed_up = {r.host: r.target for r in session.gate.ledger.all()}
    hosts = sorted(session.gate.scope if hosts is None else hosts)
    success = list(goal.success) if goal is not None and run_checks else []
    if not hosts and not success:
        return None
    pool = cf.ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, 2 * len(hosts) + len(success) or 1),
                                 thread_name_prefix="final")
    try:
        states = [_FinalState(session, name, backed_up.get(name), cancel, pool) for name in hosts]
        checks = [pool.submit(_check, check, goal, session, cancel) for check in success]
        futures = [f for st in states for f in st.futures] + checks
        try:
            _wait_all(futures)
        except KeyboardInterrupt:
            finished = {f for f in futures if f.done()}
            cancel.set()
            cf.wait(futures, timeout=CANCEL_WAIT_S)
            _record(session, [st for st in states if finished.issuperset(st.futures)],
                    [(i, f) for i, f in enumerate(checks) if f in finished], goal)
            raise
        all_ok = _record(session, states, list(enumerate(checks)), goal, failures)
        return all_ok if success else None
    finally:
        cancel.set()  # whatever ended this (an interrupt while starting them too), nothing goes on running
        pool.shutdown(wait=False, cancel_futures=True)


def _wait_all(futures: list[cf.Future]) -> None:
    pending = set(futures)
    while pending:  # in slices, so a Ctrl-C is seen at once
        _, pending = cf.wait(pending, timeout=0.2)


class _FinalState:
    """One host's final state: its pip freeze and its inspection, running side by side."""

    def __init__(self, session: Session, host_name: str, backed_up: str | None, cancel: threading.Event,
                 pool: cf.ThreadPoolExecutor):
        self.host_name = host_name
        self.python = backed_up
        self.futures: list[cf.Future] = []
        self.error: str | None = None  # the host could not be used at all
        try:
            host = session.hosts.get(host_name)
        except HostError as e:  # an unreachable host is a fact of the final state, not a crash
            self.error = str(e)
            return
        self.python = backed_up or host.spec.python or "python3"
        self.futures = [pool.submit(_freeze, host, self.python, cancel),
                        pool.submit(_inspect, session, host_name, self.python, cancel)]

    def event(self) -> dict[str, Any]:
        freeze_text = inspect = None
        errors: list[str] = []
        if self.error is not None:
            errors.append(self.error)
        else:
            freeze = _outcome(self.futures[0])
            if isinstance(freeze, Exception):
                # As when the freeze came first: a host that cannot run it has no inspection either.
                errors.append(str(freeze))
            else:
                if freeze.ok:
                    freeze_text = freeze.stdout
                else:
                    errors.append(f"pip freeze failed: {(freeze.stderr or freeze.stdout).strip()[-300:]}")
                inspected = _outcome(self.futures[1])
                if isinstance(inspected, Exception):
                    errors.append(str(inspected))
                else:
                    inspect = inspected
        return dict(host=self.host_name, python=self.python, freeze=freeze_text, inspect=inspect,
                    error="; ".join(errors) or None)


def _outcome(future: cf.Future) -> Any:
    """A piece's result, or the host or tool error it ended with (any other exception is a crash: raised)."""
    exc = future.exception()
    if exc is None:
        return future.result()
    if isinstance(exc, (HostError, ToolError)):
        return exc
    raise exc


def _freeze(host, python: str, cancel: threading.Event):
    return host.run(f"{shlex.quote(python)} -m pip freeze --all", timeout=300,
                    env={"PIP_DISABLE_PIP_VERSION_CHECK": "1"}, cancel=cancel)


def _inspect(session: Session, host_name: str, python: str, cancel: threading.Event) -> dict:
    tool = InspectHost()
    ctx = ToolContext(hosts=session.hosts, artifacts=session.artifacts, call_id="final_state", cancel=cancel)
    return tool.run(ctx, tool.parse_args({"host": host_name, "python": python})).model_dump(mode="json")


def _check(check: SuccessCheck, goal: Goal, session: Session, cancel: threading.Event) -> CheckResult:
    try:
        return _run_one(check, goal, session, cancel)
    except (HostError, ToolError) as e:
        return CheckResult(False, f"could not be checked: {e}")


def _record(session: Session, states: list[_FinalState], checks: list[tuple[int, cf.Future]], goal: Goal | None,
            failures: list[str] | None = None) -> bool:
    """Write the events in their one order, hosts then checks; whether every check recorded passed."""
    for st in states:
        ev = st.event()
        session.emit("final_state", **ev)
        session.store.setdefault(END_READ, {})[st.host_name] = ev.get("inspect")
    all_ok = True
    for i, future in checks:
        check, result = goal.success[i], future.result()
        kind = next(k for k in CHECK_KINDS if getattr(check, k) is not None)
        all_ok &= result.ok
        if not result.ok and failures is not None:
            failures.append(f"{kind} check {i + 1}: {result.detail}")
        session.emit("check", index=i, kind=kind, spec=getattr(check, kind).model_dump(), ok=result.ok,
                     detail=result.detail)
    return all_ok


def _run_one(check: SuccessCheck, goal: Goal, session: Session, cancel: threading.Event) -> CheckResult:
    if check.toolkit is not None:
        c = check.toolkit
        details, ok = [], True
        for name in goal.hosts_of(c.host):
            host = session.hosts.get(name)
            nvcc = c.path.rstrip("/") + "/bin/nvcc"
            r = host.run(f"{shlex.quote(nvcc)} --version", timeout=60, cancel=cancel)
            version, build = parse_nvcc(r.stdout) if r.ok else (None, None)
            good = version == c.version
            ok &= good
            details.append(f"{name}: {c.path}/bin/nvcc reports " + (f"release {version} ({build})" if version else
                                                                    f"nothing ({_last(r.stderr or r.stdout)})"))
        return CheckResult(ok, "; ".join(details))
    if check.throughput is not None:
        c = check.throughput
        results = session.store.get("run_bench", {})
        after, before = results.get(c.label), results.get(c.compare_to)
        if after is None or before is None:
            missing = [lbl for lbl, r in ((c.label, after), (c.compare_to, before)) if r is None]
            return CheckResult(False, f"no benchmark under label {', '.join(repr(m) for m in missing)} "
                                      f"(labels measured: {', '.join(sorted(results)) or 'none'})")
        ratio = after["median"] / before["median"] if before["median"] else float("inf")
        ok = ratio >= c.min_ratio
        return CheckResult(ok, f"{c.label} median {after['median']:.2f} vs {c.compare_to} median "
                               f"{before['median']:.2f} {after.get('unit') or ''}: ratio {ratio:.3f} "
                               f"({'>=' if ok else '<'} {c.min_ratio}); runs {after['values']} vs {before['values']}")
    if check.outputs is not None:
        return _outputs_check(check.outputs, session.store.get("check_outputs", {}))
    c = check.command
    risk = classify(c.run)
    if risk.cls is not RiskClass.READ_ONLY:
        return CheckResult(False, f"not run: a success check must be read-only, and this is {risk.cls.value} "
                                  f"({risk.reason})")
    details, ok = [], True
    for name in goal.hosts_of(c.host):
        r = session.hosts.get(name).run(c.run, timeout=300, cancel=cancel)
        good = r.exit_code == c.expect_exit and (c.expect_output is None or c.expect_output in r.stdout)
        ok &= good
        details.append(f"{name}: exit {r.exit_code}" + (
            f", output {'contains' if c.expect_output in r.stdout else 'lacks'} {c.expect_output!r}"
            if c.expect_output is not None else ""))
    return CheckResult(ok, "; ".join(details))


def _outputs_check(c: OutputsCheck, results: dict) -> CheckResult:
    """What the served model answered under c.label against c.compare_to, as check_outputs recorded both."""
    from tools.outputs_probe import judge  # lazy: only a goal with an outputs check reads it

    after, before = results.get(c.label), results.get(c.compare_to)
    if after is None or before is None:
        missing = [lbl for lbl, r in ((c.label, after), (c.compare_to, before)) if r is None]
        return CheckResult(False, f"no check_outputs result under label {', '.join(repr(m) for m in missing)} "
                                  f"(labels measured: {', '.join(sorted(results)) or 'none'})")
    return CheckResult(*judge(after, before, c.same, c.max_accuracy_drop, (c.label, c.compare_to)))


def _last(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"
