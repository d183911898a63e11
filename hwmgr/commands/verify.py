"""After a reboot: prove the armed driver state (versions, binding, links) is really live."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_REBOOT_PENDING,
    EXIT_UNKNOWN,
    NotFoundError,
    UsageError,
)
from hwmgr.host import capture
from hwmgr.host.seam import Host
from hwmgr.lifecycle.expect import Expectation, parse_expectation
from hwmgr.output import Outcome, new_table, printable
from hwmgr.ui.context import Context
from hwmgr.ui.options import common_options, lifecycle_options
from hwmgr.ui.throughput import floor_catalog, options_from
from hwmgr.ui.verbhelp import Example
from hwmgr.verify.policy import Verifier, VerifyOptions

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "verify"
NOTES = """\
--on-failure rollback (default: on_failure in the site config) restores the previous driver
and runs reboot_command; at most once per armed expectation. A passing verify marks the
expectation verified, so the boot service does not act on it again.
Before the reboot (the upgrade or rollback committed during this boot, known from the
journal and /proc/sys/kernel/random/boot_id) verify reports reboot pending and changes nothing.
--boot also runs the throughput check when the site config names a peer."""
EXAMPLES = (
    Example("hwmgr verify", "check every armed expectation"),
    Example("hwmgr verify be2net --json"),
    Example("hwmgr verify --throughput --peer 10.0.0.2", "also run the quick iperf3 check"),
    Example("hwmgr verify --boot --on-failure rollback", "what hwmgr-verify.service runs"),
    Example("hwmgr verify --root snap.tar.gz", "offline, read-only: nothing armed there",
            EXIT_NOTHING_TO_DO),
    Example("hwmgr verify --root snap.tar.gz --expectation be2net.json", "offline, read-only"),
)
EXIT_CODES = {
    EXIT_OK: "verified",
    EXIT_FAILED: "failed (and maybe rolled back)",
    EXIT_NOT_FOUND: "no such --expectation file or --root snapshot, or one that carries no "
                    "state dir (older hwmgr, the collector)",
    EXIT_NOTHING_TO_DO: "nothing armed",
    EXIT_REBOOT_PENDING: "reboot pending",
    EXIT_BAD_INPUT: "bad expectation/config file or snapshot",
    EXIT_UNKNOWN: "unknown (could not read a value)",
}

STATUS_EXIT = {"verified": EXIT_OK, "failed": EXIT_FAILED, "unknown": EXIT_UNKNOWN,
               "nothing-armed": EXIT_NOTHING_TO_DO, "reboot-pending": EXIT_REBOOT_PENDING}
COLOUR = {"ok": "green", "fail": "red", "unknown": "yellow", "warn": "yellow", "info": "dim"}


def option_parents() -> list[argparse.ArgumentParser]:
    return [common_options(root=True), lifecycle_options(mutating=True)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("driver", nargs="?", help="only this driver's expectation")
    p.add_argument("--on-failure", choices=("rollback", "report"),
                   help="what to do when verification fails (default: site config, else "
                   "report)")
    p.add_argument("--boot", action="store_true",
                   help="boot-service mode: count boot attempts, wait for links, skip "
                   "expectations already verified")
    p.add_argument("--expectation", metavar="FILE",
                   help="verify this expectation file instead of the armed ones (read-only)")
    p.add_argument("--throughput", action="store_true",
                   help="also run the quick iperf3 check over the driver's interface")
    p.add_argument("--peer", metavar="HOST", help="iperf3 peer (default: throughput_peer)")
    p.add_argument("--interface", dest="bind_dev", metavar="IFACE",
                   help="interface for the throughput check")
    p.add_argument("--bind-dev", dest="bind_dev", help=argparse.SUPPRESS)  # the old name
    p.add_argument("--floor", type=float, metavar="MBIT/S", help="absolute throughput floor")
    p.add_argument("--duration", type=float, metavar="SECONDS", help="per direction (3)")
    p.add_argument("--both", action="store_true", help="throughput in both directions")
    p.add_argument("--force", action="store_true",
                   help="allow throughput over the default-route/SSH interface")


def _explicit(local: Host, path: str) -> list[tuple[str, Expectation]]:
    """An expectation file named on the command line, read from this machine (`local`)."""
    real = os.path.abspath(path)
    raw = local.read_bytes(real, limit=1 << 20)
    if raw is None:
        raise NotFoundError(f"{path}: no such expectation file")
    return [(real, parse_expectation(raw, path))]


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    host = ctx.host
    cfg = ctx.site
    on_failure = args.on_failure or cfg.on_failure
    snapshot = not host.live
    if snapshot and args.on_failure == "rollback":
        raise UsageError("--on-failure rollback needs the live host, not a --root snapshot")
    if snapshot and args.throughput:
        raise UsageError("--throughput needs the live host, not a --root snapshot")
    if snapshot and not args.expectation and capture.lacks(host, capture.STATE):
        raise NotFoundError(capture.no_state(host, NAME))  # not "nothing armed"
    settings = ctx.config
    notes = []
    readonly = snapshot or bool(args.expectation)
    if not readonly and not os.access(host.path(settings.state_dir), os.W_OK):
        if on_failure == "rollback" and args.on_failure == "rollback":
            raise UsageError(f"--on-failure rollback: state dir {settings.state_dir} is not "
                             "writable (run as root)")
        readonly = True
        notes.append(f"state dir {settings.state_dir} is not writable: checking only")
    tp_opts = None
    # at boot, a site that configured a throughput peer wants the check: the stock unit
    # (`hwmgr verify --boot`) then proves speed as well as versions, with no drop-in
    if args.throughput or (args.boot and cfg.throughput_peer and not readonly):
        tp_opts = options_from(args, cfg, args.peer or cfg.throughput_peer)
    opts = VerifyOptions(
        driver=args.driver, on_failure="report" if readonly else on_failure, boot=args.boot,
        readonly=readonly, link_wait=cfg.link_wait_seconds,
        max_boot_attempts=cfg.max_boot_attempts, reboot_command=cfg.reboot_command,
        throughput=tp_opts, catalog=lambda: floor_catalog(args, ctx.config))
    armed = _explicit(ctx.local, args.expectation) if args.expectation else None
    report = Verifier(host, settings, opts).run(armed)
    report.notes[:0] = notes
    data = report.as_dict()
    data["on_failure"] = opts.on_failure
    errors = []
    for r in report.results:
        errors += [f"{r.driver}: {c.line()}" for c in r.findings if c.result in
                   ("fail", "unknown")]
        if r.action in ("rollback-refused", "rollback-failed"):
            errors.append(f"{r.driver}: {r.action_detail}")
    if report.reboot and not report.reboot["ok"]:
        errors.append(f"reboot request failed: {report.reboot['error']}")
    return Outcome(NAME, status=report.status, data=data, errors=errors,
                   exit_code=STATUS_EXIT[report.status], render=lambda c: _render(c, data))


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return ", ".join(str(x) for x in v) or "-"
    text = str(v)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12] + "…"  # a sha256: the prefix is enough on screen (JSON has it all)
    return text


def _render(console: Console, d: dict[str, Any]) -> None:
    """Values come from the host (and maybe a snapshot): escaped, never rich markup."""
    from rich.markup import escape  # rich: only drawing needs it
    from rich.text import Text

    p = printable
    if not d["expectations"]:
        for n in d["notes"]:
            console.print(p(n), markup=False)
        return
    for e in d["expectations"]:
        colour = {"verified": "green", "failed": "red"}.get(e["status"], "yellow")
        kind = f"{e['kind']} #{e['txn']}" if e["txn"] is not None else str(e["kind"])
        console.print(f"[bold]{escape(p(e['driver']))} {escape(p(e['expected_version']))}[/] "
                      f"({escape(p(kind))}): [{colour}]{escape(p(e['status'].upper()))}[/]",
                      highlight=False)
        t = new_table(console, show_edge=False, pad_edge=False)
        for col in ("", "device", "field", "expected", "actual", "source / note"):
            t.add_column(col, overflow="fold")
        for c in e["checks"]:
            mark = Text(p(c["result"]), style=COLOUR.get(c["result"], ""))
            note = "; ".join(str(x) for x in (c["source"], c["message"]) if x)
            t.add_row(mark, *(Text(p(v)) for v in (c["device"], c["field"], _cell(c["expected"]),
                                                   _cell(c["actual"]), note)))
        if e["checks"]:
            console.print(t)
        if e["status"] == "reboot-pending":
            console.print(p(f"  {e['action_detail']}"), markup=False)
        elif e["action"] not in ("none",):
            console.print(p(f"  action: {e['action']}" + (f" — {e['action_detail']}"
                            if e["action_detail"] else "")), markup=False)
        tp = e.get("throughput") or {}
        if tp.get("before") or tp.get("after"):
            b, a = tp.get("before") or {}, tp.get("after") or {}
            for way in ("send", "receive"):
                if a.get(f"{way}_mbps") is not None:
                    console.print(p(f"  throughput {way}: before {_cell(b.get(f'{way}_mbps'))}"
                                    f" → after {_cell(a.get(f'{way}_mbps'))} Mbit/s"),
                                  markup=False)
    if d.get("reboot"):
        r = d["reboot"]
        console.print(p(f"reboot requested: {' '.join(r['argv'])} → "
                        f"{'ok' if r['ok'] else r['error']}"), markup=False)
    for n in d["notes"]:
        console.print(p(f"note: {n}"), markup=False)
