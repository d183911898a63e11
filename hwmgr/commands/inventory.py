"""List PCI functions, NICs and RAID controllers with versions and catalog verdicts."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)
from hwmgr.inventory.scan import collect
from hwmgr.output import Outcome, printable
from hwmgr.ui.context import Context
from hwmgr.ui.inventory_table import render, wrap
from hwmgr.ui.options import common_options
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "inventory"
EXAMPLES = (
    Example("hwmgr inventory", "this machine: NICs and storage controllers"),
    Example("hwmgr inventory --all", "every PCI function (bridges, USB, SMBus too)"),
    Example("hwmgr inventory --json", "the same as one JSON object (format 1)"),
    Example("hwmgr inventory --root snap.tar.gz", "a snapshot taken with 'hwmgr snapshot'"),
    Example("hwmgr inventory --root snap.tar.gz --class 02 --json", "network controllers only"),
    Example("hwmgr inventory --root nosuch.tar.gz", "no such snapshot", EXIT_NOT_FOUND),
    Example("hwmgr inventory --class zz", "not a class code: refused", EXIT_USAGE),
)
EXIT_CODES = {
    EXIT_OK: "listed",
    EXIT_NOT_FOUND: "no such --root snapshot or --catalog file",
    EXIT_BAD_INPUT: "a bad snapshot or catalog file (named)",
}

CLASS_RE = re.compile(r"(0[xX])?[0-9a-fA-F]{1,6}")  # a prefix of class+subclass+prog-if
CHECK_HINT = "NIC settings and sysctls against the catalog: hwmgr check"


def option_parents() -> list[argparse.ArgumentParser]:
    return [common_options(root=True)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--class",
        dest="klass",
        metavar="HEX",
        help="only functions whose class starts with HEX (e.g. 02 network, 0104 RAID)",
    )
    p.add_argument(
        "--all", action="store_true",
        help="list every PCI function (default: NICs and storage, the rest counted)",
    )
    p.add_argument(
        "--no-catalog", action="store_true", help="skip catalog verdicts (catalog: null)"
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    if args.no_catalog and args.catalog:
        raise UsageError("--no-catalog and --catalog contradict each other: give one")
    if args.klass is not None and not CLASS_RE.fullmatch(args.klass):
        raise UsageError(f"--class {printable(args.klass)}: expected 1 to 6 hex digits of a "
                         "PCI class code (e.g. 02 network, 0104 RAID)")
    scan = collect(ctx.host, args.catalog, use_catalog=not args.no_catalog, config=ctx.config)
    if args.klass:
        want = args.klass.lower().removeprefix("0x")
        scan.devices = [d for d in scan.devices if (d.pci_class or "").startswith(want)]
        keep = {d.address for d in scan.devices}
        scan.interfaces = [i for i in scan.interfaces if i.address in keep]
    data = scan.to_json()
    show_all = bool(args.all or args.klass)  # a --class filter is an explicit request: list it

    def _render(console: Console) -> None:
        render(console, scan, show_all=show_all)
        flagged = any(d.catalog is not None and d.catalog["status"] in ("known-bad", "outdated")
                      for d in scan.devices)
        if not args.no_catalog and not flagged:  # else the upgrade hint comes first
            for line in wrap(CHECK_HINT, max(int(console.width or 80), 20)):
                console.out(line, style="dim")

    return Outcome(command=NAME, data=data, render=_render)


