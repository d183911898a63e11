"""Judge drivers, firmware, NIC settings and network sysctls against the catalog, per item."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from hwmgr.catalog.load import load_catalog
from hwmgr.compliance.batch import batch_exit_code, check_roots, roots_named
from hwmgr.compliance.check import Judged, judge_host, parse_layers
from hwmgr.compliance.history import record_check
from hwmgr.compliance.prom import failure_registry, write_prom, write_registry
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_DRIFT,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_REBOOT_PENDING,
    EXIT_UNKNOWN,
    HwmgrError,
    UsageError,
)
from hwmgr.host.seam import Host
from hwmgr.lifecycle.gate.gaterecord import check_items
from hwmgr.output import Outcome, printable
from hwmgr.transaction.pending import open_transactions
from hwmgr.ui.check_table import render, render_evidence
from hwmgr.ui.context import Context
from hwmgr.ui.options import common_options, lifecycle_options
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "check"
EXAMPLES = (
    Example("hwmgr check", "this machine: one line per item, drift first"),
    Example("hwmgr check --root snap.tar.gz", "a snapshot of a host that drifts", EXIT_DRIFT),
    Example("hwmgr check --root snap.tar.gz --json", "the findings as JSON (docs/check.md)",
            EXIT_DRIFT),
    Example("hwmgr check --root web01 --layer settings,sysctl",
            "only NIC settings and sysctls, of a compliant host"),
    Example("hwmgr check --catalog base.json --catalog site.json", "a site layer over a base"),
    Example("hwmgr check --roots-from snapshots.json --json",
            "many snapshots in one run, a result per host (docs/fleet.md)", EXIT_DRIFT),
)
# the envelope's status for each outcome of a check (the fleet report's host statuses)
STATUS = {EXIT_OK: "ok", EXIT_DRIFT: "drift", EXIT_REBOOT_PENDING: "reboot-pending",
          EXIT_UNKNOWN: "unknown", EXIT_PARTIAL: "partial"}
EXIT_CODES = {
    EXIT_OK: "compliant (uncatalogued items, on which the catalog has no verdict, allowed)",
    EXIT_NOT_FOUND: "no such --root snapshot or --catalog file",
    EXIT_DRIFT: "drift",
    EXIT_PARTIAL: "several snapshots: one could not be checked (its entry says why), none "
                  "drifts",
    EXIT_REBOOT_PENDING: "reboot pending (and only drivers or firmware drift)",
    EXIT_BAD_INPUT: "a bad snapshot, catalog or --layer list (named)",
    EXIT_UNKNOWN: "something could not be read (and nothing drifted)",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return [common_options(root=False), lifecycle_options(mutating=False)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", action="append", default=[], metavar="DIR|FILE.tar.gz",
                   help="analyse a host snapshot instead of this machine; repeat it to check "
                        "many in one run (a result per host, named after the file)")
    p.add_argument("--roots-from", metavar="FILE",
                   help="check every snapshot this manifest lists: a JSON object "
                        "{host: snapshot} or lines 'HOST SNAPSHOT'")
    p.add_argument("--layer", metavar="LIST",
                   help="comma-separated layers to check: driver, firmware, settings, sysctl "
                        "(default: all)")
    p.add_argument("--prom", metavar="FILE",
                   help="also write the result as Prometheus text (node_exporter textfile)")
    p.add_argument("--evidence", action="store_true",
                   help="after the table, print the evidence each finding's source holds "
                        "(--json cites a source by reference and URL only)")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    layers = parse_layers(args.layer)
    roots = list(args.root or [])
    if args.roots_from or len(roots) > 1:
        return _run_batch(args, ctx, layers, roots)
    # one snapshot (or none): the Context opens it as `--root`, like every other verb
    args.root = roots[0] if roots else None
    t0 = time.monotonic()
    try:
        judged = _check_one(ctx, layers)
    except HwmgrError as exc:
        if args.prom:  # the textfile says the check failed, not the last good run's items
            why, took = exc.message, time.monotonic() - t0
            write_registry(args.prom, lambda: failure_registry(why, took))
        raise
    data, code, result = judged.data, judged.code, judged.result
    opened = open_transactions(ctx.host, ctx.config.state_dir) if ctx.host.live else []
    if opened:  # an interrupted apply or upgrade: what check sees may be half of it
        data.setdefault("notes", []).extend(opened)
    if args.prom:  # first: a check whose --prom output failed is an error, not history
        data["prom"] = str(write_prom(args.prom, data, duration=time.monotonic() - t0))
    if ctx.host.live:
        try:
            record_check(ctx.host, ctx.config.state_dir, data)
        except HwmgrError as exc:  # e.g. not root: the check itself still stands
            data.setdefault("notes", []).append(f"check history not recorded: {exc.message}")

    def _render(console: Console) -> None:
        render(console, data, devices=result.devices)
        if args.evidence:
            render_evidence(console, [f.source for f in result.findings if f.source])
        for line in opened:
            console.print(printable(f"note: {line}"), markup=False)

    return Outcome(command=NAME, status=STATUS[code], data=data, render=_render,
                   exit_code=code)


def _check_one(ctx: Context, layers: set[str]) -> Judged:
    """This machine or the one `--root` (run() keeps a live check in the host's history)."""
    cat = load_catalog(ctx.args.catalog, config=ctx.config)
    return judge_host(ctx.host, cat, layers, ctx.config.state_dir, check_items)


def _run_batch(args: argparse.Namespace, ctx: Context, layers: set[str],
               roots: list[str]) -> Outcome:
    """Every snapshot checked with one catalog load; each host keeps its own outcome."""
    if args.prom:
        raise UsageError("--prom writes one host's textfile: give one --root (for a fleet, "
                         "use fleet-report --prom)")
    named = roots_named(roots, args.roots_from)
    cat = load_catalog(args.catalog, config=ctx.config)

    def check_one(host: Host) -> tuple[dict[str, Any], int]:
        judged = judge_host(host, cat, layers, ctx.config.state_dir, check_items)
        return judged.data, judged.code

    hosts = check_roots(named, check_one)
    code = batch_exit_code(hosts)
    counts: dict[str, int] = {}
    for h in hosts.values():
        counts[h["status"]] = counts.get(h["status"], 0) + 1

    def _render(console: Console) -> None:
        for name, h in hosts.items():
            what = h["error"] or ", ".join(
                f"{n} {k}" for k, n in (h["check"] or {}).get("summary", {}).items() if n)
            console.print(f"{printable(name)}: {h['status']} ({printable(what)})", markup=False)
        console.print(f"{len(hosts)} snapshots: " + ", ".join(
            f"{n} {k}" for k, n in sorted(counts.items())), markup=False)

    return Outcome(command=NAME, status=STATUS[code], exit_code=code, render=_render,
                   data={"batch": True, "summary": counts, "hosts": hosts})
