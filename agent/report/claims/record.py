"""What the record holds that the answer's statements are checked against, for the whole run or one host.

A statement about one host is checked against that host's record only: `Record.at(host)` is the same
view over the steps, final states and backups of that host.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from agent.report.data import Report, Step
from tools.pip_freeze_backup import normalize, parse_freeze

ALIASES = {"pytorch": "torch"}  # names the answer may use for a package


@dataclass
class Version:
    host: str | None
    version: str
    where: str


class Record:
    """The facts of the transcript (of one host of it, when `host` is given)."""

    def __init__(self, r: Report, host: str | None = None):
        self.report = r
        self.host = host
        self.hosts = run_hosts(r)
        self.steps = [s for s in r.steps if host is None or s.host == host]
        self.final_states = {h: st for h, st in r.final_states.items() if host is None or h == host}
        self.backups = [b for b in r.backups if host is None or b.host == host]
        self.bench_calls = [s for s in self.steps if s.tool == "run_bench"]
        self.benches = [s for s in self.bench_calls if s.succeeded]
        self.comparisons = [s for s in self.benches if s.data.get("comparison")]
        self.installs = [s for s in self.steps if s.tool == "install_runfile"]
        self.restores = [s for s in self.steps if s.tool == "restore_backup"]
        self.inspections = [(s.host, s.data, f"inspect_host, {s.where}") for s in self.steps
                            if s.tool == "inspect_host" and s.succeeded]
        self.inspections += [(h, st["inspect"], f"the final state of {h}")
                             for h, st in self.final_states.items() if isinstance(st.get("inspect"), dict)]
        self.backup_ids = {s.data.get("backup_id") for s in self.steps
                           if s.tool == "pip_freeze_backup" and s.succeeded}
        self.packages = self._package_history()
        self.package_names = {n: n for n in self.packages} | {a: n for a, n in ALIASES.items() if n in self.packages}
        self._per_host: dict[str, Record] = {}

    @property
    def several_hosts(self) -> bool:
        return len(self.hosts) > 1

    def at(self, host: str | None) -> Record:
        """The record of one host (the whole run's for None, or when the run has one host)."""
        if host is None or not self.several_hosts or self.host is not None:
            return self
        if host not in self._per_host:
            self._per_host[host] = Record(self.report, host)
        return self._per_host[host]

    def call_labels(self) -> set[str]:
        """The labels the session's benchmark calls gave, finished or not."""
        return {str(label) for s in self.bench_calls if (label := (s.data or {}).get("label") or arg(s, "label"))}

    def labels(self) -> set[str]:
        """Labels a figure of the answer may name: the calls', and before/after, which an answer may use for
        figures that no benchmark of the session measured."""
        return self.call_labels() | {"before", "after"}

    def bench_words(self) -> list[str]:
        """Words that mark a sentence as one about the session's benchmarks: their metrics and units."""
        words = {str(s.data.get(k)) for s in self.benches for k in ("metric", "unit") if s.data.get(k)}
        return sorted(words, key=len, reverse=True)

    def _package_history(self) -> dict[str, list[Version]]:
        """Every version of each package the record shows, in the order the record shows them."""
        hist: dict[str, list[Version]] = {}

        def add(name: str, version: str | None, host: str | None, where: str) -> None:
            if version and not version.startswith("@"):
                hist.setdefault(normalize(name), []).append(Version(host, version, where))

        backups = {b.backup_id: b for b in self.backups}
        for s in self.steps:
            if not s.succeeded:
                continue
            d = s.data
            if s.tool == "inspect_host":
                py = d.get("python") or {}
                for name, version in (py.get("packages") or {}).items():
                    add(name, version, s.host, f"inspect_host, {s.where}")
                add("torch", py.get("torch"), s.host, f"inspect_host, {s.where}")
            elif s.tool == "pip_freeze_backup" and backups.get(d.get("backup_id")):
                for name, line in (backups[d["backup_id"]].freeze or {}).items():
                    add(name, pinned(line), s.host, f"backup {d['backup_id']}, {s.where}")
            elif s.tool == "pip_install":
                for c in d.get("changes") or []:
                    add(c.get("package", ""), pinned(c.get("before")), s.host, f"pip_install, {s.where}")
                    add(c.get("package", ""), pinned(c.get("after")), s.host, f"pip_install, {s.where}")
            elif s.tool == "restore_backup" and d.get("restored") and backups.get(d.get("backup_id")):
                for name, line in (backups[d["backup_id"]].freeze or {}).items():
                    add(name, pinned(line), s.host, f"restore_backup, {s.where}")
        for host, st in self.final_states.items():
            where = f"the final state of {host}"
            for name, version in (((st.get("inspect") or {}).get("python") or {}).get("packages") or {}).items():
                add(name, version, host, where)
            if isinstance(st.get("freeze"), str):
                for name, line in parse_freeze(st["freeze"]).items():
                    add(name, pinned(line), host, where)
        return hist

    def final_versions(self, package: str) -> list[Version]:
        """The latest version the record shows of a package, one per host."""
        last: dict[str | None, Version] = {}
        for v in self.packages.get(package, []):
            last[v.host] = v
        return list(last.values())

    def toolkits_at_start(self) -> set[str]:
        first: dict[str | None, dict] = {}
        for host, d, _ in self.inspections:
            first.setdefault(host, d)
        return {t.get("version") for d in first.values() for t in d.get("toolkits") or [] if t.get("version")}

    def toolkits_at_end(self) -> tuple[set[str], str] | None:
        """The toolkit versions of the latest inspection of each host, and where that was read."""
        last: dict[str | None, tuple[dict, str]] = {}
        for host, d, where in self.inspections:
            last[host] = (d, where)
        if not last:
            return None
        versions = {t.get("version") for d, _ in last.values() for t in d.get("toolkits") or [] if t.get("version")}
        return versions, ", ".join(w for _, w in last.values())


def run_hosts(r: Report) -> list[str]:
    """Every host of the run, in the order the record first names it."""
    named = list(r.start.get("hosts") or []) + [s.host for s in r.steps] + list(r.final_states)
    return [h for h in dict.fromkeys(named) if isinstance(h, str) and h]


# --------------------------------------------------------------------------- small readers of steps and values


def arg(s: Step, key: str):
    return s.arguments.get(key) if isinstance(s.arguments, dict) else None


def pinned(line: str | None) -> str | None:
    """`torch==2.10.0+cu128` -> `2.10.0+cu128`; anything else (a URL, no pin) -> None."""
    if line and "==" in line:
        return line.split("==", 1)[1].split(";", 1)[0].strip()
    return None


def outcome(s: Step) -> str:
    """What became of a step, in a few words: `turn 3, call 1: refused (the operator declined it)`."""
    if s.status == "refused" or s.verdict == "deny":
        why = (s.reason or "").split(";")[0]
        return f"{s.where}: refused" + (f" ({why})" if why else "")
    if s.verdict == "skip":
        return f"{s.where}: not run (dry run)"
    text = (s.error or s.content or s.status or "no result").strip().splitlines()[0]
    text = text.removeprefix("error: ")
    return f"{s.where}: {s.status or 'no result'}" + (f" ({short(text)})" if text != s.status else "")


def short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.6g}"


