"""List PCI functions, NICs and RAID controllers with versions and catalog verdicts."""

from __future__ import annotations

import argparse
from typing import Any

from hwmgr.output import Outcome

NAME = "inventory"
HELP = "list PCI functions, NICs and RAID controllers"
EXAMPLES = """\
examples:
  hwmgr inventory                         this machine, as a table grouped by class
  hwmgr inventory --json                  the same as one JSON object (format 1)
  hwmgr inventory --root snap.tar.gz      analyse a snapshot taken with 'hwmgr snapshot'
  hwmgr inventory --class 02 --json       network controllers only
"""

COLUMNS = ("address", "device", "driver", "version", "firmware", "links", "catalog")
STATUS_STYLE = {"ok": "green", "outdated": "yellow", "known-bad": "bold red", "unknown": "dim"}


def option_parents() -> list[argparse.ArgumentParser]:
    from hwmgr.ui.options import common_options

    return [common_options(root=True)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--class",
        dest="klass",
        metavar="HEX",
        help="only functions whose class starts with HEX (e.g. 02 network, 0104 RAID)",
    )
    p.add_argument(
        "--no-catalog", action="store_true", help="skip catalog verdicts (catalog: null)"
    )


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    from hwmgr.inventory.scan import collect

    scan = collect(ctx.host, args.catalog, use_catalog=not args.no_catalog)
    if args.klass:
        want = args.klass.lower().removeprefix("0x")
        scan.devices = [d for d in scan.devices if (d["class"] or "").startswith(want)]
        keep = {a for d in scan.devices for a in [d["address"]]}
        scan.interfaces = [i for i in scan.interfaces if i["address"] in keep]
    data = scan.to_json()
    return Outcome(command=NAME, data=data, render=lambda c: render(c, data))


def render(console: Any, data: dict[str, Any]) -> None:
    """Rich tables, one per PCI class, plus a verdict summary."""
    from rich.table import Table

    host = data["host"]
    devices = data["devices"]
    ifaces = {i["name"]: i for i in data["interfaces"]}
    console.print(
        f"[bold]{host['hostname'] or 'unknown host'}[/]  kernel {host['kernel'] or 'unknown'}"
        f"  {len(devices)} PCI functions"
    )
    groups: dict[str, list[dict[str, Any]]] = {}
    for d in devices:
        groups.setdefault(d["class_name"] or f"class {d['class'] or '?'}", []).append(d)
    order = sorted(groups, key=lambda k: (_rank(groups[k][0]["class"]), k))
    for title in order:
        t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for col in COLUMNS:
            t.add_column(col, overflow="fold", no_wrap=col == "address")
        for d in groups[title]:
            t.add_row(
                d["address"],
                f"{_device_label(d)} [{d['vendor_id'] or '?'}:{d['device_id'] or '?'}]",
                d["driver"] or "-",
                d["driver_version"] or "-",
                d["firmware_version"] or "-",
                _links(d, ifaces),
                _verdict(d["catalog"]),
            )
        console.print(t)
    flagged = ("known-bad", "outdated")
    for d in [d for d in devices if d["catalog"] and d["catalog"]["status"] in flagged]:
        v = d["catalog"]
        console.print(
            f"[{STATUS_STYLE[v['status']]}]{v['status']}[/]: {d['address']} {d['driver']} "
            f"{d['driver_version']} → recommended {v.get('recommended_version') or '-'}"
            + (f" ({v['reason']})" if v.get("reason") else ""),
            markup=True,
        )
    for note in data.get("notes", []):
        console.print(f"[dim]note: {note}[/]")


def _rank(cls: str | None) -> int:
    if not cls:
        return 9
    return {"02": 0, "01": 1}.get(cls[:2], 5)


def _device_label(d: dict[str, Any]) -> str:
    vendor = d["vendor_name"] or (f"vendor {d['vendor_id']}" if d["vendor_id"] else "?")
    device = d["device_name"] or (f"device {d['device_id']}" if d["device_id"] else "?")
    return f"{vendor} {device}"


def _links(d: dict[str, Any], ifaces: dict[str, dict[str, Any]]) -> str:
    parts = []
    for name in d["interfaces"]:
        i = ifaces.get(name, {})
        speed = f" {i['speed_mbps']}Mb/s" if i.get("speed_mbps") else ""
        parts.append(f"{name} {i.get('operstate') or '?'}{speed}")
    if d.get("sriov"):
        s = d["sriov"]
        parts.append(f"SR-IOV {s['numvfs'] if s['numvfs'] is not None else '?'}/{s['totalvfs']}")
    if d.get("physfn"):
        parts.append(f"VF of {d['physfn']}")
    return ", ".join(parts) or "-"


def _verdict(v: dict[str, Any] | None) -> str:
    if not v:
        return "[dim]-[/]"
    style = STATUS_STYLE.get(v["status"], "")
    rec = v.get("recommended_version")
    extra = f" → {rec}" if rec and v["status"] in ("outdated", "known-bad") else ""
    return f"[{style}]{v['status']}[/]{extra}"
