"""Upgrades, rollbacks and recoveries on this host, newest first, with their results."""

from __future__ import annotations

import argparse
import sqlite3
from typing import TYPE_CHECKING, Dict, Iterable, List, Mapping, TypedDict

from hwmgr.compliance.history import drift_episodes, open_history
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_NOT_FOUND,
    EXIT_OK,
    BadInputError,
    NotFoundError,
)
from hwmgr.host import capture
from hwmgr.output import Outcome, new_table, printable
from hwmgr.transaction.pending import reboot_pending
from hwmgr.transaction.state import StateDir
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console
    from rich.text import Text

NAME = "history"
EXAMPLES = (
    Example("hwmgr history"),
    Example("hwmgr history be2net --json"),
    Example("hwmgr history --root snap.tar.gz", "a snapshot's journal"),
    Example("hwmgr history --checks", "when each item drifted, and which transaction did it"),
    Example("hwmgr history --checks enp1s0f0 --json"),
)
EXIT_CODES = {
    EXIT_OK: "shown (also when there is no history)",
    EXIT_NOT_FOUND: "no such --root snapshot, or it carries no state dir (older hwmgr, the "
                    "collector)",
    EXIT_BAD_INPUT: "a bad snapshot or journal (named)",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=False, root=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("driver", nargs="?",
                   help="only this driver (with --checks: this interface or device)")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--steps", action="store_true", help="show every step")
    p.add_argument("--checks", action="store_true",
                   help="drift per item from the recorded checks: when it started and "
                   "stopped, and the transactions committed in between")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    if not ctx.host.live and capture.lacks(ctx.host, capture.STATE):
        raise NotFoundError(capture.no_state(ctx.host, NAME))  # not "no transactions"
    state = StateDir(ctx.host, ctx.config.state_dir)
    if args.checks:
        return _checks(args, ctx, state)
    try:
        journal = state.query_journal()  # read-only: history creates and changes nothing
        txns = [] if journal is None else journal.transactions(limit=args.limit,
                                                               target=args.driver)
    except sqlite3.DatabaseError as exc:  # it opened, but its tables are missing or damaged
        where = printable(f"{state.path}/journal.sqlite")  # the host's path, not a temp copy
        raise BadInputError(f"{where}: not a usable hwmgr journal ({exc})") from None
    finally:
        state.close()
    waiting = {e["txn"]: e["status"] for e in reboot_pending(ctx.host, ctx.config.state_dir)}
    rows = [_row(t, waiting) for t in txns]

    def render(c: Console) -> None:
        if not rows:
            c.print("no transactions recorded", markup=False)
            return
        t = new_table(c, show_edge=False)
        for col in ("#", "when", "action", "driver", "version", "state", "results"):
            t.add_column(col)
        for r in rows:
            res = results_text(r["results"])
            st = f"{r['state']}" + (", reboot pending" if r["reboot_pending"] == "pending" else
                               ", reboot pending: unknown" if r["reboot_pending"] else "")
            t.add_row(*(_cell(v) for v in (r["id"], r["started"], r["kind"], r["driver"],
                                           r["version"], st, res)))
            for it in r["items"]:
                t.add_row("", "", "", _cell(f"  {it.get('interface') or 'host'} "
                                            f"{it.get('item')} → {it.get('to')}"), "", "", "")
            if args.steps:
                for s in r["steps"]:
                    origin = s["data"].get("origin")  # where a fetch step got the package
                    log = s["data"].get("make_log")  # a failed build's log, kept after undo
                    t.add_row("", "", f"  {_cell(s['name'])}", "", "", _cell(s["state"]),
                              _cell(f"from {origin}") if origin else
                              _cell(f"log {log}") if log else "")
        c.print(t)

    return Outcome(NAME, data={"transactions": rows}, render=render)


def _checks(args: argparse.Namespace, ctx: Context, state: StateDir) -> Outcome:
    """`history --checks`: drift episodes from the check history, explained by the journal."""
    db = open_history(ctx.host, state.path)
    try:
        journal = state.query_journal()
        txns = [] if journal is None else journal.transactions(state="committed")
        found = drift_episodes(db, txns) if db is not None else {
            "checks": 0, "first": None, "last": None, "episodes": []}
    except sqlite3.DatabaseError as exc:
        where = printable(f"{state.path}/journal.sqlite")
        raise BadInputError(f"{where}: not a usable hwmgr journal ({exc})") from None
    finally:
        state.close()
        if db is not None:
            db.close()
    eps = [e for e in found["episodes"] if args.driver in (None, e["interface"], e["device"])]
    found["episodes"] = eps[-args.limit:] if args.limit > 0 else eps

    def render(c: Console) -> None:
        if not found["checks"]:
            c.print("no checks recorded", markup=False)
            return
        c.print(printable(f"{found['checks']} checks recorded, {found['first']} to "
                          f"{found['last']}; {len(found['episodes'])} drift episodes"),
                markup=False)
        if not found["episodes"]:
            return
        t = new_table(c, show_edge=False)
        for col in ("layer", "device / interface", "item", "drifting since", "started by",
                    "until", "stopped by", "actual"):
            t.add_column(col, overflow="fold")
        for e in found["episodes"]:
            since = e["since"] + (" (first check)" if e["first_check"] else "")
            until = "still drifting" if e["until"] is None else f"{e['until']} ({e['ended_as']})"
            where = " ".join(x for x in (e["device"], e["interface"]) if x) or "-"
            t.add_row(*(_cell(v) for v in (e["layer"], where, e["item"], since,
                                           _txns(e["started_by"], e["first_check"]), until,
                                           _txns(e["stopped_by"], e["until"] is None),
                                           "-" if e["actual"] is None else e["actual"])))
        c.print(t)

    return Outcome(NAME, data=found, render=render)


def _txns(txns: Iterable[Mapping[str, object]], nothing_to_say: bool) -> str:
    """'upgrade #12 be2net, apply #14 enp1s0f0', or why there is none."""
    if nothing_to_say:
        return "-"
    return ", ".join(f"{t['kind']} #{t['txn']} {t['target']}".strip() for t in txns) or \
        "no hwmgr transaction (changed outside hwmgr)"


class _Step(TypedDict):
    name: object
    state: object
    data: Dict[str, object]


class _Item(TypedDict):
    interface: object
    item: object
    to: object


class _Row(TypedDict):
    """One transaction as `history --json` shows it (keys in this order)."""

    id: object
    kind: object
    driver: object
    version: object
    state: object
    started: object
    ended: object
    error: object
    results: Dict[str, object]
    notes: Dict[str, object]
    steps: List[_Step]
    items: List[_Item]
    reboot_pending: object


def _dict(value: object) -> dict[str, object]:  # a journal's JSON member, or nothing
    return value if isinstance(value, dict) else {}


def _dicts(value: object) -> list[dict[str, object]]:  # a journal's rows, or nothing
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _row(t: Mapping[str, object], waiting: Mapping[object, object]) -> _Row:
    """One transaction as shown; a journal may come from a snapshot, so shapes are checked."""
    return {"id": t["id"], "kind": t["kind"], "driver": t["target"],
            "version": _dict(t["params"]).get("version"), "state": t["state"],
            "started": t["started"], "ended": t["ended"], "error": t.get("error"),
            "results": _dict(t.get("results")), "notes": _dict(t.get("notes")),
            "steps": [{"name": s["name"], "state": s["state"], "data": _dict(s.get("data"))}
                      for s in _dicts(t["steps"])],
            "items": _items(t), "reboot_pending": waiting.get(t["id"])}


def _items(t: Mapping[str, object]) -> list[_Item]:
    """The settings an apply or revert changed (interface, item, the value it set)."""
    params = _dict(t["params"])
    raw = params.get("items") if t["kind"] in ("apply", "revert") else None
    if not isinstance(raw, list):
        return []
    return [{"interface": i.get("interface"), "item": i.get("item"),
             "to": _onoff(i.get("wanted", i.get("value")))} for i in raw if isinstance(i, dict)]


def _cell(value: object) -> Text:
    """A table cell: text from the journal, escaped, never parsed as rich markup."""
    from rich.text import Text  # rich: only drawing needs it

    return Text(printable("" if value is None else value))


def _rate(rec: object) -> str | None:
    if not isinstance(rec, dict):
        return None
    rates = [f"{rec[k]:g}" for k in ("send_mbps", "receive_mbps") if isinstance(rec.get(k),
                                                                            (int, float))]
    return "/".join(rates) or None


def results_text(results: Mapping[str, object]) -> str:
    """One readable cell: verify verdict, throughput before → after, automatic rollback."""
    parts = []
    verify = results.get("verify")
    if isinstance(verify, dict) and verify.get("status"):
        parts.append(f"verify {verify['status']}")
    before, after = _rate(results.get("throughput_before")), _rate(results.get(
        "throughput_after"))
    if before or after:
        parts.append(f"throughput {before or '?'} → {after or '?'} Mbit/s")
    rb = results.get("auto_rollback")
    if isinstance(rb, dict):
        parts.append(f"auto-rollback #{rb.get('txn')}")
    shown = {"verify", "throughput_before", "throughput_after", "auto_rollback"}
    parts += [f"{k}={v}" for k, v in results.items() if k not in shown]
    return ", ".join(parts) or "-"


def _onoff(value: object) -> object:
    return ("on" if value else "off") if isinstance(value, bool) else value
