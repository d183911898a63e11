"""fleet-report.html: one self-contained page (inline CSS, JS and SVG; works offline).

What reads at any size comes first and is rendered here, so it reads without JavaScript: the
counts, the trend and what is new since the last report, what drifts across the fleet (item ×
hosts, with the values seen and the fix), and the groups. The host list and each host's detail
are drawn by the inline script from compact embedded data (`view.compact`), a page of rows at a
time, so 10,000 hosts make a page of a few MB. The page is the Jinja2 template
`report.html.j2`, with autoescape on: every host-supplied string is escaped as text or a quoted
attribute (in the script, drawn with `textContent`); only the page's own CSS and script and the
embedded JSON are marked as markup, and that JSON has `<`, `>` and `&` as \\u escapes, so a
hostile hostname cannot close the script element or inject markup.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Iterator
from urllib.parse import quote

from hwmgr.fleet.jinja import jinja2, markup
from hwmgr.fleet.report import HOST_STATUSES, LAYERS, Point, Report, point
from hwmgr.fleet.trend import News
from hwmgr.fleet.view import NO_RESULT, FleetItem, Shown, compact, fleet_items, group_rows

if TYPE_CHECKING:
    from jinja2 import Template

CARD_KEYS = ("hosts", "compliant", "drift", "unknown", "unreachable", "failed", "reboot-pending")
FLEET_STATUSES = ("drift", "unknown")  # the fleet table: what someone has to act on
MAX_GROUPS = 200  # beyond that the groups table is a host list again; the rest are counted
CHUNK = 1 << 20  # characters of the page written at a time
TEMPLATE = "report.html.j2"


def _asset(name: str) -> str:
    return resources.files("hwmgr.fleet").joinpath(name).read_text(encoding="utf-8")


def _text(value: object) -> object:
    """How the template prints a value: null as nothing, numbers as they are, other non-strings
    (a finding's {"min": N}) as compact JSON; autoescape then escapes what is not markup."""
    if value is None:
        return ""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    return json.dumps(value, ensure_ascii=False)


@lru_cache(maxsize=1)
def _template() -> Template:
    """The page's template, compiled once (Jinja2 2.11, RHEL 9's, to 3.x)."""
    j2 = jinja2()
    env = j2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True,
                         keep_trailing_newline=True, undefined=j2.StrictUndefined,
                         finalize=_text)
    env.filters["fragment"] = lambda text: quote(str(text), safe="")  # a #name=value part
    template: Template = env.from_string(_asset(TEMPLATE))
    return template


def plain(value: object) -> str:
    """A value for a person when the caller has no better words: null as 'unknown'."""
    if value is None:
        return "unknown"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def embed_json(obj: object) -> str:
    """JSON safe inside <script type="application/json">: no '<', '>' or '&' at all."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _cards(summary: dict[str, int]) -> list[dict[str, object]]:
    out = []
    for key in CARD_KEYS:
        label = "hosts" if key == "hosts" else key.replace("-", " ")
        out.append({"key": key, "n": summary[key.replace("-", "_")], "label": label,
                    "tip": "show all hosts" if key == "hosts" else f"show only {label} hosts"})
    return out


def sparkline(points: list[Point], width: int = 300,
              height: int = 64) -> dict[str, object] | None:
    """The trend's geometry: compliant (green) and drifting (red) host counts over reports,
    as polyline points and the last 60 reports' dots; None below two reports."""
    if len(points) < 2:
        return None
    top = max(max(p["compliant"], p["drift"]) for p in points) or 1
    step = (width - 16) / (len(points) - 1)

    def n(p: Point, key: str) -> int:  # the compliant or drift count
        return p["compliant"] if key == "compliant" else p["drift"]

    def y(p: Point, key: str) -> float:
        return float(height - 8 - n(p, key) * (height - 16) / top)

    lines = {key: " ".join(f"{8 + i * step:.1f},{y(p, key):.1f}" for i, p in enumerate(points))
             for key in ("compliant", "drift")}
    dots = [{"cx": f"{8 + i * step:.1f}", "cy": f"{y(p, key):.1f}", "colour": colour,
             "generated": p["generated"], "n": n(p, key), "key": key}
            for key, colour in (("compliant", "#2e7d32"), ("drift", "#c62828"))
            for i, p in enumerate(points[-60:], start=max(0, len(points) - 60))]
    return {"n": len(points), "width": width, "height": height, "lines": lines, "dots": dots,
            "first": points[0], "last": points[-1]}


def _context(report: Report, history: list[Point], groups: dict[str, str],
             news: News, shown: Shown, items: list[FleetItem] | None) -> dict[str, object]:
    """What the template shows, computed: counts, the trend, the tables' rows, the data."""
    s = report["summary"]
    grows = group_rows(report, groups)
    return {
        "generated": report["generated"], "catalog_version": report["catalog_version"],
        "format_version": report["format_version"], "s": s, "cards": _cards(s),
        "trend": sparkline([*history, point(report["generated"], s.__getitem__)]),
        "news": news, "news_items": sum(len(v) for v in news["items"].values()),
        "items": [r for r in (fleet_items(report, shown) if items is None else items)
                  if r["status"] in FLEET_STATUSES],
        "n_groups": len(grows), "groups_more": len(grows) - MAX_GROUPS,
        "groups": [{**row, "no_result": sum(row["status"][st] for st in NO_RESULT),
                    "top": row["items"].most_common(3)} for row in grows[:MAX_GROUPS]],
        "host_statuses": HOST_STATUSES, "layers": LAYERS,
        # the page's own files and the escaped JSON: the only markup not from the template
        "css": markup(_asset("report.css")), "js": markup(_asset("report.js")),
        "data": markup(embed_json(compact(report, groups, news, shown))),
    }


def html_chunks(report: Report, history: list[Point], *, groups: dict[str, str],
                news: News, shown: Shown = plain,
                items: list[FleetItem] | None = None) -> Iterator[bytes]:
    """The page as UTF-8 pieces of about CHUNK characters, as the template makes them: inline
    CSS/JS, data embedded, no external references. `history` is the earlier runs' counts,
    `groups` {host: group}, `news` what is new since the previous run, `shown` how a value
    reads (`check`'s words for limits), `items` the fleet's items when the caller has them
    already (`view.fleet_items` with `shown`)."""
    buf: list[str] = []
    size = 0
    for piece in _template().generate(_context(report, history, groups, news, shown, items)):
        buf.append(piece)
        size += len(piece)
        if size >= CHUNK:
            yield "".join(buf).encode("utf-8")
            buf, size = [], 0
    if buf:
        yield "".join(buf).encode("utf-8")


def render_html(report: Report, history: list[Point], *, groups: dict[str, str],
                news: News, shown: Shown = plain,
                items: list[FleetItem] | None = None) -> str:
    """The whole page as one string (`html_chunks`, joined)."""
    return b"".join(html_chunks(report, history, groups=groups, news=news, shown=shown,
                                items=items)).decode("utf-8")
