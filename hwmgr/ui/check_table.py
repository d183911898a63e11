"""The human `hwmgr check` table: findings grouped by device (or interface, or the host),
drifted items first, each with expected → actual and the command that fixes it.

On a terminal each group is a rich table of `Text` cells (no markup is ever parsed from a
value); piped, it is plain aligned text. Host- and catalog-supplied strings pass through
`printable()` first. After the groups, the fixes are repeated merged per tool and
interface, ready to paste.
"""

from __future__ import annotations

from typing import Any

from hwmgr.compliance.fixes import merge
from hwmgr.compliance.judge import STATUSES, bounds
from hwmgr.output import cell_len, printable
from hwmgr.ui.inventory_table import wrap

RANK = {s: i for i, s in enumerate(STATUSES)}  # worst first
STYLE = {"drift": "bold red", "unknown": "yellow", "uncatalogued": "cyan", "unsupported": "dim",
         "ok": "green"}
HEAD = ("STATUS", "ITEM", "EXPECTED", "ACTUAL", "FIX / NOTE")
LEGEND = ("drift = not what the catalog wants (run the fix); unknown = could not be read; "
          "uncatalogued = the catalog has no verdict on this version; "
          "unsupported = the device cannot do it; ok = as the catalog wants.")


def value_text(v: Any) -> str:
    """A JSON value as a cell: bounds as ≥/≤, lists space-joined, null as -."""
    if v is None:
        return "-"
    if isinstance(v, dict):
        words = bounds(v)
        if words is not None:
            return words
        return ", ".join(f"{k} {value_text(x)}" for k, x in v.items())
    if isinstance(v, list):
        return " ".join("*" if x is None else value_text(x) for x in v)
    return str(v)


def _cells(f: dict[str, Any]) -> list[str]:
    note = f["fix"] if f["fix"] else ("" if f["status"] == "ok" else f["reason"])
    return [printable(x) for x in (f["status"], f["item"], value_text(f["expected"]),
                                   value_text(f["actual"]), note or "")]


def groups(data: dict[str, Any], devices: dict[str, str]) -> list[tuple[str, list[dict]]]:
    """(header, findings) per device / interface / host, worst first, drift first within."""
    by: dict[str, list[dict[str, Any]]] = {}
    for f in data["findings"]:
        key = f["device"] or (f"interface {f['interface']}" if f["interface"] else "host")
        by.setdefault(key, []).append(f)
    out = []
    for key, items in by.items():
        items = sorted(items, key=lambda f: RANK[f["status"]])
        ifaces = sorted({f["interface"] for f in items if f["interface"]})
        head = key
        if key in devices or ifaces and not key.startswith("interface "):
            head = " ".join([key, *ifaces, devices.get(key, "")]).strip()
        out.append((printable(head if key != "host" else "host: network sysctls"), items))
    out.sort(key=lambda g: (RANK[g[1][0]["status"]], g[0] == "host: network sysctls", g[0]))
    return out


def render(console: Any, data: dict[str, Any], devices: dict[str, str] | None = None) -> None:
    """Title, one table per group, the merged fixes, the legend."""
    width = max(int(console.width or 80), 40)
    tty = bool(console.is_terminal)
    host = data["host"]
    s = data["summary"]
    verdict = "compliant" if data["compliant"] else "NOT compliant"
    title = (f"{printable(host['hostname'] or 'unknown host')}  kernel "
             f"{printable(host['kernel'] or 'unknown')}  catalog "
             f"{printable(data['catalog_version'] or '-')}: {verdict} — {s['drift']} drift, "
             f"{s['unknown']} unknown, {s['uncatalogued']} uncatalogued, "
             f"{s['unsupported']} unsupported, {s['ok']} ok")
    for line in wrap(title, width):
        console.out(line, style="bold")
    grouped = groups(data, devices or {})
    rows = [_cells(f) for _, items in grouped for f in items]
    widths = [max([cell_len(h)] + [cell_len(r[i]) for r in rows]) for i, h in
              enumerate(HEAD[:4])]
    for head, items in grouped:
        console.out("")
        console.out(head, style="bold")
        if tty:
            _rich(console, [_cells(f) for f in items], widths, width)
        else:
            for line in _plain([_cells(f) for f in items], widths, width):
                console.out(line)
    fixes = merge(f["fix"] for f in data["findings"] if f["status"] == "drift")
    if fixes:
        console.out("")
        console.out("To fix:", style="bold")
        for cmd in fixes:
            console.out(f"  {printable(cmd)}")
    for p in data.get("reboot_pending", []):
        console.out(printable(f"reboot pending: {p.get('driver')}: {p.get('reason', '')}"),
                    style="yellow")
    console.out("")
    for line in wrap(LEGEND, width):
        console.out(line, style="dim")


def _plain(rows: list[list[str]], widths: list[int], width: int) -> list[str]:
    """Two-space aligned columns under a 2-space indent; the last column wraps."""
    indent = 2 + sum(w + 2 for w in widths)
    room = max(width - indent, 20)

    def line(cells: list[str]) -> list[str]:
        first = "  " + "  ".join(c + " " * (w - cell_len(c)) for c, w in zip(cells, widths))
        note = wrap(cells[4], room) if cells[4] else [""]
        return [(first + "  " + note[0]).rstrip()] + [" " * indent + n for n in note[1:]]

    out = line(list(HEAD))
    for r in rows:
        out += line(r)
    return out


def _rich(console: Any, rows: list[list[str]], widths: list[int], width: int) -> None:
    """The same columns as a rich table; every cell is Text, so nothing is read as markup."""
    from rich.table import Table  # rich: only drawing needs it
    from rich.text import Text

    t = Table(show_edge=False, pad_edge=False, header_style="bold", box=None)
    for i, h in enumerate(HEAD):
        t.add_column(h, width=widths[i] if i < 4 else None, no_wrap=i < 4,
                     overflow="fold")
    for r in rows:
        t.add_row(Text(r[0], style=STYLE.get(r[0], "")), *(Text(c) for c in r[1:]))
    console.print(t, crop=False, width=width)
