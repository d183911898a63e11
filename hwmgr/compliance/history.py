"""Check history: every check on a live host, kept compactly, and drift explained over time.

`record_check` stores one row per check and one small row per item (status code, and the
actual value only when it is not ok) in `<state>/checks.sqlite`, its own file so the
transaction journal's schema and durability rules stay as they are; the last `KEEP` checks
are kept. `drift_episodes` turns them into per-item episodes (when drift started and
stopped) and names the transactions (upgrade, rollback, apply...) the journal shows
committed between the two checks around each change: drift explained by layer and cause.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Iterable, Mapping, TypedDict

from hwmgr import safejson
from hwmgr.compliance.judge import ITEM_KEYS, ItemKey, worst_per_item
from hwmgr.errors import BadInputError, HwmgrError, NotPermittedError
from hwmgr.host.capture import boot_id
from hwmgr.host.seam import Host
from hwmgr.output import printable
from hwmgr.transaction.journal import checked_row, utcnow
from hwmgr.transaction.state import StateDir

CHECKS_FILE = "checks.sqlite"
KEEP = 1000
# stored per item: codes are never renumbered (old rows keep their meaning), new ones append
CODES = {"ok": 0, "drift": 1, "unknown": 2, "unsupported": 3, "uncatalogued": 4}
STATUS = {v: k for k, v in CODES.items()}
MAX_ACTUAL = 200  # characters of a non-ok actual value kept per item
# each row's columns as drift_episodes reads them (journal.checked_row's kinds)
CHECK_COLUMNS = {"id": "int", "at": "text"}
ITEM_COLUMNS = {"id": "int", **dict.fromkeys(ITEM_KEYS, "text")}
CHECK_ITEM_COLUMNS = {"check_id": "int", "item_id": "int", "status": "int", "actual": "text?"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, boot_id TEXT,
    catalog_version TEXT, compliant INTEGER, summary TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY, layer TEXT NOT NULL, device TEXT NOT NULL,
    interface TEXT NOT NULL, item TEXT NOT NULL, UNIQUE (layer, device, interface, item));
CREATE TABLE IF NOT EXISTS check_items (
    check_id INTEGER NOT NULL, item_id INTEGER NOT NULL, status INTEGER NOT NULL,
    actual TEXT, PRIMARY KEY (check_id, item_id)) WITHOUT ROWID;
"""


class Episode(TypedDict):
    """One stretch of drift of one item: when it started and stopped, and the committed
    transactions between the checks on either side of each end."""

    layer: str
    device: str
    interface: str
    item: str
    since: str
    since_check: int
    first_check: bool  # drifting at the first check recorded: its start is unknown
    started_by: list[dict[str, object]]
    until: str | None
    ended_as: str | None
    stopped_by: list[dict[str, object]]
    actual: object


class DriftHistory(TypedDict):
    """`history --checks`: how many checks were recorded, the first and last, the episodes."""

    checks: int
    first: str | None
    last: str | None
    episodes: list[Episode]


def record_check(host: Host, state_dir: str, data: Mapping[str, object], *,
                 at: str | None = None) -> int | None:
    """Record one check's per-item statuses; its id, or None on a snapshot (nothing to add).

    Keeps the last KEEP checks. `at` defaults to now (the journal's clock, so it sorts with
    transaction times)."""
    if host.meta:
        return None
    state = StateDir(host, state_dir)
    state.ensure()
    rows = _rows(data)
    summary = data.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    version = data.get("catalog_version")
    try:
        db = host.journal_connect(f"{state.path}/{CHECKS_FILE}", timeout=10.0,
                                  isolation_level=None)
        try:
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)
            db.execute("BEGIN IMMEDIATE")
            cur = db.execute(
                "INSERT INTO checks(at, boot_id, catalog_version, compliant, summary)"
                " VALUES (?,?,?,?,?)",
                (at or utcnow(), boot_id(host), None if version is None else str(version),
                 int(data.get("compliant") is True), json.dumps(summary)))
            check_id = int(cur.lastrowid or 0)
            for key, code, actual in rows:
                db.execute("INSERT OR IGNORE INTO items(layer, device, interface, item)"
                           " VALUES (?,?,?,?)", key)
                item_id = db.execute("SELECT id FROM items WHERE layer=? AND device=? AND"
                                     " interface=? AND item=?", key).fetchone()[0]
                db.execute("INSERT OR REPLACE INTO check_items VALUES (?,?,?,?)",
                           (check_id, item_id, code, actual))
            oldest = check_id - KEEP
            db.execute("DELETE FROM check_items WHERE check_id <= ?", (oldest,))
            db.execute("DELETE FROM checks WHERE id <= ?", (oldest,))
            db.execute("DELETE FROM items WHERE id NOT IN (SELECT item_id FROM check_items)")
            db.execute("COMMIT")
        finally:
            db.close()
    except PermissionError:
        raise NotPermittedError(f"cannot record the check in {state.path}: permission denied"
                                ) from None
    except sqlite3.DatabaseError as exc:
        raise HwmgrError(f"{state.path}/{CHECKS_FILE}: cannot record the check ({exc})"
                         ) from None
    return check_id


