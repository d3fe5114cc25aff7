"""Versions: the driver, the CUDA it supports, nvcc, the toolkit on PATH, and any package the record knows.

    "driver 590.48.01", "the driver supports CUDA 13.1", "nvcc reports 13.0", "toolkit on PATH is 12.8"
    "torch==2.10.0+cu130", "torch 2.10.0+cu128 -> 2.10.0+cu130", "torch is now 2.10.0+cu130"

checked against inspect_host, pip_install's changes, the backups' freezes and the final state, of the
host the words name. A version named in passing that the record does not show states nothing.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterator

from agent.report.claims.answer import NEGATED, VERSION, Reading
from agent.report.claims.findings import Finding
from agent.report.claims.record import Record, same_version
from tools.pip_freeze_backup import normalize

_DRIVER = re.compile(r"\bdriver(?:\s+version)?\s*:?\s+(?P<v>\d{3}\.\d{1,3}(?:\.\d{1,3})?)\b", re.I)
_DRIVER_CUDA = re.compile(r"\bdriver\b[^;\n]{0,60}?\bsupport(?:s|ing)?\s+CUDA\s+(?P<v>\d+\.\d+)\b", re.I)
_NVCC = re.compile(r"\bnvcc\b(?:\s+(?:on\s+PATH|reports|says|is|now))*\s+(?:release\s+|version\s+)?(?P<v>\d+\.\d+)\b",
                   re.I)
_ON_PATH = re.compile(r"\btoolkit\s+on\s+PATH\s+(?:is\s+)?(?P<v>\d+\.\d+)\b", re.I)


def versions(rd: Reading) -> Iterator[Finding]:
    yield from _inspected(rd, _DRIVER, "driver", lambda d: {(d.get("driver") or {}).get("version")})
    yield from _inspected(rd, _DRIVER_CUDA, "the driver supports CUDA",
                          lambda d: {(d.get("driver") or {}).get("cuda_version")})
    yield from _inspected(rd, _ON_PATH, "the toolkit on PATH is",
                          lambda d: {(d.get("toolkit_on_path") or {}).get("version")})
    yield from _inspected(rd, _NVCC, "nvcc reports",
                          lambda d: {(d.get("toolkit_on_path") or {}).get("version")}
                          | {t.get("version") for t in d.get("toolkits") or []},
                          also=lambda rec: {s.data.get("nvcc_version") for s in rec.installs if s.succeeded})
    yield from _package_versions(rd)


def _inspected(rd: Reading, pattern: re.Pattern, what: str, facts, also=None) -> Iterator[Finding]:
    """A fact of inspect_host (or of the final state) that the answer states, of the host it names."""
    for m in pattern.finditer(rd.line):
        rec = rd.at(m.start())
        known: dict[str, str] = {}
        for _, d, where in rec.inspections:
            for v in facts(d):
                if v:
                    known.setdefault(str(v), where)
        for v in (also(rec) if also else ()):
            if v:
                known.setdefault(str(v), "install_runfile")
        if not known:
            continue
        v = m.group("v")
        says = f"the model says {what} {v}" + (f" on {rec.host}" if rec.host else "")
        hit = next((k for k in known if same_version(v, k)), None)
        if hit:
            yield Finding("version", m.group(0), says, f"the record shows {hit} ({known[hit]})", True)
        else:
            yield Finding("version", m.group(0), says,
                          "the record shows " + ", ".join(f"{k} ({w})" for k, w in known.items()), False)


def _name_pattern(name: str) -> str:
    return r"[-_.]".join(re.escape(part) for part in name.split("-"))


@lru_cache(maxsize=32)
def _package_pattern(names: tuple[str, ...]) -> re.Pattern:
    """`torch==X`, `torch X`, `torch X -> Y`, `torch is now X`, `torch moved to cu130`, for the names given."""
    alternation = "|".join(_name_pattern(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(
        rf"(?<![\w.-])(?P<name>{alternation})(?![\w-])"
        rf"(?:\s*==\s*|\s+(?:(?P<is>is)\s+|was\s+)?(?P<now>now\s+)?(?:(?:at|on)\s+)?(?:version\s+)?(?:from\s+)?"
        rf"|\s+(?:was\s+|is\s+|has\s+been\s+)?(?P<moved>moved|upgraded|updated|switched|downgraded)\s+to\s+(?:the\s+)?)"
        rf"(?P<v1>{VERSION})(?:\s*(?:->|→|=>|\bto\b)\s*(?:(?:{alternation})\s*==\s*)?(?P<v2>{VERSION}))?"
        rf"(?P<installed>\s+(?:(?:is|was|got|has\s+been)\s+)?(?:installed|in\s+place)\b)?", re.I)


def _package_versions(rd: Reading) -> Iterator[Finding]:
    if not rd.rec.package_names:
        return
    line = rd.line
    for m in _package_pattern(tuple(rd.rec.package_names)).finditer(line):
        rec = rd.at(m.start())
        package = rec.package_names.get(normalize(m.group("name")))
        if package is None:
            continue  # a package this host's record never shows
        before = line[max(0, m.start() - 24):m.start()]
        if NEGATED.search(before):
            continue  # "I did not install torch==X": what was not done is for the steps to show
        if rd.conditional(m.start()):
            continue
        # "is", "now", "moved to", "installed X" and "X is installed" speak of the state the session left.
        after_claim = bool(m.group("is") or m.group("now") or m.group("moved") or m.group("installed")
                           or re.search(r"\b(?:installed|now)\s+$", before, re.I))
        name = m.group("name") + (f" on {rec.host}" if rec.host else "")
        if m.group("v2"):
            yield _package_any(package, name, m.group("v1"), m.group(0), rec, before_word=True)
            yield _package_moved(package, name, m.group("v1"), m.group("v2"), m.group(0), rec)
        elif after_claim:
            yield _package_final(package, name, m.group("v1"), m.group(0), rec)
        else:
            # A version named in passing ("install torch==X next", "X is the latest") states nothing about
            # this host unless the record shows it.
            finding = _package_any(package, name, m.group("v1"), m.group(0), rec)
            if finding.agrees:
                yield finding


def _package_any(package: str, name: str, v: str, quote: str, rec: Record, before_word: bool = False) -> Finding:
    seen = rec.packages[package]
    says = f"the model says {name} {'was ' if before_word else ''}{v}{' before' if before_word else ''}"
    hit = next((k for k in seen if same_version(v, k.version)), None)
    if hit:
        return Finding("version", quote, says, f"the record shows {package} {hit.version} ({hit.where})", True)
    versions = ", ".join(dict.fromkeys(k.version for k in seen))
    return Finding("version", quote, says, f"the record shows only {package} {versions} ({seen[-1].where})", False)


def _package_moved(package: str, name: str, v1: str, v2: str, quote: str, rec: Record) -> Finding:
    """`torch X -> Y`: the record shows Y after it shows X (the session may have moved it again since)."""
    seen = rec.packages[package]
    first = next((i for i, k in enumerate(seen) if same_version(v1, k.version)), 0)
    says = f"the model says {name} moved to {v2}"
    hit = next((k for k in seen[first:] if same_version(v2, k.version)), None)
    if hit:
        return Finding("version", quote, says, f"the record shows {package} {hit.version} ({hit.where})", True)
    versions = ", ".join(dict.fromkeys(k.version for k in seen[first:]))
    return Finding("version", quote, says, f"the record shows {package} only at {versions} from then on "
                   f"({seen[-1].where})", False)


def _package_final(package: str, name: str, v: str, quote: str, rec: Record) -> Finding:
    finals = rec.final_versions(package)
    says = f"the model says {name} is {v} after"
    hit = next((k for k in finals if same_version(v, k.version)), None)
    k = hit or finals[-1]
    return Finding("version", quote, says, f"the record shows {package} {k.version} at the end ({k.where})",
                   hit is not None)
