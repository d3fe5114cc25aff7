"""The report as one self-contained HTML page: the document's blocks, the benchmark chart and a timeline.

Inline CSS and SVG only, no script and no network, and the page's Content-Security-Policy
forbids both, so text from the transcript could not run even if it slipped through
escaping. The timeline lists every event in transcript order, long outputs folded in
<details>.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agent.report.chart import bench_chart_svg, esc, group_caption
from agent.report.data import Report, Step
from agent.report.document import (
    Block,
    Bullets,
    Chart,
    Code,
    Facts,
    Heading,
    Inline,
    Mark,
    Para,
    Steps,
    Table,
    document,
    secs,
    spec_text,
    stamp,
    who,
)

_CSS = """
:root { --fg: #1b1f23; --muted: #57606a; --line: #d0d7de; --soft: #f6f8fa; --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: #fff; }
main { max-width: 980px; margin: 0 auto; padding: 16px; }
h1 { font-size: 1.5em; margin: 0.2em 0 0.5em; overflow-wrap: anywhere; }
h2 { font-size: 1.2em; border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 1.6em; }
h3 { font-size: 1.02em; margin-bottom: 0.3em; }
code, pre { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
code { background: var(--soft); padding: 0 3px; border-radius: 3px; overflow-wrap: anywhere; }
code.nw { white-space: nowrap; overflow-wrap: normal; }
td:has(> code:not(.nw)) { min-width: 16em; }
pre { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
      white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0; max-height: 480px; overflow: auto; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 14px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--soft); }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
dt { font-weight: 600; color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
.ok { color: var(--ok); font-weight: 600; }
.bad { color: var(--bad); font-weight: 600; }
.warn { color: var(--warn); font-weight: 600; }
figure.chart { max-width: 680px; margin: 8px 0; }
figure.chart svg { width: 100%; height: auto; display: block; }
ol.timeline { list-style: none; padding: 0; margin: 0; }
ol.timeline > li { border-left: 3px solid var(--line); padding: 4px 0 6px 12px; margin: 0 0 6px; }
ol.timeline > li.user { border-color: #8250df; }
ol.timeline > li.model { border-color: #0969da; }
ol.timeline > li.deny { border-color: var(--bad); }
ol.timeline > li.fail { border-color: #9a6700; }
.meta { color: var(--muted); font-size: 13px; }
.badge { display: inline-block; border: 1px solid var(--line); border-radius: 10px; padding: 0 7px; font-size: 12px;
         margin: 0 4px 2px 0; }
details > summary { cursor: pointer; color: var(--muted); font-size: 13px; }
@media (max-width: 600px) { body { font-size: 14px; } main { padding: 10px; }
  dl { grid-template-columns: 1fr; } dd { margin-bottom: 4px; } }
@media print { main { max-width: none; padding: 0; } pre { max-height: none; overflow: visible; }
  h2 { break-after: avoid; } figure, table, li { break-inside: avoid; } }
"""


def html_inline(x: Inline) -> str:
    if isinstance(x, Code):
        # A short name (a tool, a label, a version) reads badly broken across lines; long paths may wrap.
        short = len(str(x.text)) <= 32 and " " not in str(x.text)
        return f"<code{' class=nw' if short else ''}>{esc(x.text)}</code>"
    if isinstance(x, Mark):
        return f'<span class="{esc(x.tone)}">{esc(x.text)}</span>' if x.tone else f"<strong>{esc(x.text)}</strong>"
    if isinstance(x, list):
        return "".join(html_inline(i) for i in x)
    return esc(x)


def html_table(t: Table) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in t.headers)
    body = "".join("<tr>" + "".join(f"<td{' class=n' if i in t.numeric else ''}>{html_inline(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in t.rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def render_html(report: Report, path: Path) -> str:
    """One self-contained page of the session, written to `path`; returns its text.

    Inline CSS and SVG only: no script and no network, and the page's own policy forbids
    both, so text from the transcript could not run even if it slipped through escaping.
    """
    blocks = document(report)
    title = blocks[0].text
    out = ["<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
           f"<title>{esc(title)}</title><style>{_CSS}</style></head><body><main>"]
    for b in blocks:
        if isinstance(b, Heading):
            anchor = f' id="{esc(re.sub(r"[^a-z0-9]+", "-", b.text.lower()).strip("-"))}"' \
                if b.level == 2 and isinstance(b.text, str) else ""
            out.append(f"<h{b.level}{anchor}>{html_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{html_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{html_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            out.append(html_table(b))
        elif isinstance(b, Facts):
            out.append("<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{html_inline(v)}</dd>" for k, v in b.rows) + "</dl>")
        elif isinstance(b, Block):
            out.append(f"<pre>{esc(b.text)}</pre>")
        elif isinstance(b, Chart):
            out += [f'<figure class="chart">{bench_chart_svg(g)}<figcaption class="meta">{esc(group_caption(g))}: '
                    f"each measured run is a bar, the black line is the median of its label.</figcaption></figure>"
                    for g in b.groups]
        elif isinstance(b, Steps):
            out.append('<ol class="timeline">' + "".join(_timeline_item(k, ev) for k, ev in report.timeline)
                       + "</ol>")
    out.append("</main></body></html>\n")
    text = "".join(out)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text


def _timeline_item(kind: str, ev: Any) -> str:
    """One entry of the HTML timeline; long texts are folded in <details>."""
    if kind == "note":
        label = "user" if ev.get("kind") == "user" else f"note ({ev.get('kind')})"
        return (f'<li class="user"><div class="meta">{esc(label)} &middot; {esc(stamp(ev.get("t")))}</div>'
                f"<pre>{esc(ev.get('text'))}</pre></li>")
    if kind == "part":
        return (f'<li class="user"><div class="meta">part {esc(ev.number)} &middot; {esc(stamp(ev.start.get("t")))}'
                f'</div><code>{esc(str(ev.path))}</code></li>')
    if kind == "model":
        n = len(ev.get("tool_calls") or [])
        text = f"<pre>{esc(ev['text'])}</pre>" if (ev.get("text") or "").strip() else ""
        return (f'<li class="model"><div class="meta">turn {esc(ev.get("turn"))} &middot; model &middot; {n} tool '
                f"call{'s' if n != 1 else ''} &middot; {esc((ev.get('usage') or {}).get('total_tokens', 0))} tokens "
                f"&middot; {esc(ev.get('latency_s'))} s</div>{text}</li>")
    if kind == "model_error":
        return (f'<li class="fail"><div class="meta">turn {esc(ev.get("turn"))} &middot; model error</div>'
                f"<pre>{esc(ev.get('error'))}</pre></li>")
    if kind == "call":
        s: Step = ev
        cls = "deny" if s.verdict == "deny" else "fail" if s.status in ("error", "crashed", "malformed") else ""
        badges = [s.tool, s.host or "-", s.risk or "-", f"{s.verdict or '-'}" + (f" ({s.rule})" if s.rule else ""),
                  s.status or "no result"] + ([f"{secs(s.duration_s)} s"] if s.duration_s is not None else [])
        approved = f'<span class="badge">approved by {html_inline(who(s))}</span>' if s.approved_by or s.approvals \
            else ""
        args = s.arguments if isinstance(s.arguments, str) else json.dumps(s.arguments, indent=2, ensure_ascii=False)
        lines = s.content.count("\n") + 1 if s.content else 0
        return (f'<li class="{cls}"><div class="meta">{esc(s.where)}</div><div>'
                + "".join(f'<span class="badge">{esc(b)}</span>' for b in badges) + approved
                + f"</div><div><code>{esc(s.subject or s.tool)}</code></div>"
                + f"<details><summary>arguments</summary><pre>{esc(args)}</pre></details>"
                + (f"<details><summary>output ({lines} line{'s' if lines != 1 else ''})</summary>"
                   f"<pre>{esc(s.content)}</pre></details>" if s.content else "")
                + (f'<p class="meta">{esc(s.reason)}</p>' if s.verdict == "deny" and s.reason else "") + "</li>")
    if kind == "final_state":
        detail = json.dumps({k: v for k, v in ev.items() if k not in ("v", "seq", "prev", "type")}, indent=2)
        return (f'<li><div class="meta">final state of {esc(ev.get("host"))}'
                + (f' &middot; <span class="bad">{esc(ev.get("error"))}</span>' if ev.get("error") else "")
                + f"</div><details><summary>recorded state</summary><pre>{esc(detail)}</pre></details></li>")
    if kind == "check":
        ok = ev.get("ok")
        return (f"<li class=\"{'' if ok else 'deny'}\"><div class=\"meta\">check {esc(ev.get('index'))} "
                f"({esc(ev.get('kind'))})</div><span class=\"{'ok' if ok else 'bad'}\">{'passed' if ok else 'failed'}"
                f"</span> <code>{esc(spec_text(ev.get('spec')))}</code> {esc(ev.get('detail'))}</li>")
    if kind == "goal_result":
        met = ev.get("met")
        return (f"<li><span class=\"{'ok' if met else 'bad'}\">goal {'met' if met else 'not met'}</span> "
                f"(exit code {esc(ev.get('exit_code'))}): {esc(ev.get('reason'))}</li>")
    if kind == "end":
        return (f'<li><div class="meta">session end &middot; {esc(stamp(ev.get("t")))}</div>'
                f"{esc(ev.get('status'))}: {esc(ev.get('reason'))}</li>")
    return ""
