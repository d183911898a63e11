"""Judge drivers, firmware, NIC settings and network sysctls against the catalog, per item."""

from __future__ import annotations

import argparse
from typing import Any

from hwmgr.catalog.load import load_catalog
from hwmgr.compliance.apply import open_transactions
from hwmgr.compliance.check import check_host, exit_code, parse_layers
from hwmgr.compliance.history import record_check
from hwmgr.compliance.prom import write_prom
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_DRIFT,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REBOOT_PENDING,
    EXIT_UNKNOWN,
    HwmgrError,
)
from hwmgr.output import Outcome, printable
from hwmgr.transaction.pending import reboot_pending
from hwmgr.ui.check_table import render
from hwmgr.ui.options import common_options, lifecycle_options
from hwmgr.ui.verbhelp import Example

NAME = "check"
HELP = "compare drivers, firmware and NIC/sysctl settings with the catalog"
EXAMPLES = (
    Example("hwmgr check", "this machine: one line per item, drift first"),
    Example("hwmgr check --root snap.tar.gz", "a snapshot of a host that drifts", EXIT_DRIFT),
    Example("hwmgr check --root snap.tar.gz --json", "the findings as JSON (docs/check.md)",
            EXIT_DRIFT),
    Example("hwmgr check --root web01 --layer settings,sysctl",
            "only NIC settings and sysctls, of a compliant host"),
    Example("hwmgr check --catalog base.json --catalog site.json", "a site layer over a base"),
)
# the envelope's status for each outcome of a check (the fleet report's host statuses)
STATUS = {EXIT_OK: "ok", EXIT_DRIFT: "drift", EXIT_REBOOT_PENDING: "reboot-pending",
          EXIT_UNKNOWN: "unknown"}
EXIT_CODES = {
    EXIT_OK: "compliant (uncatalogued items, on which the catalog has no verdict, allowed)",
    EXIT_NOT_FOUND: "no such --root snapshot or --catalog file",
    EXIT_DRIFT: "drift",
    EXIT_REBOOT_PENDING: "reboot pending (and only drivers or firmware drift)",
    EXIT_BAD_INPUT: "a bad snapshot, catalog or --layer list (named)",
    EXIT_UNKNOWN: "something could not be read (and nothing drifted)",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return [common_options(root=True), lifecycle_options(mutating=False)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layer", metavar="LIST",
                   help="comma-separated layers to check: driver, firmware, settings, sysctl "
                        "(default: all)")
    p.add_argument("--prom", metavar="FILE",
                   help="also write the result as Prometheus text (node_exporter textfile)")


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    layers = parse_layers(args.layer)
    cat = load_catalog(args.catalog, config=ctx.config)
    result = check_host(ctx.host, cat, layers)
    # a change installed but not yet live: from the journal and the boot id, never guessed
    pending = reboot_pending(ctx.host, ctx.config.state_dir)
    data = result.data(pending)
    code = exit_code(result.findings, [p for p in pending if p.get("status") == "pending"])
    if code == EXIT_OK and pending:  # only "unknown" entries: the boot id could not be read
        code = EXIT_UNKNOWN
    data["compliant"] = code == EXIT_OK
    opened = open_transactions(ctx.host, ctx.config) if ctx.host.live else []
    if opened:  # an interrupted apply or upgrade: what check sees may be half of it
        data.setdefault("notes", []).extend(opened)
    if ctx.host.live:
        try:
            record_check(ctx.host, ctx.config.state_dir, data)
        except HwmgrError as exc:  # e.g. not root: the check itself still stands
            data.setdefault("notes", []).append(f"check history not recorded: {exc.message}")
    if args.prom:
        data["prom"] = str(write_prom(args.prom, data))

    def _render(console: Any) -> None:
        render(console, data, devices=result.devices)
        for line in opened:
            console.print(printable(f"note: {line}"), markup=False)

    return Outcome(command=NAME, status=STATUS[code], data=data, render=_render,
                   exit_code=code)
