"""A rollout's health gate on this host: `baseline` before the change, `check` after it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hwmgr.catalog.load import load_catalog
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
    UsageError,
)
from hwmgr.output import Outcome, printable
from hwmgr.ui.context import Context
from hwmgr.ui.options import common_options, lifecycle_options
from hwmgr.ui.verbhelp import Example
from hwmgr.verify import gate
from hwmgr.verify.policy import Verifier, VerifyOptions

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "gate"
EXAMPLES = (
    Example("hwmgr gate baseline r42", "before the change: links, drift, boot id, log mark"),
    Example("hwmgr gate check r42 --peer 10.0.0.9 --floor 5000",
            "after it: verify, links, throughput, kernel log, check not worse"),
)
EXIT_CODES = {
    EXIT_OK: "baseline recorded (or kept), or every step of the gate passed",
    EXIT_FAILED: "a step of the gate failed (data.failed_steps names them)",
    EXIT_NOT_FOUND: "no baseline for that rollout, or no such --interface",
    EXIT_BAD_INPUT: "a damaged baseline or catalog (named)",
    EXIT_REFUSED: "the throughput check refused the interface (default route, SSH)",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return [common_options(root=False), lifecycle_options(mutating=False)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("baseline", "check"),
                   help="baseline: record the host before the change; check: gate it after")
    p.add_argument("rollout", help="the rollout's id (the record's `id`)")
    p.add_argument("--peer", metavar="HOST", help="iperf3 peer for the throughput step")
    p.add_argument("--floor", type=float, metavar="MBIT/S",
                   help="the throughput step's floor (default: the catalog's, if any)")
    p.add_argument("--duration", type=float, default=2.0, metavar="SECONDS",
                   help="throughput run length (2)")
    p.add_argument("--port", type=int, default=5201, help="the peer's iperf3 port (5201)")
    p.add_argument("--interface", metavar="IFACE", help="interface for the throughput step")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    gate.check_id(args.rollout)
    if not 2 <= args.duration <= 60:
        raise UsageError(f"--duration {args.duration:g}: expected 2 to 60 seconds")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: expected 1 to 65535")
    host, state_dir = ctx.host, ctx.config.state_dir
    cat = load_catalog(args.catalog, config=ctx.config)
    if args.action == "baseline":
        base = gate.baseline(host, cat, state_dir, args.rollout)

        def _base(c: Console) -> None:
            up = sum(1 for v in base["links"].values() if v.get("operstate") == "up")
            how = "kept" if base["kept"] else "recorded"
            c.print(printable(f"rollout {args.rollout}: baseline {how} ({up} link(s) up, "
                              f"{len(base['drifting'])} drifting item(s))"), markup=False)

        return Outcome(NAME, data=base, render=_base)
    base = gate.read_baseline(host, state_dir, args.rollout)
    opts = gate.GateOptions(args.peer, args.floor, args.duration, args.port, args.interface)

    def verify() -> dict[str, Any]:
        vopts = VerifyOptions(on_failure="report", readonly=True)
        return Verifier(host, ctx.config, vopts).run().as_dict()

    result = gate.evaluate(host, cat, base, opts, verify)

    def _render(c: Console) -> None:
        for s in result["steps"]:
            c.print(printable(f"{'pass' if s['passed'] else 'FAIL'}  {s['step']:<11} "
                              f"{s['detail']}"), markup=False)
        c.print("gate passed" if result["passed"] else
                "gate failed: " + ", ".join(result["failed_steps"]), markup=False)

    return Outcome(NAME, status="ok" if result["passed"] else "failed", data=result,
                   errors=[] if result["passed"] else [
                       f"gate failed: {s['step']}: {s['detail']}" for s in result["steps"]
                       if not s["passed"]],
                   exit_code=EXIT_OK if result["passed"] else EXIT_FAILED, render=_render)
