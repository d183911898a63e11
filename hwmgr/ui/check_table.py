"""The human `hwmgr check` table: findings grouped by device (or interface, or the host),
drifted items first, each with expected → actual and the command that fixes it.

No value is ever cut: a cell wraps at word boundaries, a fix command stays whole on one line
(below its row when the FIX / NOTE column is too narrow for it), and a word wider than its
column widens the line rather than losing characters. The same lines are printed on a
terminal (status coloured) and piped (plain ASCII layout, no box drawing). Host- and
catalog-supplied strings pass through `printable()` first. After the groups, the fixes are
repeated merged per tool and interface, ready to paste.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from hwmgr.catalog.refs import Cite
from hwmgr.compliance.check import exit_for
from hwmgr.compliance.fixes import merge
from hwmgr.compliance.items import KNOWN_ISSUE
from hwmgr.compliance.judge import STATUSES, bounds
from hwmgr.errors import EXIT_REBOOT_PENDING
from hwmgr.output import cell_len, printable
from hwmgr.ui.inventory_table import wrap

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

RANK = {s: i for i, s in enumerate(STATUSES)}  # worst first
STYLE = {"drift": "bold red", "unknown": "yellow", "uncatalogued": "cyan", "unsupported": "dim",
         "ok": "green"}
HEAD = ("STATUS", "ITEM", "EXPECTED", "ACTUAL", "FIX / NOTE")
LEGEND = ("drift = not what the catalog wants (run the fix); unknown = could not be read; "
          "uncatalogued = the catalog has no verdict on this version; "
          "unsupported = the device cannot do it; ok = as the catalog wants.")
NOTE_MIN = 20  # a FIX / NOTE column narrower than this puts every note below its row


def value_text(v: object) -> str:
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
    """STATUS, ITEM, EXPECTED, ACTUAL, FIX / NOTE, and "fix" when the note is a command. A
    known issue's row says what the defect is (its command is the device's driver_version
    fix, listed once under "To fix")."""
    fix = None if str(f["item"]).startswith(KNOWN_ISSUE) else f["fix"]
    note = fix if fix else ("" if f["status"] == "ok" else f["reason"])
    return [printable(x) for x in (f["status"], f["item"], value_text(f["expected"]),
                                   value_text(f["actual"]), note or "")] + ["fix" * bool(fix)]


def groups(data: dict[str, Any], devices: dict[str, str]) -> list[tuple[str, list[dict[str, Any]]]]:
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


def render(console: Console, data: dict[str, Any], devices: dict[str, str] | None = None) -> None:
    """Title, one table per group, the merged fixes, the legend."""
    width = max(int(console.width or 80), 40)
    host = data["host"]
    s = data["summary"]
    code = exit_for([(f["layer"], f["status"]) for f in data["findings"]],
                    data.get("reboot_pending") or [])
    verdict = ("compliant" if data["compliant"] else
               "REBOOT PENDING" if code == EXIT_REBOOT_PENDING else "NOT compliant")
    title = (f"{printable(host['hostname'] or 'unknown host')}  kernel "
             f"{printable(host['kernel'] or 'unknown')}  catalog "
             f"{printable(data['catalog_version'] or '-')}: {verdict} — {s['drift']} drift, "
             f"{s['unknown']} unknown, {s['uncatalogued']} uncatalogued, "
             f"{s['unsupported']} unsupported, {s['ok']} ok")
    for line in wrap(title, width):
        console.out(line, style="bold")
    grouped = groups(data, devices or {})
    rows = [_cells(f) for _, items in grouped for f in items]
    widths = fit_widths([list(HEAD[:4])] + [r[:4] for r in rows], width - 2 - 2 * 4)
    for head, items in grouped:
        console.out("")
        console.out(head, style="bold")
        for line, status in table_lines([_cells(f) for f in items], widths, width):
            _line(console, line, status)
    fixes = merge(f["fix"] for f in data["findings"] if f["status"] == "drift")
    if fixes:
        console.out("")
        console.out("To fix:", style="bold")
        for cmd in fixes:
            _line(console, f"  {printable(cmd)}", None)
    for p in data.get("reboot_pending", []):
        console.out(printable(f"reboot pending: {p.get('driver')}: {p.get('reason', '')}"),
                    style="yellow")
    console.out("")
    for line in wrap(LEGEND, width):
        console.out(line, style="dim")


def render_evidence(console: Console, cites: Iterable[Cite]) -> None:
    """Each distinct source the findings cite, with its evidence text from the catalog (a
    known issue's sources: `hwmgr catalog show DRIVER`)."""
    width = max(int(console.width or 80), 40)
    seen: dict[str, Cite] = {}
    for c in cites:
        seen.setdefault(c.ref, c)
    console.out("Evidence:", style="bold")
    for ref, c in seen.items():
        text = c.text or (f"<{c.url}>" if c.url else "no evidence text in the catalog")
        for line in wrap(f"{ref}: {text}", width - 2):
            console.out(printable(f"  {line}"))
    console.out("")


def _line(console: Console, line: str, status: str | None) -> None:
    """One laid-out line, never cropped or re-wrapped by rich (a whole command may be wider
    than the terminal: it soft-wraps there and still pastes as one line)."""
    from rich.text import Text  # rich: only drawing needs it

    text = Text(line, no_wrap=True, overflow="ignore")
    if status and console.is_terminal:
        text.stylize(STYLE.get(status, ""), 2, 2 + len(status))
    elif line.startswith("  STATUS") and console.is_terminal:
        text.stylize("bold")
    console.print(text, crop=False, soft_wrap=True, highlight=False)


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def fit_widths(rows: list[list[str]], room: int) -> list[int]:
    """Column widths for `rows` within `room` cells: each column starts at its longest value
    and, while the total is too wide, the column with the most slack above its longest word
    gives one cell (so a value wraps between words, never inside one)."""
    widths = [max(cell_len(r[i]) for r in rows) for i in range(len(rows[0]))]
    floors = [max(_longest_word(r[i]) for r in rows) or 1 for i in range(len(rows[0]))]
    while sum(widths) > room:
        slack = [w - f for w, f in zip(widths, floors)]
        i = max(range(len(widths)), key=lambda k: slack[k])
        if slack[i] <= 0:
            break  # every column is down to its longest word: the line is wider than room
        widths[i] -= 1
    return widths


def table_lines(rows: list[list[str]], widths: list[int],
                width: int) -> list[tuple[str, str | None]]:
    """(line, status) for the header and each row: STATUS ITEM EXPECTED ACTUAL wrapped by
    cell at word boundaries; a fix inline when it fits whole in the FIX / NOTE column, else
    alone on the next line under ITEM; a reason wrapped inline, or below when the column is
    narrower than NOTE_MIN."""
    indent = 2 + sum(w + 2 for w in widths)
    room = width - indent
    under = 2 + widths[0] + 2  # a note that does not fit inline starts under ITEM
    out: list[tuple[str, str | None]] = []
    head = list(HEAD[:4]) + [HEAD[4] if any(r[4] for r in rows) else ""]
    for n, cells in enumerate([head, *rows]):
        wrapped = [wrap(c, w) if cell_len(c) > w else [c] for c, w in zip(cells[:4], widths)]
        note, is_fix = cells[4], len(cells) > 5 and cells[5] == "fix"
        inline: list[str] = []
        below: list[str] = []
        if note and is_fix:
            (inline if cell_len(note) <= room else below).append(note)
        elif note and room >= NOTE_MIN:
            inline = wrap(note, room)
        elif note:
            below = wrap(note, max(width - under, NOTE_MIN))
        if n == 0 and room < NOTE_MIN:
            inline = []  # no FIX / NOTE column: every note goes below its row
        height = max(len(inline), *(len(c) for c in wrapped))
        for k in range(height):
            parts = [(c[k] if k < len(c) else "") for c in wrapped]
            line = "  " + "  ".join(p + " " * (w - cell_len(p)) for p, w in zip(parts, widths))
            if k < len(inline):
                line += "  " + inline[k]
            out.append((line.rstrip(), cells[0] if n and k == 0 else None))
        out += [(" " * under + b, None) for b in below]
    return out
