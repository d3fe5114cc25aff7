"""Toolkits: "toolkit 13.0.1 installed", "CUDA 13.0 was NOT installed", "CUDA 12.8 -> 13.0", checked against
install_runfile's results and the toolkits inspect_host saw at the start and at the end, on the host the
words name."""

from __future__ import annotations

import re
from typing import Iterator

from agent.report.claims.answer import Reading
from agent.report.claims.findings import Finding
from agent.report.claims.record import Record, arg, outcome, version_any
from agent.report.data import Step

_INSTALLED = re.compile(
    r"\b(?:CUDA|toolkit)(?:\s+toolkit)?\s+(?P<v>\d+\.\d+(?:\.\d+)?)(?:\s+toolkit)?\s+"
    r"(?:(?:was|is|has\s+been|got|now)\s+)?(?P<neg>(?:not|never)\s+)?(?P<verb>installed|in\s+place)\b"
    r"|\b(?P<neg2>(?:not|never)\s+(?:yet\s+)?)?installed\s+(?:the\s+)?(?:CUDA\s+toolkit|CUDA|toolkit)\s+"
    r"(?P<v2>\d+\.\d+(?:\.\d+)?)\b", re.I)
_CUDA_ARROW = re.compile(r"\bCUDA(?:\s+toolkit)?\s+(?P<a>\d+\.\d+)\s*(?:->|→|=>|\bto\b)\s*(?P<b>\d+\.\d+(?:\.\d+)?)\b",
                         re.I)


def toolkits(rd: Reading) -> Iterator[Finding]:
    for m in _INSTALLED.finditer(rd.line):
        if rd.conditional(m.start()):
            continue
        v = m.group("v") or m.group("v2")
        negative = bool(m.group("neg") or m.group("neg2"))
        finding = _install_claim(v, negative, m.group(0), rd.at(m.start()),
                                 state=(m.group("verb") or "").lower() != "installed")
        if finding:
            yield finding
    for m in _CUDA_ARROW.finditer(rd.line):
        if rd.conditional(m.start()):
            continue
        rec = rd.at(m.start())
        finding = _install_claim(m.group("b"), False, m.group(0), rec, state=True,
                                 says=f"the model says CUDA {m.group('a')} -> {m.group('b')}" + _on(rec))
        if finding:
            yield finding


def _on(rec: Record) -> str:
    return f" on {rec.host}" if rec.host else ""


def _install_versions(s: Step) -> set[str]:
    d = s.data or {}
    out = {d.get("version"), d.get("nvcc_version"), arg(s, "version")}
    for runfile in (d.get("runfile"), arg(s, "runfile")):
        m = re.search(r"cuda_(\d+\.\d+(?:\.\d+)?)_", str(runfile or ""))
        if m:
            out.add(m.group(1))
    return {str(v) for v in out if v}


def _installed_text(s: Step) -> str:
    d = s.data
    version = max(_install_versions(s), key=len)
    return f"install_runfile installed {version} into {d.get('toolkit_path')} ({s.where})"


def _install_claim(v: str, negative: bool, quote: str, rec: Record, state: bool, says: str | None = None
                   ) -> Finding | None:
    """A toolkit the answer says was (or was not) installed, or is in place after the session."""
    done = [s for s in rec.installs if s.succeeded]
    match = next((s for s in done if version_any(v, _install_versions(s))), None)
    end = rec.toolkits_at_end()
    at_end = end is not None and version_any(v, end[0])
    at_start = version_any(v, rec.toolkits_at_start())
    says = says or f"the model says toolkit {v} " + ("was not installed" if negative else "is in place" if state
                                                     else "was installed") + _on(rec)
    if negative:
        if match:
            return Finding("toolkit", quote, says, _installed_text(match), False)
        if at_end and not at_start:
            return Finding("toolkit", quote, says, f"the record shows toolkit {v} at the end ({end[1]})", False)
        tried = [s for s in rec.installs if version_any(v, _install_versions(s))]
        return Finding("toolkit", quote, says, "no install_runfile call installed it"
                       + (f" ({'; '.join(outcome(s) for s in tried)})" if tried else ""), True)
    if match:
        return Finding("toolkit", quote, says, _installed_text(match), True)
    if at_start:
        return None  # it was there before the session: "installed" may mean just that
    if at_end:
        return Finding("toolkit", quote, says, f"the record shows toolkit {v} at the end ({end[1]})", True)
    if done:
        return Finding("toolkit", quote, says, "; ".join(_installed_text(s) for s in done), False)
    why = f" ({'; '.join(outcome(s) for s in rec.installs)})" if rec.installs else ""
    return Finding("toolkit", quote, says, f"no install_runfile call succeeded{why}", False)
