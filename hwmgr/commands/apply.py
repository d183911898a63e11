"""Apply the catalog's settings and sysctls that drifted: plan, confirm, one transaction."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from hwmgr import safejson
from hwmgr.compliance import apply as ap
from hwmgr.compliance.check import parse_layers
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_NOT_FOUND,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_PERMISSION,
    EXIT_REFUSED,
    NotFoundError,
    NothingToDo,
    UsageError,
)
from hwmgr.host.seam import Host
from hwmgr.output import Outcome, make_console, printable
from hwmgr.transaction.pending import open_transactions
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "apply"
EXAMPLES = (
    Example("hwmgr apply --dry-run", "show every change, change nothing"),
    Example("hwmgr apply --interface eth2 --layer settings --yes"),
    Example("hwmgr apply --changes drift.json --persist-root /mnt/image --yes"),
    Example("hwmgr apply --force --confirm-timeout 60 --yes",
            "also the uplink: reverted unless confirmed"),
    Example("hwmgr apply --confirm 17", "keep transaction 17 (from a new session)"),
    Example("hwmgr apply --root web01 --dry-run", "a compliant host", EXIT_NOTHING_TO_DO),
)
EXIT_CODES = {
    EXIT_OK: "applied (or planned, with --dry-run)",
    EXIT_FAILED: "failed (undone)",
    EXIT_NOT_FOUND: "no such --root snapshot, --catalog file or --interface",
    EXIT_NOTHING_TO_DO: "nothing to do",
    EXIT_BAD_INPUT: "bad input (a --changes file, snapshot or catalog)",
    EXIT_REFUSED: "refused (uplink/SSH interface, .link shadowing, another owner)",
    EXIT_LOCKED: "another hwmgr holds the lock",
    EXIT_PERMISSION: "not root",
}
NEEDS_ROOT = "sets NIC settings and sysctls and writes their persistence files"


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=True, root=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--interface", action="append", default=[], metavar="IFACE",
                   help="only this interface (repeatable)")
    p.add_argument("--layer", default="settings,sysctl", metavar="LAYERS",
                   help="settings, sysctl or both, as check spells them (default settings,sysctl)")
    p.add_argument("--changes", metavar="FILE",
                   help="changes to make (JSON list of {interface,item,current,wanted} or a "
                   "`hwmgr check --json` result) instead of the host's own drift")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--persist-root", default="/", metavar="DIR",
                   help="write persistence files under DIR (image builds, tests; default /)")
    p.add_argument("--force", action="store_true",
                   help="also touch interfaces carrying the default route or SSH session "
                   "(applied last, reverted unless confirmed)")
    p.add_argument("--confirm-timeout", type=int, metavar="N",
                   help="with --force: revert unless `hwmgr apply --confirm TXN` within N s "
                   "(default 120)")
    p.add_argument("--override", action="store_true",
                   help="write values although another sysctl.d/tuned/.link/NM owner differs")
    p.add_argument("--confirm", type=int, metavar="TXN",
                   help="keep a forced apply: cancel its pending timed revert")
    p.add_argument("--auto-revert", type=int, metavar="TXN", help=argparse.SUPPRESS)
    p.add_argument("--after", type=float, default=0, help=argparse.SUPPRESS)


MAX_CHANGES_BYTES = 4 << 20  # a check result of a few thousand findings is well under 1 MiB


def _changes(args: argparse.Namespace, ctx: Context, layers: list[str]) -> list[ap.Change]:
    if args.changes:
        where = safejson.printable_path(args.changes)
        doc = safejson.load_file(args.changes, where, max_bytes=MAX_CHANGES_BYTES)
        return ap.changes_from_findings(
            [_as_finding(c) for c in ap.load_changes(doc, where)],
            layers=layers, interfaces=args.interface)
    return ap.drift_changes(ctx.host, args, layers, ctx.config)


def _layers(text: str) -> list[str]:
    """check's --layer vocabulary (setting or settings, sysctl); drivers and firmware are
    upgrade's business, so those words are refused here with the verb that does them."""
    words = parse_layers(text)
    if words - {"setting", "sysctl"}:
        raise UsageError(f"--layer {printable(text)}: apply sets settings and sysctls; "
                         "drivers and firmware change with hwmgr upgrade")
    return [layer for layer in ap.LAYERS if layer.rstrip("s") in words]


def _known_interfaces(host: Host, names: list[str]) -> None:
    """An --interface the host does not have is a mistake to name, not "no drift"."""
    have = set(host.listdir("/sys/class/net"))
    missing = [n for n in names if n not in have]
    if missing:
        raise NotFoundError(f"--interface {printable(', '.join(missing))}: no such interface "
                            f"(this host has {printable(', '.join(sorted(have)) or 'none')})")


