"""fleet-report.html: one self-contained page (inline CSS, JS and SVG; works offline).

What reads at any size comes first and is rendered here, so it reads without JavaScript: the
counts, the trend and what is new since the last report, what drifts across the fleet (item ×
hosts, with the values seen and the fix), and the groups. The host list and each host's detail
are drawn by the inline script from compact embedded data (`view.compact`), a page of rows at a
time, so 10,000 hosts make a page of a few MB. Every host-supplied string goes through
`html.escape` or, in the script, `textContent`; the embedded JSON has `<`, `>` and `&` as \\u
escapes, so a hostile hostname cannot close the script element or inject markup.
"""

from __future__ import annotations

import json
import re
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import quote

from hwmgr.fleet.report import HOST_STATUSES, LAYERS, Report
from hwmgr.fleet.trend import News
from hwmgr.fleet.view import NO_RESULT, FleetItem, Shown, compact, fleet_items, group_rows

_SLOT = re.compile(r"\{\{([a-z_]+)\}\}")
CARD_KEYS = ("hosts", "compliant", "drift", "unknown", "unreachable", "failed", "reboot-pending")
FLEET_STATUSES = ("drift", "unknown")  # the fleet table: what someone has to act on
MAX_GROUPS = 200  # beyond that the groups table is a host list again; the rest are counted


