"""fleet-report.html: one self-contained page (inline CSS, JS and SVG; works offline).

Rendered on the server side so it reads without JavaScript; the inline script recounts from
the embedded JSON, sorts and filters. Every host-supplied string goes through `html.escape`,
and the embedded JSON has `<`, `>` and `&` as \\u escapes, so a hostile hostname or interface
name cannot close the script element or inject markup.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from html import escape
from importlib import resources
from typing import Any

from hwmgr.fleet.report import (
    HOST_STATUSES,
    LAYERS,
    NO_CHECK,
    Finding,
    HostEntry,
    Report,
    finding_name,
)

_SLOT = re.compile(r"\{\{([a-z_]+)\}\}")
CARD_KEYS = ("hosts", "compliant", "drift", "unknown", "unreachable", "failed", "reboot-pending")
WORST = ("drift", "unknown", "uncatalogued", "unsupported", "ok")  # order of items: worst first
# a grid cell takes the colour of its most telling item; unsupported only when nothing else
CELL_COLOUR = ("drift", "unknown", "uncatalogued", "ok", "unsupported")


def _asset(name: str) -> str:
    return resources.files("hwmgr.fleet").joinpath(name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    """Escape any value for HTML text or a quoted attribute; non-strings as compact JSON."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return escape(text, quote=True)