def _as_finding(c: ap.Change) -> dict[str, Any]:
    layer = "sysctl" if c.item.startswith("sysctl.") else "setting"
    return {"layer": layer, "interface": c.interface, "item": c.item, "actual": c.current,
            "expected": c.wanted, "status": "drift", "evidence": c.evidence}


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    host, config = ctx.host, ctx.config
    if args.auto_revert is not None:
        res = ap.auto_revert(host, config, args.auto_revert, args.after)
        return Outcome(NAME, data=res.as_dict() if res else None,
                       exit_code=0 if res is None or res.ok else EXIT_FAILED)
    if args.confirm is not None:
        ui.require_root(host, NEEDS_ROOT)
        kept = ap.confirm(host, config, args.confirm)
        if not kept:
            raise NothingToDo(f"transaction {args.confirm} has no pending timed revert")
        return Outcome(NAME, data={"confirmed": args.confirm}, render=lambda c: c.print(
            f"transaction #{args.confirm} confirmed: the timed revert is cancelled",
            markup=False))
    layers = _layers(args.layer)
    if not args.dry_run:  # say it before reading the catalog and the host, not after
        ui.require_root(host, NEEDS_ROOT)
    if args.confirm_timeout is not None and args.confirm_timeout < 1:
        raise UsageError("--confirm-timeout must be at least 1 second")
    _known_interfaces(host, args.interface)
    changes = _changes(args, ctx, layers)
    if not changes:
        raise NothingToDo("nothing to apply: no drift in " + ", ".join(layers))
    plan = ap.plan_apply(host, changes, persist_root=args.persist_root, force=args.force,
                         override=args.override, confirm_timeout=args.confirm_timeout)
    data = plan.as_dict()
    opened = open_transactions(host, config.state_dir) if host.live else []
    plan.notes += opened
    data["notes"] = plan.notes
    if not plan.changes:
        raise NothingToDo("nothing apply can set: " + "; ".join(plan.notes))
    if plan.refusals:
        return Outcome(NAME, status="refused", data=data,
                       errors=[r["reason"] for r in plan.refusals], exit_code=plan.exit_code,
                       render=lambda c: render_plan(c, data), render_shows_errors=True)
    if args.dry_run:
        return Outcome(NAME, data=data, render=lambda c: render_plan(c, data))
    if not host.live:
        raise UsageError("--root names a snapshot or another tree: apply can only plan it "
                         "(add --dry-run)")
    ui.require_root(host, NEEDS_ROOT)
    if not args.json:
        render_plan(make_console(sys.stderr, stderr=True), data)
    ui.confirm(args, f"apply {len(plan.changes)} change(s)")
    res = ap.run_apply(host, plan, config, command="hwmgr apply", wait=args.wait)
    data["transaction"] = res.as_dict()
    pending = res.ok and "confirm" in plan.params([])
    stopped = ui.interrupted_line(res, "apply")
    if stopped is not None:
        return Outcome(NAME, status="failed", data=data, errors=[stopped],
                       exit_code=EXIT_INTERRUPTED)

    def render(c: Console) -> None:
        c.print(f"transaction #{res.id} apply: {res.state}"
                + (f" ({printable(res.error)})" if res.error else ""), markup=False)
        if pending:
            c.print(f"confirm within {plan.confirm_timeout} s from a new session: "
                    f"hwmgr apply --confirm {res.id}  (otherwise it is reverted)", markup=False)

    return Outcome(NAME, status="ok" if res.ok else "failed", data=data,
                   errors=[] if res.ok else [res.error or "apply failed"],
                   exit_code=0 if res.ok else EXIT_FAILED, render=render)


def render_plan(c: Console, d: dict[str, Any]) -> None:
    """Every change: item, current → wanted, command, persistence; then notes and refusals."""
    p = printable
    c.print(f"apply plan: {len(d['changes'])} change(s)", markup=False)
    for ch in d["changes"]:
        where = ch["interface"] or "host"
        c.print(p(f"  {where} {ch['item']}: {ch['current']} → {ch['wanted']}"
                  + ("  [uplink/SSH: applied last, timed revert]" if ch["risky"] else "")),
                markup=False)
        c.print(p(f"      run:     {ch['command']}"), markup=False)
        pe = ch.get("persist") or {}
        if pe.get("key"):
            target = pe.get("file") or f"NetworkManager connection {pe.get('connection')}"
            c.print(p(f"      persist: {pe['backend']} {target} ({pe['key']})"), markup=False)
            if pe.get("why") and pe["backend"] == "udev-rule":
                c.print(p(f"               because {pe['why']}"), markup=False)
        else:
            c.print(p(f"      persist: NOT persisted ({pe.get('not_persisted', '?')})"),
                    markup=False)
    for f in d["files"]:
        c.print(p(f"  writes {f['path']} ({f['bytes']} bytes; backed up first)"), markup=False)
    for n in d["notes"]:
        c.print(p(f"  note: {n}"), markup=False)
    for r in d["refusals"]:
        c.print(p(f"  refused (exit {r['code']}): {r['reason']}"), markup=False)
