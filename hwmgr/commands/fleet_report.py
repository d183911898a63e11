"""Build the fleet report (JSON, JUnit XML, HTML) from per-host `hwmgr check` results."""

from __future__ import annotations

import argparse
import gc
import json
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from hwmgr.compliance.prom import write_registry
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_DRIFT,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_REBOOT_PENDING,
    EXIT_UNKNOWN,
    HwmgrError,
    UsageError,
)
from hwmgr.fleet.groups import assign, compile_pattern, read_groups
from hwmgr.fleet.html import html_chunks
from hwmgr.fleet.jinja import jinja2
from hwmgr.fleet.junit import junit_chunks
from hwmgr.fleet.prom import failure_registry, fleet_registry
from hwmgr.fleet.report import build_report, exit_code, report_chunks
from hwmgr.fleet.results import load_history, read_results
from hwmgr.fleet.trend import TREND_FILE, Trend, load_trend, news, next_trend
from hwmgr.fleet.view import fleet_items
from hwmgr.fleet.write import write_outputs
from hwmgr.output import Outcome, printable
from hwmgr.ui.check_table import value_text
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "fleet-report"
NOTES = """\
input (--results, repeatable): a directory of one JSON file per host, named after the host
  (web01.json), holding
  {"status": "compliant|drift|unknown|reboot-pending|unreachable|failed",
   "check": <hwmgr check --json output or its data, or null>, "error": "why" | null}
  or just the raw output of `hwmgr check --json`; or one file of many hosts:
  {"hosts": {"web01": {...as above}, ...}} or `hwmgr check --roots-from ... --json`'s output.

output (in --out DIR, each file replaced atomically):
  fleet-report.json   the normative report (hwmgr/schemas/fleet-report.schema.json)
  fleet-report.xml    JUnit: a suite per host, a failure per drifting item
  fleet-report.html   one self-contained page: fleet-wide drift, groups, hosts, trend
  fleet-trend.json    every run's counts and this run's drift, read back next time for the
                      trend and "new since the last report" (--previous, else the one in --out)

groups (the page's group table, JUnit class names): --groups FILE ({group: [hosts]}, e.g.
  Ansible's groups), --group-by REGEX (a host-name pattern), else the host's domain.

SOURCE_DATE_EPOCH, when set, fixes the report's 'generated' time."""
EXAMPLES = (
    Example("hwmgr fleet-report --results results/ --out report/", "some host drifts",
            EXIT_DRIFT),
    Example("hwmgr fleet-report --results results/ --out report/ "
            "--history old/*/fleet-report.json", "with a trend", EXIT_DRIFT),
    Example("hwmgr fleet-report --results results/ --out report/ --group-by '^([a-z]+)' "
            "--prom fleet.prom", "grouped by name prefix, with fleet metrics", EXIT_DRIFT),
)
EXIT_CODES = {
    EXIT_OK: "every host compliant",
    EXIT_DRIFT: "some host drifts",
    EXIT_PARTIAL: "some host unreachable or failed (and none drifts)",
    EXIT_REBOOT_PENDING: "reboot pending",
    EXIT_BAD_INPUT: "a bad input file or no --results directory (named; nothing written but "
                    "--prom's failure sample)",
    EXIT_UNKNOWN: "unknown",
}


