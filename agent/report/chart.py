"""The benchmark chart: one inline SVG bar chart per group of results that share an axis.

`bench_chart_svg(group)` draws the results of one host, metric and unit (the groups come
from `document.chart_groups`), each label in its colour from CHART_COLOURS, in order of
first appearance. No script and no external reference: the SVG is embedded as is in the
HTML page, and every text in it is escaped with `esc`, which the page uses too.
"""

from __future__ import annotations

import html
import math
from typing import Any

from agent.report.data import Step
from agent.report.document import inert, metric_text, num

# Colours of the benchmark labels, in order of first appearance (a colour-blind safe palette).
# Used by the chart only, so a screenshot's pixels of these colours are the chart's bars.
CHART_COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]


def esc(s: Any) -> str:
    """Text from the transcript, inert in SVG and HTML (attribute values included)."""
    return html.escape(inert("" if s is None else str(s)), quote=True)  # a browser too reads bidi overrides


def group_caption(group: list[Step]) -> str:
    """What a chart shows: `output_throughput (tok/s) on sim`."""
    return f"{metric_text(group[0].data)} on {group[0].host}"


def _nice_ceiling(v: float) -> float:
    """The smallest round number (1, 1.2, 1.5, 2, ... 8 x 10^k) at or above v: an axis end that divides well."""
    if v <= 0:
        return 1.0
    k = math.floor(math.log10(v))
    return next(m * 10 ** k for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * 10 ** k >= v)


def bench_chart_svg(group: list[Step]) -> str:
    """A bar chart from zero: one bar per measured run, grouped by label, each label's median a line.

    Bars start at zero so their heights compare honestly; the run-to-run spread and the
    significance are in the table under it.
    """
    width, height, left, right, top, bottom = 640, 320, 64, 16, 28, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    base = top + plot_h
    values = [v for s in group for v in s.data.get("values") or []]
    y_max = _nice_ceiling(max(values) * 1.08) if values else 1.0
    caption = group_caption(group)

    def y(v: float) -> float:
        return base - (max(v, 0.0) / y_max) * plot_h

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{esc(caption)}"><title>{esc(caption)}</title>']
    for i in range(6):
        yy = y(y_max * i / 5)
        svg.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{width - right}" y2="{yy:.1f}" stroke="#e1e4e8"/>'
                   f'<text x="{left - 6}" y="{yy + 4:.1f}" font-size="11" text-anchor="end" fill="#57606a">'
                   f"{esc(num(round(y_max * i / 5, 6)))}</text>")
    svg.append(f'<text x="14" y="{top + plot_h / 2:.1f}" font-size="11" fill="#57606a" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{esc(metric_text(group[0].data))}</text>')
    slot = plot_w / len(group)
    for gi, s in enumerate(group):
        d, runs = s.data, s.data.get("values") or []
        colour = CHART_COLOURS[gi % len(CHART_COLOURS)]
        inner = slot * 0.7
        bar_w = inner / max(len(runs), 1)
        x0 = left + gi * slot + (slot - inner) / 2
        centre = left + gi * slot + slot / 2
        for ri, v in enumerate(runs):
            top_y = round(y(v), 1)  # rounded once, so every bar ends exactly on the axis
            svg.append(f'<rect x="{x0 + ri * bar_w + bar_w * 0.1:.1f}" y="{top_y:.1f}" width="{bar_w * 0.8:.1f}" '
                       f'height="{base - top_y:.1f}" fill="{colour}"><title>{esc(d["label"])} run {ri + 1}: '
                       f"{esc(num(v))}</title></rect>")
        if d.get("median") is not None:
            svg.append(f'<line x1="{x0 - 4:.1f}" y1="{y(d["median"]):.1f}" x2="{x0 + inner + 4:.1f}" '
                       f'y2="{y(d["median"]):.1f}" stroke="#1b1f23" stroke-width="2"/>'
                       f'<text x="{centre:.1f}" y="{y(max(runs or [d["median"]])) - 6:.1f}" font-size="12" '
                       f'text-anchor="middle" fill="#1b1f23">median {esc(num(d["median"]))}</text>')
        svg.append(f'<text x="{centre:.1f}" y="{base + 18}" font-size="13" text-anchor="middle" fill="#1b1f23">'
                   f'{esc(d["label"])}</text><text x="{centre:.1f}" y="{base + 34}" font-size="11" '
                   f'text-anchor="middle" fill="#57606a">{len(runs)} runs, {esc(s.where)}</text>')
    svg.append(f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="#57606a"/></svg>')
    return "".join(svg)
