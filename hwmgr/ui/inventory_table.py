"""The human `hwmgr inventory` table: one table that fits the terminal, verdict notes, a hint.

No value is ever cut. Versions, IDs and addresses are never split: a column either fits
whole or its values move under the device name as "details"; a long device name wraps
between words (`wrap`, which the check table shares), onto as many lines as it needs. On a
terminal the
table is box-drawn and coloured by rich; piped, it is plain aligned text like lspci or dnf.
Every host- or catalog-supplied string passes through `printable()` before it is measured.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Tuple

from hwmgr.inventory.model import Device, Interface
from hwmgr.inventory.scan import Scan
from hwmgr.output import cell_len, fit, printable

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

# (key, header); DEVICE also carries the details of the columns that did not fit
COLUMNS = [("address", "ADDRESS"), ("device", "DEVICE"), ("id", "ID"), ("driver", "DRIVER"),
           ("version", "VERSION"), ("firmware", "FIRMWARE"), ("link", "LINK"),
           ("verdict", "VERDICT")]
# which columns move into the details first, and the device width each one must leave:
# the optional ones go before the device name gets cramped, the core ones only at need
MOVE = [("id", 28), ("link", 28), ("firmware", 28), ("version", 12), ("driver", 12),
        ("verdict", 12)]
DETAIL = {"id": "[{}]", "link": "{}", "firmware": "fw {}", "version": "version {}",
          "driver": "driver {}", "verdict": "verdict {}"}
DEVICE_MIN = 12
MAIN_CLASSES = ("01", "02")  # mass storage, network
STATUS_STYLE = {"ok": "green", "outdated": "yellow", "known-bad": "bold red",
                "uncatalogued": "cyan", "unknown": "dim"}
LEGEND = ("Verdict: ok = recommended or known-good; outdated = a newer version is "
          "recommended or fixes a known issue; known-bad = the catalog's sources tie this very "
          "build to a serious defect; uncatalogued = "
          "the catalog has no verdict on this version; unknown = the driver or its version "
          "could not be read; - = no catalog entry; [n] = note n below.")
_CORP = (", Inc. and subsidiaries", " Inc. and subsidiaries", " Corporation", " Corp.",
         " Co., Ltd.", " Co Ltd", " Co., Ltd", " Ltd.", " Ltd", ", Inc.", " Inc.", " Inc",
         " GmbH")


@dataclass
class Row:
    """One PCI function as display strings (escaped), plus what its verdict cell refers to."""

    cells: dict[str, str]
    status: str | None
    details: list[str] = field(default_factory=list)


# a verdict's note: (entry, version, status, recommended, reason, firmware), all printable
NoteKey = Tuple[str, str, str, str, str, str]


def render(console: Console, scan: Scan, show_all: bool = False) -> None:
    """Header, one table (NICs and storage first), collapsed rest, notes, legend, hint."""
    width = max(int(console.width or 80), 20)
    tty = bool(console.is_terminal)
    devices = sorted(scan.devices, key=_order)
    shown = devices if show_all else [d for d in devices if is_main(d)]
    hidden = len(devices) - len(shown)
    ifaces = {i.name: i for i in scan.interfaces}
    notes: dict[NoteKey, int] = {}
    rows = [_row(d, ifaces, notes) for d in shown]

    title = (f"{printable(scan.hostname or 'unknown host')}  kernel "
             f"{printable(scan.kernel or 'unknown')}  {len(devices)} PCI functions")
    _prose(console, title, width, style="bold")
    if rows:
        keys, widths = _layout(rows, width, gap=3 if tty else 2)
        for r in rows:
            r.details = [DETAIL[k].format(r.cells[k]) for k in _moved(keys)
                         if r.cells[k] != "-"]
        if tty:
            _rich_table(console, rows, keys, widths)
        else:
            console.out("\n".join(_plain_table(rows, keys, widths, width)))
    if hidden:
        _prose(console, f"+{hidden} other function{'s' if hidden != 1 else ''}: --all to list",
               width)
    _prose(console, LEGEND, width, style="dim")
    for (entry, version, status, rec, reason, fw), num in notes.items():
        head = f"[{num}] {entry} {version} is {status}"
        head += f" (recommended: {rec})" if rec and status in ("outdated", "known-bad") else ""
        _prose(console, f"{head}{': ' + reason if reason else ''}{fw}", width, indent=4)
    hint = _hint(shown)
    if hint:
        _prose(console, hint, width, style="bold")
    for note in scan.notes:
        _prose(console, f"note: {printable(note)}", width, style="dim")


def is_main(d: Device) -> bool:
    """NICs and storage controllers, and anything the catalog has a verdict on."""
    return (d.pci_class or "")[:2] in MAIN_CLASSES or bool(d.catalog)


def _order(d: Device) -> tuple[int, str, str]:
    """NICs, then storage, then the rest by class and address (lspci-like within a class)."""
    cls = d.pci_class or ""
    rank = {"02": 0, "01": 1}.get(cls[:2], 2 if cls else 3)
    return rank, cls, d.address


def _row(d: Device, ifaces: dict[str, Interface], notes: dict[NoteKey, int]) -> Row:
    """Display strings for one function; registers its verdict's note (once per version)."""
    p = printable
    ident = f"{d.vendor_id or '?'}:{d.device_id or '?'}"
    verdict, status = "-", None
    v = d.catalog
    if v:
        status = str(v.get("status"))
        fw = v.get("firmware") or {}
        fw_note = (f" (needs firmware {p(str(fw.get('min')))} or newer, has "
                   f"{p(str(fw.get('current') or 'unknown'))})" if fw.get("ok") is False else "")
        key = (p(v.get("entry") or d.driver or "?"), p(d.driver_version or "unknown"),
               p(status), p(v.get("recommended_version") or ""), p(v.get("reason") or ""), fw_note)
        verdict = p(status)
        if key[4] or key[3] or fw_note:
            verdict += f" [{notes.setdefault(key, len(notes) + 1)}]"
    cells = {
        "address": p(d.address),
        "device": _device_name(d),
        "id": p(ident),
        "driver": p(d.driver or "-"),
        "version": p(d.driver_version or "-"),
        "firmware": p(d.firmware_version or "-"),
        "link": _links(d, ifaces),
        "verdict": verdict,
    }
    return Row(cells=cells, status=status)