def option_parents() -> list[argparse.ArgumentParser]:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", help="print one JSON object (format 1)")
    p.add_argument("--debug", action="store_true", help="show tracebacks on internal errors")
    return [p]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """--results, --out, the trend's inputs, grouping and metrics."""
    p.add_argument("--results", required=True, action="append", metavar="DIR|FILE", type=Path,
                   help="a directory with one JSON result file per host, or one file of many "
                        "hosts' results (repeatable)")
    p.add_argument("--out", required=True, metavar="DIR", type=Path,
                   help="directory to write the report files into")
    p.add_argument("--history", action="extend", nargs="+", default=[], metavar="FILE",
                   type=Path, help="earlier fleet-report.json files, for the trend")
    p.add_argument("--previous", metavar="FILE", type=Path,
                   help=f"the last run's {TREND_FILE} (default: the one in --out, if any)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--groups", metavar="FILE", type=Path,
                   help="JSON {group: [hosts]} (e.g. Ansible's groups); a host takes the first")
    g.add_argument("--group-by", metavar="REGEX",
                   help="group hosts by this host-name pattern (its first capture group)")
    p.add_argument("--prom", metavar="FILE",
                   help="also write fleet metrics as a Prometheus textfile (*.prom)")
    p.add_argument("--run-started", metavar="EPOCH", type=float,
                   help="when the fleet run started (Unix time), for the run's duration metric")


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused while the report is built: the results are millions of
    acyclic dicts and lists (reference counting frees them), yet each allocation burst made
    the collector walk all of them again, a quarter of fleet-report's CPU at 10,000 hosts."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    """Read and check every input first; write only when all of it is good."""
    jinja2()  # the page needs it: without it, say so before anything is read or written
    try:
        with _no_cycle_collection():
            return _run(args, ctx)
    except HwmgrError as exc:
        if args.prom:  # the metrics say the run failed; the report files stay as they were
            why = exc.message
            write_registry(args.prom, lambda: failure_registry(why, args.run_started))
        raise


def _previous(args: argparse.Namespace) -> Trend | None:
    path = args.previous or args.out / TREND_FILE
    if args.previous is None and not path.is_file():
        return None
    return load_trend(path)


def _run(args: argparse.Namespace, ctx: Context) -> Outcome:
    out = args.out.resolve()
    if any(r.resolve() == out for r in args.results):
        raise UsageError("--out must differ from --results (the report would be read as a host)")
    pattern = compile_pattern(args.group_by) if args.group_by else None
    hosts = read_results(args.results)
    history = load_history(args.history)
    previous = _previous(args)
    member = read_groups(args.groups) if args.groups else None
    report = build_report(hosts, source_date_epoch=ctx.config.source_date_epoch)
    groups = assign(list(report["hosts"]), groups=member, pattern=pattern)
    new = news(previous, report)
    trend = next_trend(previous, history, report)
    items = fleet_items(report, value_text)  # once, for the page and the metrics
    files = write_outputs(args.out, {
        "fleet-report.json": report_chunks(report),
        "fleet-report.xml": junit_chunks(report, groups),
        "fleet-report.html": html_chunks(report, trend["points"][:-1], groups=groups,
                                         news=new, shown=value_text, items=items),
        TREND_FILE: (json.dumps(trend, ensure_ascii=False, separators=(",", ":")) + "\n")
        .encode(),
    })
    if args.prom:
        files.append(write_registry(
            args.prom, lambda: fleet_registry(report, groups, args.run_started, items)))
    code = exit_code(report)
    s = report["summary"]
    status = {0: "ok", 5: "drift", 6: "partial", 7: "reboot-pending", 11: "unknown"}[code]
    since = {"since": new["since"], "hosts": len(new["hosts"]),
             "items": sum(len(v) for v in new["items"].values()), "fixed": new["fixed"]}

    def render(console: Console) -> None:
        console.print(
            f"{s['hosts']} hosts: {s['compliant']} compliant, {s['drift']} drift, "
            f"{s['unknown']} unknown, {s['reboot_pending']} reboot pending, "
            f"{s['unreachable']} unreachable, {s['failed']} failed", markup=False)
        if new["since"]:
            console.print(f"since {new['since']}: {since['hosts']} hosts newly drifting, "
                          f"{since['items']} items newly drifting, {since['fixed']} fixed",
                          markup=False)
        shown = 0
        for name, host in report["hosts"].items():
            if host["status"] in ("unreachable", "failed") and shown < 20:
                shown += 1
                console.print(f"  {printable(name)}: {host['status']}: "
                              f"{printable(host['error'])}", markup=False)
        if s["unreachable"] + s["failed"] > shown:
            console.print(f"  ... and {s['unreachable'] + s['failed'] - shown} more without a "
                          "result (fleet-report.html lists them)", markup=False)
        for f in files:
            console.print(f"wrote {printable(f)}", markup=False)

    return Outcome(command=NAME, status=status, exit_code=code, render=render,
                   data={"summary": s, "catalog_version": report["catalog_version"],
                         "generated": report["generated"], "new_since": since,
                         "files": [str(f) for f in files]})