def _rows(data: Mapping[str, object]) -> list[tuple[ItemKey, int, str | None]]:
    """(item key, status code, actual or None) per item, from its worst finding."""
    out = []
    for key, f in worst_per_item(data.get("findings")).items():
        code = CODES[str(f["status"])]
        actual = None if code == 0 else json.dumps(f.get("actual"), default=str)[:MAX_ACTUAL]
        out.append((key, code, actual))
    return out


def open_history(host: Host, state_dir: str) -> sqlite3.Connection | None:
    """The check history read-only (creates nothing), or None when no check was recorded."""
    logical = f"/{state_dir.strip('/')}/{CHECKS_FILE}"
    real = StateDir(host, state_dir).existing_file(CHECKS_FILE)
    if real is None:
        return None
    try:
        db = host.journal_connect_readonly(real, timeout=10.0)
        db.execute("SELECT 1 FROM checks LIMIT 1")
    except sqlite3.DatabaseError as exc:
        raise BadInputError(f"{printable(logical)}: not a usable hwmgr check history ({exc})"
                            ) from None
    return db


def _committed(txns: Iterable[Mapping[str, object]]) -> list[tuple[str, Mapping[str, object]]]:
    """(ended, transaction) of the committed transactions, oldest first."""
    out = []
    for t in txns:
        ended = t.get("ended")
        if t.get("state") == "committed" and isinstance(ended, str):
            out.append((ended, t))
    return sorted(out, key=lambda pair: pair[0])


def drift_episodes(db: sqlite3.Connection, txns: Iterable[Mapping[str, object]]
                   ) -> DriftHistory:
    """Per item: each stretch of drift (from / until which check) and the transactions that
    committed between the checks where it started and where it stopped."""
    where = f"check history {CHECKS_FILE}"
    try:
        checks = [(r["id"], r["at"]) for r in (
            checked_row({"id": i, "at": at}, CHECK_COLUMNS, f"{where}: check {printable(i)}")
            for i, at in db.execute("SELECT id, at FROM checks ORDER BY id"))]
        items = {}
        for r in db.execute("SELECT id, layer, device, interface, item FROM items"):
            row = checked_row(dict(zip(("id", *ITEM_KEYS), r)), ITEM_COLUMNS,
                              f"{where}: item {printable(r[0])}")
            items[row["id"]] = {k: row[k] for k in ITEM_KEYS}
        seen: dict[int, dict[int, tuple[int, object]]] = {}
        for r in db.execute("SELECT check_id, item_id, status, actual FROM check_items"):
            row = checked_row(dict(zip(CHECK_ITEM_COLUMNS, r)), CHECK_ITEM_COLUMNS,
                              f"{where}: check {printable(r[0])} item {printable(r[1])}")
            seen.setdefault(row["item_id"], {})[row["check_id"]] = (row["status"], row["actual"])
    except sqlite3.DatabaseError as exc:
        raise BadInputError(f"check history: not usable ({exc})") from None
    committed = _committed(txns)

    def between(after: str | None, upto: str) -> list[dict[str, object]]:
        return [{"txn": t["id"], "kind": t["kind"], "target": t["target"],
                 "committed": ended} for ended, t in committed
                if (after is None or ended > after) and ended <= upto]

    episodes: list[Episode] = []
    for iid, by_check in seen.items():
        open_ep: Episode | None = None
        prev_at: str | None = None
        for cid, at in checks:
            code, actual = by_check.get(cid, (-1, None))  # -1: not checked that time
            if code == 1 and open_ep is None:
                it = items.get(iid, dict.fromkeys(ITEM_KEYS, ""))
                open_ep = {"layer": it["layer"], "device": it["device"],
                           "interface": it["interface"], "item": it["item"], "since": at,
                           "since_check": cid, "first_check": prev_at is None,
                           "started_by": [] if prev_at is None else between(prev_at, at),
                           "until": None, "ended_as": None, "stopped_by": [],
                           "actual": _load(actual)}
            elif code == 1 and open_ep is not None:
                open_ep["actual"] = _load(actual)
            elif open_ep is not None:
                open_ep["until"] = at
                open_ep["ended_as"] = STATUS.get(code, "not checked")
                open_ep["stopped_by"] = between(prev_at, at)
                episodes.append(open_ep)
                open_ep = None
            prev_at = at
        if open_ep is not None:
            episodes.append(open_ep)
    episodes.sort(key=lambda e: (e["since"], e["layer"], e["device"], e["interface"],
                                 e["item"]))
    return {"checks": len(checks), "first": checks[0][1] if checks else None,
            "last": checks[-1][1] if checks else None, "episodes": episodes}


def _load(text: object) -> object:
    """A stored actual value (JSON text, cut at MAX_ACTUAL) as shown: the value, or the text
    itself when it is not whole JSON."""
    try:
        return safejson.parse(text) if isinstance(text, str) else None
    except safejson.JSONError:
        return text