def _device_name(d: Device) -> str:
    """"Vendor Device" without the corporate suffix, which costs width and tells nothing."""
    vendor = d.vendor_name or (f"vendor {d.vendor_id}" if d.vendor_id else "?")
    for suffix in _CORP:
        if vendor.endswith(suffix) and len(vendor) > len(suffix):
            vendor = vendor[: -len(suffix)]
            break
    device = d.device_name or (f"device {d.device_id}" if d.device_id else "?")
    return printable(f"{vendor} {device}")


def _links(d: Device, ifaces: dict[str, Interface]) -> str:
    """Interfaces with state and speed, SR-IOV VFs in use, and the PF of a VF."""
    parts = []
    for name in d.interfaces:
        i = ifaces.get(name)
        speed = _speed(i.speed_mbps if i else None)
        parts.append(f"{name} {(i.operstate if i else None) or '?'}"
                     f"{' ' + speed if speed else ''}")
    if d.sriov:
        s = d.sriov
        parts.append(f"SR-IOV {s.numvfs if s.numvfs is not None else '?'}/{s.totalvfs}")
    if d.physfn:
        parts.append(f"VF of {d.physfn}")
    return printable(", ".join(parts)) if parts else "-"


def _speed(mbps: int | None) -> str:
    """10000 -> "10Gb/s": short enough to keep the link column narrow."""
    if not isinstance(mbps, int) or mbps <= 0:
        return ""
    if mbps >= 1000:
        return f"{mbps / 1000:g}Gb/s"
    return f"{mbps}Mb/s"


# ----------------------------------------------------------------------------- layout
def _layout(rows: list[Row], width: int, gap: int) -> tuple[list[str], dict[str, int]]:
    """Columns to show and their widths: move columns into the details until the device
    column keeps the width each move asks for; the device takes what is left."""
    keys = [k for k, _ in COLUMNS]
    head = dict(COLUMNS)

    def natural(k: str) -> int:
        return max(cell_len(head[k]), *(cell_len(r.cells[k]) for r in rows))

    widths = {k: natural(k) for k in keys if k != "device"}
    for key, wants in [*MOVE, (None, 0)]:
        budget = width - sum(widths[k] for k in keys if k != "device") - gap * (len(keys) - 1)
        if key is None or budget >= max(wants, _detail_min(rows, _moved(keys)),
                                        _name_min(rows)):
            break
        keys.remove(key)
    moved = _moved(keys)
    detail_min = max(_detail_min(rows, moved), _name_min(rows))
    longest = max(cell_len(head["device"]), *(cell_len(r.cells["device"]) for r in rows),
                  *(cell_len(", ".join(DETAIL[k].format(r.cells[k]) for k in moved))
                    for r in rows))
    out = {k: widths[k] for k in keys if k != "device"}
    out["device"] = max(DEVICE_MIN, detail_min, min(budget, longest))
    return keys, out


def _moved(keys: list[str]) -> list[str]:
    """The columns not shown (their values go into the details), in column order."""
    return [k for k, _ in COLUMNS if k not in keys]


def _detail_min(rows: list[Row], moved: list[str]) -> int:
    """The longest word in the details (+1 for a trailing comma): the device column's floor."""
    words = [w for r in rows for k in moved for w in DETAIL[k].format(r.cells[k]).split()]
    return max((cell_len(w) + 1 for w in words), default=0)


def _name_min(rows: list[Row]) -> int:
    """The longest word of a device name: the device column's floor, so names wrap between
    words and never inside one."""
    return max((cell_len(w) for r in rows for w in r.cells["device"].split()), default=0)


def _device_lines(r: Row, w: int) -> list[str]:
    """The device name wrapped between words, then the details."""
    return [*wrap(r.cells["device"], w), *_pack(r.details, w)]


