"""Quick iperf3 throughput check against a peer, judged against the catalog or a site floor."""

from __future__ import annotations

import argparse
from typing import Any

from hwmgr.config import load_config
from hwmgr.errors import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNKNOWN,
    UsageError,
)
from hwmgr.output import Outcome
from hwmgr.ui.options import common_options, lifecycle_options
from hwmgr.ui.throughput import floor_catalog, hard_timeout, options_from
from hwmgr.ui.verbhelp import Example
from hwmgr.verify import throughput as tp

NAME = "throughput"
HELP = "quick iperf3 check against a peer"
NOTES = """\
floor: --floor, else throughput_floor_mbps in the site config, else the catalog's
       throughput.min_fraction_of_link x the interface's negotiated speed.
refuses the interface carrying the default route or the SSH session unless --force.
On the peer, 'hwmgr throughput --serve' runs a one-off iperf3 server (exits after a test)."""
EXAMPLES = (
    Example("hwmgr throughput --serve", "on the peer: a one-off iperf3 server"),
    Example("hwmgr throughput --peer 10.0.0.2 --bind-dev eth2",
            "3 s check over eth2, this host sending"),
    Example("hwmgr throughput --peer bench1 --both --floor 9000",
            "both directions against 9 Gbit/s"),
    Example("hwmgr throughput --peer 10.0.0.2 --json"),
)
EXIT_CODES = {
    EXIT_OK: "at or above the floor (or measured, no floor)",
    EXIT_FAILED: "below the floor",
    EXIT_NOT_FOUND: "no such interface",
    EXIT_REFUSED: "refused (the uplink/SSH interface)",
    EXIT_UNKNOWN: "unknown (no trustworthy measurement)",
}

STATUS_EXIT = {"ok": EXIT_OK, "measured": EXIT_OK, "failed": EXIT_FAILED,
               "unknown": EXIT_UNKNOWN, "served": EXIT_OK}


def option_parents() -> list[argparse.ArgumentParser]:
    return [common_options(), lifecycle_options(mutating=False)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--peer", metavar="HOST", help="iperf3 server (default: throughput_peer "
                   "from the site config)")
    p.add_argument("--serve", action="store_true",
                   help="run a one-off iperf3 server here instead (iperf3 -s -1)")
    p.add_argument("--bind-dev", metavar="IFACE",
                   help="send over this interface (default: bind_dev, else the route)")
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


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    host = ctx.host
    cfg = load_config(host)
    if args.serve:
        port = args.port if args.port is not None else cfg.throughput_port
        out = tp.serve(host, port, hard_timeout(args.timeout) or 300.0)
        return Outcome(NAME, status=out["status"], data={"serve": out},
                       errors=[out["reason"]] if out["status"] != "served" else [],
                       exit_code=STATUS_EXIT[out["status"]],
                       render=lambda c: _render_serve(c, out))
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


def _render(console: Any, d: dict[str, Any]) -> None:
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


def _render_serve(console: Any, out: dict[str, Any]) -> None:
    if out["status"] == "served":
        console.print(f"served one test on port {out['port']}: {out['mbps']:.0f} Mbit/s "
                      "received", markup=False)
    else:
        console.print(f"iperf3 server on port {out['port']}: {out['reason']}", markup=False)
