"""A finished call's result in a few labelled rows, for people: the facts that matter of each tool.

The model reads a tool's whole result (its JSON, or its own rendering); the terminal shows what an
operator looks at first: for inspect_host the GPUs, the driver and the newest CUDA it supports, the
toolkits and the torch build; for the other tools their key fields. The whole result stays in the
transcript. A tool without rows here (or a result of an older shape) is shown as before: the first
lines of what the model read.

Pure functions of a `tool_result` event's `data`; values come from the host and the web, so every
one is made a single line without control characters before it is shown.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable

Rows = list[tuple[str, str]]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
MAX_VALUE = 240  # characters of one value shown; the whole result is in the transcript
MAX_ITEMS = 4  # list entries shown (warnings, changes, search hits) before "and N more"


def result_rows(tool: str, data: Any) -> Rows | None:
    """The rows of one result, or None when this tool has none (or the data is not of its shape)."""
    summarize = _SUMMARIES.get(tool)
    if summarize is None or not isinstance(data, dict):
        return None
    try:
        rows = summarize(data)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # a result of another shape (an older transcript): shown the plain way
    return [(label, _one_line(value)) for label, value in rows if value not in (None, "")] or None


def _one_line(value: Any) -> str:
    text = _CONTROL.sub(" ", str(value)).strip()
    text = re.sub(r" {2,}", " ", text)
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + "…"


def _listed(items: list[str], more: str = "more") -> str:
    shown = "; ".join(items[:MAX_ITEMS])
    return shown + (f"; and {len(items) - MAX_ITEMS} {more}" if len(items) > MAX_ITEMS else "")


def _gib(mib: Any) -> str:
    return f"{mib / 1024:.0f} GiB" if isinstance(mib, (int, float)) else "? GiB"


# --------------------------------------------------------------------------- per tool


def _inspect_host(d: dict) -> Rows:
    rows: Rows = []
    gpus = d.get("gpus") or []
    if gpus:
        kinds = Counter((g.get("name"), g.get("compute_capability"), g.get("memory_total_mib")) for g in gpus)
        rows.append(("GPU", ", ".join(
            f"{n} × {name}" + (f" (compute {cc}, {_gib(mem)})" if cc or mem else "")
            for (name, cc, mem), n in kinds.items())))
    else:
        rows.append(("GPU", "none found"))
    driver = d.get("driver")
    if driver:
        rows.append(("driver", driver.get("version")))
        rows.append(("driver CUDA", f"up to {driver['cuda_version']}" if driver.get("cuda_version")
                     else "not reported by nvidia-smi"))
    else:
        rows.append(("driver", "none found (no nvidia-smi answer)"))
    toolkits = [t.get("version") or t.get("path") for t in d.get("toolkits") or []]
    on_path = d.get("toolkit_on_path") or {}
    link = d.get("cuda_symlink")
    shown = ", ".join(str(t) for t in toolkits) or "none installed"
    extras = []
    if on_path.get("version"):
        extras.append(f"nvcc on PATH: {on_path['version']}")
    if link:
        extras.append(f"cuda -> {link}")
    rows.append(("toolkits", shown + (f" ({'; '.join(extras)})" if extras else "")))
    python = d.get("python") or {}
    if python.get("torch"):
        cuda = f"CUDA {python['torch_cuda']}" if python.get("torch_cuda") else "no CUDA build"
        available = python.get("cuda_available")
        devices = (f", {python.get('device_count')} GPU{'s' * (python.get('device_count') != 1)} visible"
                   if available else ", CUDA not available" if available is False else "")
        rows.append(("torch", f"{python['torch']} ({cuda}{devices})"))
    elif python:
        rows.append(("torch", f"not importable: {python['error']}" if python.get("error") else "not installed"))
    if python.get("executable"):
        rows.append(("python", f"{python['executable']} {python.get('version') or ''}"))
    if d.get("os") or d.get("kernel"):
        rows.append(("os", " · ".join(str(x) for x in (d.get("os"), d.get("kernel")) if x)))
    if d.get("notes"):
        rows.append(("notes", _listed([str(n) for n in d["notes"]])))
    return rows


def _check_compat(d: dict) -> Rows:
    verdict = "nothing blocks it" if d.get("ok") else f"blocked ({len(d.get('blockers') or [])} blocker(s))"
    rows: Rows = [(f"CUDA {d.get('cuda')}", verdict)]
    if d.get("blockers"):
        rows.append(("blockers", _listed([b.get("what", "") for b in d["blockers"]])))
    if d.get("risks"):
        rows.append(("risks", _listed([r.get("what", "") for r in d["risks"]])))
    rows.append(("driver", f"{d.get('driver') or 'none'}" + (f" (CUDA up to {d['driver_cuda']})"
                                                             if d.get("driver_cuda") else "")))
    return rows


def _pip_freeze_backup(d: dict) -> Rows:
    # Its id and package count are on the "backup ... verified" line that follows: here, what it is of and where.
    rows: Rows = [("of", f"{d['python']} ({d.get('package_count')} packages)"), ("kept at", d.get("remote_dir"))]
    if not d.get("verified"):
        rows.append(("verified", "NO: it does not count as a backup for a change"))
    if d.get("warnings"):
        rows.append(("warnings", _listed([str(w) for w in d["warnings"]])))
    return rows


def _pip_install(d: dict) -> Rows:
    changes = [f"{c['package']} {_version(c.get('before'))} → {_version(c.get('after'))}" for c in d["changes"]]
    rows: Rows = [("changed", _listed(changes) if changes else "nothing (already as asked)")]
    if d.get("index_urls"):
        rows.append(("from", ", ".join(d["index_urls"])))
    warnings = [*(d.get("warnings") or []), *(d.get("dependency_warnings") or [])]
    if warnings:
        rows.append(("warnings", _listed([str(w) for w in warnings])))
    return rows


def _version(pin: str | None) -> str:
    """'torch==2.10.0+cu128' -> '2.10.0+cu128'; None -> '(none)'."""
    if not pin:
        return "(none)"
    return pin.split("==", 1)[1] if "==" in pin else pin


def _install_runfile(d: dict) -> Rows:
    rows: Rows = [("toolkit", f"CUDA {d.get('version')} at {d.get('toolkit_path')}"
                              + (f" (nvcc {d['nvcc_version']})" if d.get("nvcc_version") else " (no nvcc found)")),
                  ("checksum", f"{d.get('checksum')} {'ok' if d.get('checksum_ok') else 'MISMATCH'}")]
    before, after = d.get("symlink_before"), d.get("symlink_after")
    rows.append(("cuda link", f"unchanged ({after})" if before == after else f"{before} -> {after}"))
    problems = [*(d.get("log_errors") or []), *(d.get("warnings") or [])]
    if problems:
        rows.append(("warnings", _listed([str(p) for p in problems])))
    return rows


def _restore_backup(d: dict) -> Rows:
    rows: Rows = [("restored", f"{'yes' if d.get('restored') else 'NO'} from {d.get('backup_id')}"),
                  ("reinstalled", _listed(d.get("installed") or []) or "nothing"),
                  ("removed", _listed(d.get("uninstalled") or []) or "no Python package")]
    if d.get("system_commands"):  # what put the toolkits and the cuda link back (rm -rf of a toolkit, ln -sfn)
        rows.append(("system", _listed(d["system_commands"])))
    if d.get("remaining_diff"):
        rows.append(("still differs", _listed(d["remaining_diff"])))
    if d.get("system_diff"):
        rows.append(("system differs", _listed(d["system_diff"])))
    return rows


def _run_bench(d: dict) -> Rows:
    unit = f" {d['unit']}" if d.get("unit") else ""
    runs = len(d.get("values") or [])
    spread = f", spread {d['relative_spread'] * 100:.1f}%" if isinstance(d.get("relative_spread"), (int, float)) else ""
    rows: Rows = [(d.get("label") or "result", f"{d.get('metric')}: median {d.get('median')}{unit} "
                                               f"({runs} run{'s' * (runs != 1)}{spread})")]
    c = d.get("comparison")
    if isinstance(c, dict):
        rows.append(("compared", c.get("verdict") or f"to {c.get('baseline_label')}: × {c.get('ratio')}"))
        if c.get("not_like_for_like"):
            rows.append(("caution", c["not_like_for_like"]))
    return rows


def _web_search(d: dict) -> Rows:
    hits = [f"{h.get('title') or '(no title)'} <{h.get('url')}>" for h in d.get("results") or []]
    return [("results", f"{len(hits)} for {d.get('query')!r}"),
            *((f"#{i}", hit) for i, hit in enumerate(hits[:MAX_ITEMS], 1))]


_SUMMARIES: dict[str, Callable[[dict], Rows]] = {
    "inspect_host": _inspect_host, "check_compat": _check_compat, "pip_freeze_backup": _pip_freeze_backup,
    "pip_install": _pip_install, "install_runfile": _install_runfile, "restore_backup": _restore_backup,
    "run_bench": _run_bench, "web_search": _web_search,
}
