"""The rollout as one self-contained HTML page: the recap, a before/after table per host, and a chart.

Read from the fleet's transcript alone (its `fleet_host` events hold each host's benchmark figures,
gate and outcome, with the path and last-line hash of that host's own transcript). Inline CSS and
SVG only, no script and no network, under the same Content-Security-Policy as a session's report:
host names and reasons come from inventories and tools, and are escaped.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.report.chart import CHART_COLOURS, esc

_CSS = """
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1b1f23; }
main { max-width: 1100px; margin: 0 auto; padding: 16px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #d0d7de; margin-top: 1.6em; }
table { border-collapse: collapse; width: 100%; font-size: 14px; } td, th { border-bottom: 1px solid #d0d7de;
  padding: 4px 6px; text-align: left; vertical-align: top; } th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.changed, .ok, .already-at-target { color: #1a7f37; font-weight: 600; }
.failed, .unreachable { color: #cf222e; font-weight: 600; }
.held, .interrupted, .not-run, .restored-after-interrupt, .would-change { color: #9a6700; font-weight: 600; }
.meta { color: #57606a; font-size: 13px; } svg { max-width: 100%; height: auto; }
.wrap { overflow-x: auto; } td.why { overflow-wrap: anywhere; min-width: 18em; }
"""


def fleet_html(fleet_path: Path) -> str:
    events = [json.loads(line) for line in fleet_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    start = events[0]
    latest = {e["host"]: e for e in events if e["type"] == "fleet_host"}  # a held host handed over is written again
    hosts = list(latest.values())
    result = next((e for e in events if e["type"] == "fleet_result"), {})
    plan = start.get("plan", {})
    counts = ", ".join(f"{n} {k}" for k, n in sorted((result.get("counts") or {}).items()))
    out = ["<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
           f"<title>Rollout of {esc(Path(start.get('recipe', 'recipe')).name)}</title><style>{_CSS}</style></head>"
           f"<body><main><h1>Rollout of {esc(Path(start.get('recipe', 'recipe')).name)}</h1>",
           f"<p>{esc(str(start.get('goal', '')).strip())}</p>",
           f"<p class=\"meta\">{len(hosts)} hosts; canary {esc(plan.get('canary'))}, batches of "
           f"{esc(plan.get('batch'))}, stop past {esc(plan.get('max_fail_percent'))}% failed. {esc(counts)}."
           + (f" <strong>Stopped: {esc(result['stopped'])}</strong>" if result.get("stopped") else "") + "</p>",
           "<h2>Throughput before and after, per host</h2>", '<div class="wrap">', _chart(hosts), "</div>",
           '<p class="meta">Each pair of bars is one host: the median of its runs before (left) and after (right), '
           "from zero, with the change above it. Hosts without both figures (held, failed before the change) have "
           "no bars.</p>",
           "<h2>Hosts</h2>", '<div class="wrap"><table><thead><tr><th>host</th><th>batch</th><th>outcome</th>'
           "<th>before</th><th>after</th><th>after/before (interval)</th><th>rolled back</th><th>why</th>"
           "<th>transcript</th></tr></thead><tbody>"]
    for h in hosts:
        bench = h.get("bench") or {}
        before, after = (bench.get(k, {}).get("median") for k in ("before", "after"))
        gate = h.get("gate") or {}
        ratio = (f"{gate['ratio']:.3f} ({gate['low']:.3f}–{gate['high']:.3f})" if gate else "–")
        status = h.get("status", "")
        out.append(f"<tr><td>{esc(h['host'])}</td><td class=\"num\">{esc(h.get('batch', ''))}</td>"
                   f"<td class=\"{esc(status.replace(' ', '-'))}\">{esc(h.get('ended') or status)}</td>"
                   f"<td class=\"num\">{_num(before)}</td><td class=\"num\">{_num(after)}</td>"
                   f"<td class=\"num\">{esc(ratio)}</td><td>{'yes' if h.get('rolled_back') else ''}</td>"
                   f"<td class=\"why\">{esc(h.get('reason', ''))}</td>"
                   f"<td class=\"meta\">{esc(Path(h['transcript']).name) if h.get('transcript') else ''}</td></tr>")
    out.append("</tbody></table></div></main></body></html>\n")
    return "".join(out)


def write_fleet_html(fleet_path: Path) -> Path:
    page = fleet_path.with_suffix(".html")
    page.write_text(fleet_html(fleet_path), encoding="utf-8")
    return page


def _num(v) -> str:
    return esc(f"{v:g}") if isinstance(v, (int, float)) else "–"


def _chart(hosts: list[dict]) -> str:
    measured = [h for h in hosts if all(isinstance((h.get("bench") or {}).get(k, {}).get("median"), (int, float))
                                        for k in ("before", "after"))]
    pair_w, left, top, bottom, height = 30, 56, 48, 64, 330  # room above the bars for each pair's change
    width = left + max(1, len(measured)) * pair_w + 16
    plot_h = height - top - bottom
    base = top + plot_h
    peak = max([h["bench"][k]["median"] for h in measured for k in ("before", "after")] or [1.0])
    y_max = peak * 1.1

    def y(v: float) -> float:
        return base - max(v, 0.0) / y_max * plot_h

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" '
           'aria-label="throughput before and after, per host">']
    for i in range(5):
        v = y_max * i / 4
        svg.append(f'<line x1="{left}" x2="{width - 8}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#d0d7de"/>'
                   f'<text x="{left - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end" fill="#57606a">'
                   f"{v:.0f}</text>")
    for i, h in enumerate(measured):
        x = left + i * pair_w + 4
        for j, label in enumerate(("before", "after")):
            v = h["bench"][label]["median"]
            svg.append(f'<rect x="{x + j * 11}" y="{y(v):.1f}" width="10" height="{base - y(v):.1f}" '
                       f'fill="{CHART_COLOURS[j]}"><title>{esc(h["host"])} {label}: median {v:g}</title></rect>')
        # The change itself, written above the pair: bars from zero show a 7% gain as two bars of one height.
        before, after = (h["bench"][k]["median"] for k in ("before", "after"))
        change = (after / before - 1) * 100 if before else 0.0
        top_y = min(y(before), y(after)) - 4
        svg.append(f'<text x="{x + 10}" y="{top_y:.1f}" font-size="9" text-anchor="start" '
                   f'fill="{"#1a7f37" if change >= 0 else "#cf222e"}" transform="rotate(-90 {x + 10} {top_y:.1f})">'
                   f"{change:+.1f}%</text>")
        svg.append(f'<text x="{x + 10}" y="{base + 12}" font-size="10" text-anchor="end" fill="#1b1f23" '
                   f'transform="rotate(-60 {x + 10} {base + 12})">{esc(h["host"])}</text>')
    svg.append("</svg>")
    return "".join(svg)