def _shown(value: Any) -> str:
    """A finding's expected/actual value for a person: strings bare, null as 'unknown'."""
    if value is None:
        return "unknown"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def embed_json(obj: Any) -> str:
    """JSON safe inside <script type="application/json">: no '<', '>' or '&' at all."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _badge(status: str) -> str:
    return f'<span class="badge b-{_e(status)}">{_e(status)}</span>'


def _cards(summary: dict[str, int]) -> str:
    out = []
    for key in CARD_KEYS:
        n = summary[key.replace("-", "_")]
        label = "hosts" if key == "hosts" else key.replace("-", " ")
        tip = "show all hosts" if key == "hosts" else f"show only {label} hosts"
        out.append(
            f'    <div class="card st-{key}" data-key="{key}" data-json-count="{n}" '
            f'id="count-{key}" title="{tip}">'
            f'<span class="n">{n}</span><span class="l">{label}</span></div>')
    return "\n".join(out)


def sparkline(points: list[dict[str, Any]], width: int = 300, height: int = 64) -> str:
    """An inline SVG of compliant (green) and drifting (red) host counts over reports."""
    if len(points) < 2:
        return ('<figcaption>Trend: give earlier fleet-report.json files with --history '
                'to see compliant and drift counts over time.</figcaption>')
    top = max(max(p["compliant"], p["drift"]) for p in points) or 1
    step = (width - 16) / (len(points) - 1)

    def line(key: str) -> str:
        return " ".join(f"{8 + i * step:.1f},{height - 8 - p[key] * (height - 16) / top:.1f}"
                        for i, p in enumerate(points))

    dots = []
    for key, colour in (("compliant", "#2e7d32"), ("drift", "#c62828")):
        for i, p in enumerate(points):
            x = 8 + i * step
            y = height - 8 - p[key] * (height - 16) / top
            dots.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}">'
                        f'<title>{_e(p["generated"])}: {p[key]} {key}</title></circle>')
    first, last = points[0], points[-1]
    return (
        f'<svg id="sparkline" data-points="{len(points)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="compliant and drift hosts '
        f'over {len(points)} reports">'
        f'<line x1="8" y1="{height - 8}" x2="{width - 8}" y2="{height - 8}" stroke="#dde1e7"/>'
        f'<polyline fill="none" stroke="#2e7d32" stroke-width="2" points="{line("compliant")}"/>'
        f'<polyline fill="none" stroke="#c62828" stroke-width="2" points="{line("drift")}"/>'
        + "".join(dots) + "</svg>"
        f'<figcaption>Trend over {len(points)} reports ({_e(first["generated"][:10])} → '
        f'{_e(last["generated"][:10])}): <span class="lg-c">■ compliant '
        f'{first["compliant"]} → {last["compliant"]}</span> · <span class="lg-d">■ drift '
        f'{first["drift"]} → {last["drift"]}</span></figcaption>')


def _layer_cell(findings: list[Finding], layer: str) -> str:
    counts = Counter(f["status"] for f in findings if f["layer"] == layer)
    if not counts:
        return '<td class="cell c-none" title="no items checked">–</td>'
    worst = next(s for s in CELL_COLOUR if counts.get(s))
    text = " · ".join(f"{counts[s]} {s}" for s in WORST if counts.get(s))
    return f'<td class="cell c-{worst}" data-layer="{layer}">{_e(text)}</td>'


def _grid_row(name: str, host: HostEntry) -> str:
    findings = host["findings"]
    counts = Counter(f["status"] for f in findings)
    status = host["status"]
    text = " ".join([name, status, host["error"] or ""] +
                    [f"{f.get('interface') or ''} {f.get('device') or ''} {f['item']}"
                     for f in findings]).lower()
    attrs = (f'data-host="{_e(name)}" data-status="{_e(status)}" data-text="{_e(text)}" '
             f'data-s-name="{_e(name.lower())}" data-s-status="{HOST_STATUSES.index(status)}" '
             f'data-s-drift="{counts["drift"]}" data-s-unknown="{counts["unknown"]}" '
             f'data-s-uncatalogued="{counts["uncatalogued"]}" data-s-ok="{counts["ok"]}"')
    if status in NO_CHECK:
        layers = (f'<td class="cell c-error" colspan="{len(LAYERS)}">{_e(status)}: '
                  f'{_e(host["error"])}</td>')
    else:
        layers = "".join(_layer_cell(findings, layer) for layer in LAYERS)
    return (f'      <tr {attrs}><td class="host">{_e(name)}</td><td>{_badge(status)}</td>'
            f'{layers}<td class="num">{counts["drift"]}</td><td class="num">'
            f'{counts["unknown"]}</td><td class="num">{counts["uncatalogued"]}</td>'
            f'<td class="num">{counts["ok"]}</td></tr>')


def _finding_row(name: str, host_status: str, f: Finding) -> str:
    where = " ".join(p for p in (f.get("interface"), f.get("device")) if p)
    text = f"{name} {finding_name(f)} {f.get('device') or ''} {f['status']}".lower()
    cls = ' class="ok-row"' if f["status"] == "ok" else ""
    if f["status"] == "ok":
        ea = f'<span class="ea">{_e(_shown(f["actual"]))}</span>'
    else:
        ea = (f'<span class="ea"><span class="exp">{_e(_shown(f["expected"]))}</span> → '
              f'<span class="act">{_e(_shown(f["actual"]))}</span></span>')
    fix = f'<code>{_e(f["fix"])}</code>' if f.get("fix") else ""
    reason = f'<div class="reason">{_e(f["reason"])}</div>' if f.get("reason") else ""
    return (
        f'      <tr{cls} data-host="{_e(name)}" data-host-status="{_e(host_status)}" '
        f'data-status="{f["status"]}" data-layer="{f["layer"]}" data-text="{_e(text)}" '
        f'data-s-host="{_e(name.lower())}" data-s-status="{WORST.index(f["status"])}" '
        f'data-s-layer="{LAYERS.index(f["layer"])}" data-s-where="{_e(where)}" '
        f'data-s-item="{_e(f["item"])}">'
        f'<td class="host">{_e(name)}</td><td>{_badge(f["status"])}</td><td>{f["layer"]}</td>'
        f'<td>{_e(where)}</td><td><code class="item">{_e(f["item"])}</code></td><td>{ea}</td>'
        f'<td>{fix}{reason}</td></tr>')


def render_html(report: Report, history: list[dict[str, Any]]) -> str:
    """The whole page as one string: inline CSS/JS, data embedded, no external references."""
    hosts = report["hosts"]
    s = report["summary"]
    all_findings = [(name, h["status"], f) for name, h in hosts.items() for f in h["findings"]]
    all_findings.sort(key=lambda t: (WORST.index(t[2]["status"]), t[0]))
    rows = [_finding_row(name, st, f) for name, st, f in all_findings]
    point = {"generated": report["generated"], **{k: v for k, v in s.items()}}
    meta = (f"Generated {_e(report['generated'])} · catalog "
            f"{_e(report['catalog_version'] or 'unknown')} · {s['hosts']} hosts · "
            f"{s['drift']} drifting, {s['unreachable'] + s['failed']} without a result")
    slots = {
        "title": _e(f"hwmgr fleet report {report['generated']}: {s['drift']} drift, "
                    f"{s['compliant']}/{s['hosts']} compliant"),
        "css": _asset("report.css"),
        "js": _asset("report.js"),
        "meta": meta,
        "cards": _cards(s),
        "trend": sparkline([*history, point]),
        "status_options": "\n".join(f'      <option value="{st}">{st}</option>'
                                    for st in HOST_STATUSES),
        "n_hosts": str(len(hosts)),
        "n_findings": str(sum(1 for *_, f in all_findings if f["status"] != "ok")),
        "layer_heads": "\n".join(f'      <th class="cell">{layer}</th>' for layer in LAYERS),
        "grid_rows": "\n".join(_grid_row(n, h) for n, h in hosts.items()),
        "finding_rows": "\n".join(rows),
        "format_version": str(report["format_version"]),
        "data": embed_json(report),
    }
    return _SLOT.sub(lambda m: slots[m.group(1)], _asset("report.html.in"))
