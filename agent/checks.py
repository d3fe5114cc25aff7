"""The end of a scripted run: the state the session left, and the goal file's success checks.

Both are the product's own read-only verification, not the model's claim: they run through
the host layer after the model has finished, and each result is a transcript event
(`final_state`, `check`, then `goal_result`) that the report cites.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from agent.goal import Goal, SuccessCheck
from agent.loop import Session
from agent.safety.classifier import classify
from tools.base import RiskClass, ToolContext, ToolError
from tools.hosts import HostError
from tools.inspect_host import InspectHost, parse_nvcc


@dataclass
class CheckResult:
    ok: bool
    detail: str


def capture_final_state(session: Session) -> None:
    """For each host in scope: pip freeze of the interpreter backed up (or the default) and inspect_host."""
    backed_up = {r.host: r.target for r in session.gate.ledger.all()}
    for host_name in sorted(session.gate.scope):
        python = backed_up.get(host_name)
        freeze_text = inspect = None
        errors: list[str] = []
        try:
            host = session.hosts.get(host_name)
            python = python or host.spec.python or "python3"
            freeze = host.run(f"{shlex.quote(python)} -m pip freeze --all", timeout=300,
                              env={"PIP_DISABLE_PIP_VERSION_CHECK": "1"})
            if freeze.ok:
                freeze_text = freeze.stdout
            else:
                errors.append(f"pip freeze failed: {(freeze.stderr or freeze.stdout).strip()[-300:]}")
            tool = InspectHost()
            ctx = ToolContext(hosts=session.hosts, artifacts=session.artifacts, call_id="final_state")
            inspect = tool.run(ctx, tool.parse_args({"host": host_name, "python": python})).model_dump(mode="json")
        except (HostError, ToolError) as e:  # an unreachable host is a fact of the final state, not a crash
            errors.append(str(e))
        session.emit("final_state", host=host_name, python=python, freeze=freeze_text, inspect=inspect,
                     error="; ".join(errors) or None)


def run_checks(goal: Goal, session: Session) -> bool:
    """Run every success check, record each, and say whether all passed (True when there are none)."""
    all_ok = True
    for i, check in enumerate(goal.success):
        kind = next(k for k in ("toolkit", "throughput", "command") if getattr(check, k) is not None)
        try:
            result = _run_one(check, goal, session)
        except (HostError, ToolError) as e:
            result = CheckResult(False, f"could not be checked: {e}")
        all_ok &= result.ok
        session.emit("check", index=i, kind=kind, spec=getattr(check, kind).model_dump(), ok=result.ok,
                     detail=result.detail)
    return all_ok


def _hosts_for(name: str | None, goal: Goal) -> list[str]:
    return [name] if name else goal.host_names()


def _run_one(check: SuccessCheck, goal: Goal, session: Session) -> CheckResult:
    if check.toolkit is not None:
        c = check.toolkit
        details, ok = [], True
        for name in _hosts_for(c.host, goal):
            host = session.hosts.get(name)
            nvcc = c.path.rstrip("/") + "/bin/nvcc"
            r = host.run(f"{shlex.quote(nvcc)} --version", timeout=60)
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
    c = check.command
    risk = classify(c.run)
    if risk.cls is not RiskClass.READ_ONLY:
        return CheckResult(False, f"not run: a success check must be read-only, and this is {risk.cls.value} "
                                  f"({risk.reason})")
    details, ok = [], True
    for name in _hosts_for(c.host, goal):
        r = session.hosts.get(name).run(c.run, timeout=300)
        good = r.exit_code == c.expect_exit and (c.expect_output is None or c.expect_output in r.stdout)
        ok &= good
        details.append(f"{name}: exit {r.exit_code}" + (
            f", output {'contains' if c.expect_output in r.stdout else 'lacks'} {c.expect_output!r}"
            if c.expect_output is not None else ""))
    return CheckResult(ok, "; ".join(details))


def _last(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"
