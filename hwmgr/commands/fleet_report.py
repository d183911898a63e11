"""Build the fleet report (JSON, JUnit XML, HTML) from per-host `hwmgr check` results."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_DRIFT,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_REBOOT_PENDING,
    EXIT_UNKNOWN,
    UsageError,
)
from hwmgr.fleet.report import build_report, exit_code, load_history, read_results_dir
from hwmgr.fleet.write import write_outputs
from hwmgr.output import Outcome, printable
from hwmgr.ui.verbhelp import Example

NAME = "fleet-report"
HELP = "build fleet-report.json/.xml/.html from per-host check results"
NOTES = """\
input: one JSON file per host in --results DIR, named after the host (web01.json), holding
  {"status": "compliant|drift|unknown|reboot-pending|unreachable|failed",
   "check": <hwmgr check --json output or its data, or null>, "error": "why" | null}
  or just the raw output of `hwmgr check --json`.

output (in --out DIR, each file replaced atomically):
  fleet-report.json   the normative report (hwmgr/schemas/fleet-report.schema.json)
  fleet-report.xml    JUnit: a testcase per host and item (drift = failure)
  fleet-report.html   one self-contained page: hosts x layers, drift first, trend

SOURCE_DATE_EPOCH, when set, fixes the report's 'generated' time."""
EXAMPLES = (
    Example("hwmgr fleet-report --results results/ --out report/", "some host drifts",
            EXIT_DRIFT),
    Example("hwmgr fleet-report --results results/ --out report/ "
            "--history old/*/fleet-report.json", "with a trend", EXIT_DRIFT),
)
EXIT_CODES = {
    EXIT_OK: "every host compliant",
    EXIT_DRIFT: "some host drifts",
    EXIT_PARTIAL: "some host unreachable or failed (and none drifts)",
    EXIT_REBOOT_PENDING: "reboot pending",
    EXIT_BAD_INPUT: "a bad input file or no --results directory (named; nothing written)",
    EXIT_UNKNOWN: "unknown",
}


def option_parents() -> list[argparse.ArgumentParser]:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", help="print one JSON object (format 1)")
    p.add_argument("--debug", action="store_true", help="show tracebacks on internal errors")
    return [p]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """--results DIR, --out DIR and earlier reports for the trend."""
    p.add_argument("--results", required=True, metavar="DIR", type=Path,
                   help="directory with one JSON result file per host")
    p.add_argument("--out", required=True, metavar="DIR", type=Path,
                   help="directory to write the three report files into")
    p.add_argument("--history", action="extend", nargs="+", default=[], metavar="FILE",
                   type=Path, help="earlier fleet-report.json files, for the trend")


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    """Read and check every input first; write only when all of it is good."""
    if args.out.resolve() == args.results.resolve():
        raise UsageError("--out must differ from --results (the report would be read as a host)")
    hosts = read_results_dir(args.results)
    history = load_history(args.history)
    report = build_report(hosts, source_date_epoch=ctx.config.source_date_epoch)
    files = write_outputs(report, args.out, history)
    code = exit_code(report)
    s = report["summary"]
    status = {0: "ok", 5: "drift", 6: "partial", 7: "reboot-pending", 11: "unknown"}[code]

    def render(console: Any) -> None:
        console.print(
            f"{s['hosts']} hosts: {s['compliant']} compliant, {s['drift']} drift, "
            f"{s['unknown']} unknown, {s['reboot_pending']} reboot pending, "
            f"{s['unreachable']} unreachable, {s['failed']} failed", markup=False)
        for name, host in report["hosts"].items():
            if host["status"] in ("unreachable", "failed"):
                console.print(f"  {printable(name)}: {host['status']}: "
                              f"{printable(host['error'])}", markup=False)
        for f in files:
            console.print(f"wrote {printable(f)}", markup=False)

    return Outcome(command=NAME, status=status, exit_code=code, render=render,
                   data={"summary": s, "catalog_version": report["catalog_version"],
                         "generated": report["generated"], "files": [str(f) for f in files]})
