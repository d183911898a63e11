"""Quick iperf3 throughput check against a peer, judged against the catalog or a site floor."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from hwmgr.config import SiteConfig
from hwmgr.errors import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNKNOWN,
    UsageError,
)
from hwmgr.host.seam import Host
from hwmgr.output import Outcome, printable
from hwmgr.ui.context import Context
from hwmgr.ui.options import common_options, lifecycle_options
from hwmgr.ui.throughput import floor_catalog, hard_timeout, options_from
from hwmgr.ui.verbhelp import Example
from hwmgr.verify import throughput as tp

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "throughput"
NOTES = """\
floor: --floor, else throughput_floor_mbps in the site config, else the catalog's
       throughput.min_fraction_of_link x the interface's negotiated speed.
refuses the interface carrying the default route or the SSH session unless --force.
On the peer, 'hwmgr throughput --serve' serves tests until stopped (Ctrl-C), or --count N
tests; a client's --both (two tests) needs --count 2 or more."""
EXAMPLES = (
    Example("hwmgr throughput --serve", "on the peer: serve tests until Ctrl-C"),
    Example("hwmgr throughput --serve --count 2", "on the peer: serve one client's --both"),
    Example("hwmgr throughput --peer 10.0.0.2 --interface eth2",
            "3 s check over eth2, this host sending"),
    Example("hwmgr throughput --peer bench1 --both --floor 9000",
            "both directions against 9 Gbit/s"),
    Example("hwmgr throughput --peer 10.0.0.2 --json"),
)
EXIT_CODES = {
    EXIT_OK: "at or above the floor (or measured, no floor); --serve: stopped after serving",
    EXIT_FAILED: "below the floor",
    EXIT_NOT_FOUND: "no such interface",
    EXIT_REFUSED: "refused (the uplink/SSH interface)",
    EXIT_UNKNOWN: "unknown (no trustworthy measurement; --serve: iperf3 could not serve)",
}

STATUS_EXIT = {"ok": EXIT_OK, "measured": EXIT_OK, "failed": EXIT_FAILED,
               "unknown": EXIT_UNKNOWN, "served": EXIT_OK}