def close(claimed: str, value: float | None, units: float = 0.5) -> bool:
    """Whether a figure written with the answer's precision states `value` (within `units` of its last digit);
    `1,250.5` is 1250.5."""
    if value is None:
        return False
    claimed = claimed.replace(",", "")
    decimals = len(claimed.partition(".")[2])
    return abs(float(claimed) - value) <= units * 10 ** -decimals + 1e-9


def median(s: Step) -> float | None:
    values = s.data.get("values") or []
    return statistics.median(values) if values else s.data.get("median")


def same_version(claimed: str, known: str) -> bool:
    """`2.10.0+cu130` states `2.10.0+cu130`; `2.10` and `2.10.0` state `2.10.0+cu128` too; `+cu130` or `cu130`
    states any version built for cu130."""
    c, k = claimed.lower().lstrip("v"), known.lower().lstrip("v")
    k_public, _, k_local = k.partition("+")
    if c.startswith("+") or re.fullmatch(r"cu\d+", c):
        return k_local == c.lstrip("+")
    c_public, _, c_local = c.partition("+")
    if c_local and c_local != k_local:
        return False
    parts = c_public.split(".")
    return k_public.split(".")[: len(parts)] == parts


def version_any(claimed: str, known: set[str]) -> bool:
    return any(same_version(claimed, k) for k in known)