def _pack(details: list[str], w: int) -> list[str]:
    """Detail items joined by commas into lines of `w` cells, broken only between words."""
    lines: list[str] = []
    cur = ""
    for i, item in enumerate(details):
        text = item + ("," if i < len(details) - 1 else "")
        for word_line in (wrap(text, w) if cell_len(text) > w else [text]):
            if cur and cell_len(cur) + 1 + cell_len(word_line) <= w:
                cur = f"{cur} {word_line}"
            else:
                if cur:
                    lines.append(cur)
                cur = word_line
    if cur:
        lines.append(cur)
    return lines


def wrap(text: str, w: int, indent: int = 0) -> list[str]:
    """Greedy word wrap by terminal cells that never breaks a word unless the word alone is
    wider than the line (then it is cut hard, so no line is ever wider than `w`)."""
    lines: list[str] = []
    cur = ""
    for word in re.findall(r"\S+ *", text):
        room = w - (indent if lines else 0)
        if cell_len((cur + word).rstrip()) <= room:
            cur += word
            continue
        if cur:
            lines.append(cur.rstrip())
            room = w - indent
        room = max(room, 1)
        while cell_len(word.rstrip()) > room:  # a single word wider than the line
            cut = word[:fit(word, room)]  # linear (output.fit), not one character at a time
            lines.append(cut)
            word = word[len(cut):]
        cur = word
    if cur.strip():
        lines.append(cur.rstrip())
    return [" " * indent + ln if i else ln for i, ln in enumerate(lines)] or [""]


def _prose(console: Console, text: str, width: int, style: str | None = None,
           indent: int = 0) -> None:
    """Print text wrapped to the width at word boundaries, with no markup parsed."""
    for line in wrap(text, width, indent):
        console.out(line, style=style)


def _plain_table(rows: list[Row], keys: list[str], widths: dict[str, int],
                 width: int) -> list[str]:
    """Aligned text, two spaces between columns, no trailing blanks (for pipes and logs);
    the rest of a wrapped device name, then the details, run under the row from the device
    column (the details to the right margin)."""
    head = dict(COLUMNS)
    indent = sum(widths[k] + 2 for k in keys[: keys.index("device")])

    def line(cells: list[str]) -> str:
        return "  ".join(c + " " * (widths[k] - cell_len(c)) for k, c in zip(keys, cells)).rstrip()

    out = [line([head[k] for k in keys])]
    for r in rows:
        name = wrap(r.cells["device"], min(widths["device"], max(width - indent, DEVICE_MIN)))
        out.append(line([name[0] if k == "device" else r.cells[k] for k in keys]))
        out += [" " * indent + n for n in name[1:]]
        out += [" " * indent + d for d in _pack(r.details, max(width - indent, DEVICE_MIN))]
    return out


def _rich_table(console: Console, rows: list[Row], keys: list[str], widths: dict[str, int]) -> None:
    """The same layout, box-drawn and coloured; cells are Text, so no markup is parsed."""
    from rich.table import Table  # rich: only drawing needs it
    from rich.text import Text

    head = dict(COLUMNS)
    last = len(keys) - 1

    def pad(text: str, i: int) -> str:
        """The cell's own padding, a space inside each rule: rich before 14 gives a column one
        cell less than its width when the table has pad_edge=False (RHEL 9's 13.1, Debian
        12's 13.3, Ubuntu 24.04's 13.7 cropped the last letter of each device line)."""
        return "\n".join(" " * (i > 0) + ln + " " * (i < last) for ln in text.split("\n"))

    t = Table(show_edge=False, padding=0, header_style="bold", expand=False)
    for i, k in enumerate(keys):
        t.add_column(pad(head[k], i), width=widths[k] + (i > 0) + (i < last), no_wrap=True,
                     overflow="fold")
    for r in rows:
        cells = []
        for i, k in enumerate(keys):
            if k == "device":
                cells.append(Text(pad("\n".join(_device_lines(r, widths[k])), i)))
            elif k == "verdict":
                cells.append(Text(pad(r.cells[k], i),
                                  style=STATUS_STYLE.get(r.status or "", "dim")))
            else:
                cells.append(Text(pad(r.cells[k], i)))
        t.add_row(*cells)
    console.print(t, crop=False)


def _hint(devices: list[Device]) -> str | None:
    """The next command for the worst flagged driver (known-bad before outdated)."""
    flagged = [(d, d.catalog) for d in devices
               if d.catalog and d.catalog.get("status") in ("known-bad", "outdated")]
    if not flagged:
        return None
    flagged.sort(key=lambda dv: dv[1]["status"] != "known-bad")
    dev, v = flagged[0]
    entry = v.get("entry") or dev.driver or "DRIVER"
    rec = v.get("recommended_version")
    cmd = f"hwmgr plan upgrade {shlex.quote(entry)} --to {shlex.quote(rec) if rec else 'VERSION'}"
    return f"Next: {printable(cmd)}  (dry run of the upgrade)"