def option_parents() -> list[argparse.ArgumentParser]:
    return [common_options(), lifecycle_options(mutating=False)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--peer", metavar="HOST", help="iperf3 server (default: throughput_peer "
                   "from the site config)")
    p.add_argument("--serve", action="store_true",
                   help="serve tests here instead, until Ctrl-C or --count N")
    p.add_argument("--count", type=int, metavar="N",
                   help="with --serve: stop after N tests (a client's --both is 2)")
    p.add_argument("--interface", dest="bind_dev", metavar="IFACE",
                   help="send over this interface (default: bind_dev, else the route)")
    p.add_argument("--bind-dev", dest="bind_dev", help=argparse.SUPPRESS)  # the old name
    p.add_argument("--duration", type=float, metavar="SECONDS",
                   help="seconds per direction including 1 s of skipped slow start "
                   "(default 3)")
    way = p.add_mutually_exclusive_group()
    way.add_argument("--reverse", action="store_true", help="the peer sends (iperf3 -R)")
    way.add_argument("--both", action="store_true", help="send, then receive")
    p.add_argument("--floor", type=float, metavar="MBIT/S", help="absolute floor in Mbit/s")
    p.add_argument("--streams", type=int, metavar="N",
                   help="parallel streams (default: sized to the link speed)")
    p.add_argument("--port", type=int, metavar="PORT", help="iperf3 port (default 5201)")
    p.add_argument("--connect-timeout", type=int, metavar="MS",
                   help="give up connecting after this many ms (default 3000)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="hard limit per iperf3 run (default: duration + connect + 4 s; "
                   "with --serve: 300)")
    p.add_argument("--force", action="store_true",
                   help="allow the interface carrying the default route or SSH session")
    p.add_argument("--no-record", action="store_true",
                   help="do not keep the result in the state dir (used as 'before' by verify)")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    host = ctx.host
    cfg = ctx.site
    if args.serve:
        return _serve(args, host, cfg)
    if args.count is not None:
        raise UsageError("--count counts the tests --serve serves: add --serve")
    peer = args.peer or cfg.throughput_peer
    if not peer:
        raise UsageError("no peer: pass --peer HOST or set throughput_peer in the site config")
    opts = options_from(args, cfg, peer)
    catalog = None
    if opts.floor_mbps is None:
        catalog = floor_catalog(args, ctx.config)
    report = tp.check(host, opts, catalog=catalog)
    data = report.as_dict()
    if not args.no_record and report.status != "unknown":

        data["recorded"] = tp.record(host, ctx.config.state_dir, report)
    errors = [r.reason for r in report.runs if r.status in ("failed", "unknown")]
    return Outcome(NAME, status=report.status, data=data, errors=errors,
                   exit_code=STATUS_EXIT[report.status], render=lambda c: _render(c, data))


def _render(console: Console, d: dict[str, Any]) -> None:
    speed = f"{d['link_speed_mbps']} Mbit/s link" if d["link_speed_mbps"] else "link speed ?"
    console.print(f"throughput to {d['peer']} ({d['address'] or '?'}) over "
                  f"{d['interface'] or '?'}, {speed}, {d['streams']} stream(s)", markup=False)
    if d["floor_mbps"] is not None:
        console.print(f"  floor {d['floor_mbps']:g} Mbit/s ({d['floor_source']})", markup=False)
    for r in d["runs"]:
        colour = {"ok": "green", "failed": "red", "unknown": "yellow"}.get(r["status"], "")
        rate = f"{r['gbps']:.3f} Gbit/s" if r["gbps"] is not None else "-"
        extra = []
        if r["retransmits"] is not None:
            extra.append(f"{r['retransmits']} retransmits")
        if r["cpu_local_pct"] is not None:
            extra.append(f"cpu here {r['cpu_local_pct']:.0f}%")
        if r["cpu_remote_pct"] is not None:
            extra.append(f"peer {r['cpu_remote_pct']:.0f}%")
        status = f"[{colour}]{r['status']}[/]" if colour else r["status"]
        console.print(f"  {r['direction']:<8} {rate:>16}  {status}  {', '.join(extra)}",
                      highlight=False)
        if r["reason"] and r["status"] != "ok":
            console.print(f"    {r['reason']}", markup=False)
    for n in d["notes"]:
        console.print(f"  note: {n}", markup=False)


# options that only mean something to the client: with --serve they are refused, not ignored
CLIENT_ONLY = ("peer", "bind_dev", "duration", "reverse", "both", "floor", "streams",
               "connect_timeout", "force")


def _serve(args: argparse.Namespace, host: Host, cfg: SiteConfig) -> Outcome:
    """Serve until --count tests or Ctrl-C; one line per test on stderr as it ends."""
    given = [f"--{k.replace('_', '-')}" for k in CLIENT_ONLY if getattr(args, k) not in
             (None, False)]
    if given:
        raise UsageError(f"{', '.join(given)}: client options, not --serve's (the client "
                         "chooses the direction and length of each test)")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count {args.count}: expected 1 or more tests")
    idle = hard_timeout(args.timeout) or 300.0  # checked before anything is printed
    port = args.port if args.port is not None else cfg.throughput_port
    tests: list[tp.Served] = []

    def each(out: tp.Served) -> None:
        tests.append(out)
        if not args.json:
            print(printable(_served_line(out)), file=sys.stderr, flush=True)

    if not args.json:
        until = f"{args.count} test(s)" if args.count else "Ctrl-C"
        print(f"serving iperf3 tests on port {port} until {until}", file=sys.stderr,
              flush=True)
    try:
        result = tp.serve_many(host, port, count=args.count, idle=idle, each=each)
    except KeyboardInterrupt:  # the way to stop an open-ended server: what was served stands
        result = tests
    done = [t for t in result if t["status"] == "served"]
    # serve_many ends with a failure it did not report when iperf3 could not serve at all
    failed = result[-1] if result and not any(result[-1] is t for t in tests) else None
    data = {"serve": done[-1] if done else (failed or {"port": port, "status": "unknown"}),
            "tests": result}
    if failed is not None:
        return Outcome(NAME, status="unknown", data=data, errors=[failed["reason"]],
                       exit_code=EXIT_UNKNOWN)
    return Outcome(NAME, status="served", data=data, exit_code=EXIT_OK,
                   render=lambda c: c.print(f"served {len(done)} test(s) on port {port}",
                                            markup=False))


def _served_line(out: tp.Served) -> str:
    if out["status"] == "served":
        return f"served a test on port {out['port']}: {out['mbps']:.0f} Mbit/s received"
    return f"a test on port {out['port']} ended without a result: {out['reason']}"