def _asset(name: str) -> str:
    return resources.files("hwmgr.fleet").joinpath(name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    """Escape any value for HTML text or a quoted attribute; non-strings as compact JSON."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return escape(text, quote=True)


def plain(value: Any) -> str:
    """A value for a person when the caller has no better words: null as 'unknown'."""
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
        return ('<figcaption>Trend: from the next run on (fleet-report keeps '
                'fleet-trend.json beside the report and reads it back).</figcaption>')
    top = max(max(p["compliant"], p["drift"]) for p in points) or 1
    step = (width - 16) / (len(points) - 1)

    def y(p: dict[str, Any], key: str) -> float:
        return float(height - 8 - p[key] * (height - 16) / top)

    def line(key: str) -> str:
        return " ".join(f"{8 + i * step:.1f},{y(p, key):.1f}" for i, p in enumerate(points))

    dots = []
    for key, colour in (("compliant", "#2e7d32"), ("drift", "#c62828")):
        for i, p in enumerate(points[-60:], start=max(0, len(points) - 60)):
            dots.append(f'<circle cx="{8 + i * step:.1f}" cy="{y(p, key):.1f}" r="2.5" '
                        f'fill="{colour}"><title>{_e(p["generated"])}: {p[key]} {key}</title>'
                        '</circle>')
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


def _news(news: News) -> str:
    if news["since"] is None:
        return '<p class="news" id="news">New since the last report: no earlier report.</p>'
    n_items = sum(len(v) for v in news["items"].values())
    return (f'<p class="news" id="news" data-new-hosts="{len(news["hosts"])}" '
            f'data-new-items="{n_items}" data-fixed="{news["fixed"]}">Since '
            f'{_e(news["since"])}: <b>{len(news["hosts"])}</b> hosts newly drifting, '
            f'<b>{n_items}</b> items newly drifting on {len(news["items"])} hosts, '
            f'<b>{news["fixed"]}</b> fixed. <a href="#new=1" id="show-new">show them</a></p>')


def _values(pairs: list[tuple[str, int]], hosts: int) -> str:
    if not pairs:
        return ""
    if len(pairs) == 1 and pairs[0][1] == hosts:
        return _e(pairs[0][0])
    return " · ".join(f"{_e(v)} <small>×{n}</small>" for v, n in pairs)


def _fleet_row(row: FleetItem, total: int) -> str:
    n = row["hosts"]
    pct = 100.0 * n / total if total else 0.0
    fix = f'<code>{_e(row["fix"])}</code> <small>(e.g.)</small>' if row["fix"] else (
        _e(row["reason"] or ""))
    return (f'      <tr data-item="{_e(row["item"])}" data-status="{row["status"]}" '
            f'data-layer="{row["layer"]}" data-hosts="{n}">'
            f'<td>{_badge(row["status"])}</td><td>{row["layer"]}</td>'
            f'<td><a class="item-link" href="#q={quote(row["item"], safe="")}&amp;'
            f'item={row["status"]}">'
            f'<code>{_e(row["item"])}</code></a></td>'
            f'<td class="num">{n}<span class="bar" style="width:{pct:.0f}%"></span></td>'
            f'<td>{_values(row["expected"], n)}</td><td>{_values(row["actual"], n)}</td>'
            f'<td>{fix}</td></tr>')


def _group_row(row: dict[str, Any]) -> str:
    st = row["status"]
    top = ", ".join(f"{_e(item)} ({n})" for item, n in row["items"].most_common(3))
    return (f'      <tr data-group="{_e(row["group"])}"><td><a class="group-link" '
            f'href="#group={quote(row["group"], safe="")}">{_e(row["group"])}</a></td>'
            f'<td class="num">{row["hosts"]}</td><td class="num">{st["compliant"]}</td>'
            f'<td class="num">{st["drift"]}</td><td class="num">{st["unknown"]}</td>'
            f'<td class="num">{sum(st[s] for s in NO_RESULT)}</td>'
            f'<td class="num">{st["reboot-pending"]}</td><td>{top}</td></tr>')


def render_html(report: Report, history: list[dict[str, Any]], *, groups: dict[str, str],
                news: News, shown: Shown = plain,
                items: list[FleetItem] | None = None) -> str:
    """The whole page as one string: inline CSS/JS, data embedded, no external references.
    `history` is the earlier runs' counts, `groups` {host: group}, `news` what is new since
    the previous run, `shown` how a value reads (`check`'s words for limits), `items` the
    fleet's items when the caller has them already (`view.fleet_items` with `shown`)."""
    s = report["summary"]
    total = s["hosts"]
    items = [r for r in (fleet_items(report, shown) if items is None else items)
             if r["status"] in FLEET_STATUSES]
    grows = group_rows(report, groups)
    point = {"generated": report["generated"], **s}
    meta = (f"Generated {_e(report['generated'])} · catalog "
            f"{_e(report['catalog_version'] or 'unknown')} · {total} hosts · "
            f"{s['drift']} drifting, {s['unreachable'] + s['failed']} without a result")
    more = len(grows) - MAX_GROUPS
    slots = {
        "title": _e(f"hwmgr fleet report {report['generated']}: {s['drift']} drift, "
                    f"{s['compliant']}/{total} compliant"),
        "css": _asset("report.css"),
        "js": _asset("report.js"),
        "meta": meta,
        "cards": _cards(s),
        "trend": sparkline([*history, point]),
        "news": _news(news),
        "n_items": str(len(items)),
        "n_item_hosts": str(sum(r["hosts"] for r in items if r["status"] == "drift")),
        "fleet_rows": "\n".join(_fleet_row(r, total) for r in items) or (
            '      <tr><td colspan="7">Nothing drifts and nothing is unknown.</td></tr>'),
        "n_groups": str(len(grows)),
        "group_rows": "\n".join(_group_row(r) for r in grows[:MAX_GROUPS]),
        "groups_more": (f'<p class="more">{more} more groups: filter the hosts by group '
                        'name.</p>' if more > 0 else ""),
        "status_options": "\n".join(f'      <option value="{st}">{st}</option>'
                                    for st in HOST_STATUSES),
        "layer_options": "\n".join(f'      <option value="{ly}">{ly}</option>'
                                   for ly in LAYERS),
        "n_hosts": str(total),
        "format_version": str(report["format_version"]),
        "data": embed_json(compact(report, groups, news, shown)),
    }
    return _SLOT.sub(lambda m: slots[m.group(1)], _asset("report.html.in"))
