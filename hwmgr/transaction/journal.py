"""The SQLite journal of transactions and their steps (durable before and after each step).

`Journal` owns the schema, the writes the engine makes and the read-only queries `history`
runs; `utcnow` is the one clock every journal and lock timestamp uses.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, TypedDict, cast

from hwmgr import safejson
from hwmgr.errors import BadInputError, NotFoundError
from hwmgr.output import printable

SCHEMA_VERSION = 1
OPEN_STATES = ("running", "interrupted", "failed")


def utcnow() -> str:
    """Current UTC time as `2026-11-21T10:00:00.123Z` (sortable, unambiguous)."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS transactions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL, target TEXT NOT NULL DEFAULT '', params TEXT NOT NULL,
    state TEXT NOT NULL, direction TEXT NOT NULL DEFAULT 'forward',
    started TEXT NOT NULL, ended TEXT, kernel TEXT, hostname TEXT, pid INTEGER,
    command TEXT, error TEXT,
    notes TEXT NOT NULL DEFAULT '{}', results TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS steps (
    txn_id INTEGER NOT NULL REFERENCES transactions(id), seq INTEGER NOT NULL,
    name TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
    reversible INTEGER NOT NULL, commit_point INTEGER NOT NULL,
    data TEXT NOT NULL DEFAULT '{}', error TEXT, started TEXT, ended TEXT,
    PRIMARY KEY (txn_id, seq));
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, txn_id INTEGER NOT NULL, seq INTEGER,
    at TEXT NOT NULL, event TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS transactions_state ON transactions(state);
"""


# Each column as `get` hands it on: "text" (str), "text?" (str or NULL), "int", "int?",
# "json" (a JSON object stored as text). SQLite stores whatever a hand edit or a disk error
# put there, so every row is checked against this before anything reads it.
TXN_COLUMNS = {
    "id": "int", "kind": "text", "target": "text", "params": "json", "state": "text",
    "direction": "text", "started": "text", "ended": "text?", "kernel": "text?",
    "hostname": "text?", "pid": "int?", "command": "text?", "error": "text?",
    "notes": "json", "results": "json",
}
STEP_COLUMNS = {
    "seq": "int", "name": "text", "state": "text", "reversible": "int", "commit_point": "int",
    "data": "json", "error": "text?", "started": "text?", "ended": "text?",
}
EVENT_COLUMNS = {"seq": "int?", "at": "text", "event": "text", "detail": "text"}


class StepRow(TypedDict):
    """One step as `Journal.row` reads it back (STEP_COLUMNS, checked)."""

    seq: int
    name: str
    state: str
    reversible: bool
    commit_point: bool
    data: dict[str, object]  # what the step journaled (JSON)
    error: Optional[str]
    started: Optional[str]
    ended: Optional[str]


class EventRow(TypedDict):
    seq: Optional[int]
    at: str
    event: str
    detail: str


class _TxnColumns(TypedDict):
    id: int
    kind: str
    target: str
    params: dict[str, object]  # the kind's params as journaled (JSON)
    state: str
    direction: str
    started: str
    ended: Optional[str]
    kernel: Optional[str]
    hostname: Optional[str]
    pid: Optional[int]
    command: Optional[str]
    error: Optional[str]
    notes: dict[str, object]
    results: dict[str, object]
    steps: list[StepRow]


class TxnRow(_TxnColumns, total=False):
    """One transaction as `Journal.row` reads it back: each column checked by type
    (TXN_COLUMNS), with its steps and, when asked, its events."""

    events: list[EventRow]
MAX_TEXT = 1 << 16  # characters in one text column (an error message, a command line)
DAMAGED = ("this state-dir file is damaged (disk error, hand edit or another hwmgr): restore "
           "it from a backup, or move it aside and hwmgr starts a new one")


def damaged(where: str, problem: str) -> BadInputError:
    """The one-line error for a state-dir file that is not as hwmgr wrote it (exit 8), with
    how to recover."""
    return BadInputError(printable(f"{where}: {problem}; {DAMAGED}"))


def checked_row(row: dict[str, object], columns: dict[str, str], where: str
                ) -> dict[str, Any]:
    """`row` with its JSON columns decoded, once every column has the type `columns` says
    (the journal's and the check history's rows: SQLite keeps any type in any column). The
    caller names the checked row by a TypedDict (`TxnRow`) or reads the columns it checked."""
    for col, kind in columns.items():
        value = row.get(col)
        if value is None and kind.endswith("?"):
            continue
        if kind.startswith("int"):
            ok = isinstance(value, int)
        elif kind.startswith("text"):
            ok = isinstance(value, str) and len(value) <= MAX_TEXT
        else:
            ok = isinstance(value, str)
        if not ok:
            got = (f"{len(value)} characters" if isinstance(value, str)
                   else safejson.type_name(value) if not isinstance(value, bytes) else "a blob")
            raise damaged(f"{where} {col}", f"expected {kind.rstrip('?')}, got {got}")
        if kind == "json" and isinstance(value, str):
            try:
                doc = safejson.parse(value)
            except safejson.JSONError as exc:
                raise damaged(f"{where} {col}", f"not valid JSON ({exc})") from None
            if not isinstance(doc, dict):
                raise damaged(f"{where} {col}",
                              f"expected a JSON object, got {safejson.type_name(doc)}")
            row[col] = doc
    return row


class Journal:
    """Durable record of transactions: SQLite, rollback journal, synchronous=FULL.

    Every write is its own committed SQL transaction, so once a method returns the record
    survives a crash of this process (and, with FULL, a power cut).
    """

    def __init__(self, path: Path, connect: Callable[..., sqlite3.Connection], *,
                 readonly: bool = False) -> None:
        """`connect(**sqlite_kwargs)` opens the database through the host seam (read-only for
        `history` and snapshots: never create, migrate or write anything)."""
        self.path = path
        try:
            self.db = connect(timeout=10.0, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            if not readonly:
                self.db.execute("PRAGMA journal_mode=DELETE")
                self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise BadInputError(
                    f"{path}: journal schema {version} is newer than this hwmgr ({SCHEMA_VERSION})"
                )
            if version < SCHEMA_VERSION and readonly:
                raise BadInputError(f"{printable(path)}: not a hwmgr journal (no schema)")
            if version < SCHEMA_VERSION:
                with self._tx():
                    for stmt in _SCHEMA.split(";"):
                        if stmt.strip():
                            self.db.execute(stmt)
                    self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            hint = ""
            if readonly and os.path.exists(f"{path}-journal"):
                hint = "; an interrupted write is pending: run 'hwmgr recover'"
            raise BadInputError(f"{printable(path)}: not a usable hwmgr journal ({exc}){hint}"
                                ) from None

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[None]:
        """`BEGIN IMMEDIATE` … `COMMIT` (ROLLBACK on error) around a group of writes."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def synchronous(self) -> int:
        """The connection's PRAGMA synchronous (2 = FULL)."""
        return int(self.db.execute("PRAGMA synchronous").fetchone()[0])

    # ------------------------------------------------------------------ writes
    def begin(
        self,
        kind: str,
        target: str,
        params: Mapping[str, object],
        steps: list[tuple[str, bool, bool]],
        *,
        command: str = "",
        results: Mapping[str, object] | None = None,
        kernel: str | None = None,
        hostname: str | None = None,
    ) -> int:
        """Open a transaction with all its steps pending (and any `results` known before it
        runs); returns its id."""
        now = utcnow()
        with self._tx():
            row = {
                "kind": kind,
                "target": target,
                "params": json.dumps(params),
                "state": "running",
                "started": now,
                "kernel": kernel,
                "hostname": hostname,
                "pid": os.getpid(),
                "command": command,
                "results": json.dumps(results or {}),
            }
            cur = self.db.execute(
                f"INSERT INTO transactions({', '.join(row)}) VALUES ({','.join('?' * len(row))})",
                tuple(row.values()),
            )
            txn_id = int(cur.lastrowid or 0)
            self.db.executemany(
                "INSERT INTO steps(txn_id, seq, name, reversible, commit_point) VALUES (?,?,?,?,?)",
                [(txn_id, i, n, int(r), int(c)) for i, (n, r, c) in enumerate(steps)],
            )
            self._event(txn_id, None, "begin", f"{kind} {target}".strip(), now)
        return txn_id

    def set_step(
        self,
        txn_id: int,
        seq: int,
        state: str,
        *,
        data: Mapping[str, object] | None = None,
        error: str | None = None,
        event: str | None = None,
    ) -> None:
        """Move a step to `state` (journaling data, error and an event atomically)."""
        now = utcnow()
        sets, args = ["state=?"], [state]
        if state == "started":
            sets.append("started=?")
            args.append(now)
        elif state != "pending":
            sets.append("ended=?")
            args.append(now)
        if data is not None:
            sets.append("data=?")
            args.append(json.dumps(data))
        if error is not None:
            sets.append("error=?")
            args.append(error)
        with self._tx():
            self.db.execute(
                f"UPDATE steps SET {', '.join(sets)} WHERE txn_id=? AND seq=?",
                (*args, txn_id, seq),
            )
            self._event(txn_id, seq, event or state, error or "", now)

    def save_data(self, txn_id: int, seq: int, data: Mapping[str, object]) -> None:
        """Replace a step's journaled data (used while the step is still running)."""
        with self._tx():
            self.db.execute(
                "UPDATE steps SET data=? WHERE txn_id=? AND seq=?", (json.dumps(data), txn_id, seq)
            )

    def set_txn(self, txn_id: int, **fields: str | None) -> None:
        """Update transaction columns (state, direction, error, ended)."""
        allowed = {"state", "direction", "error", "ended"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot set transaction fields {sorted(bad)}")
        if fields.get("state") in ("committed", "rolled-back"):
            fields.setdefault("ended", utcnow())
        cols = ", ".join(f"{k}=?" for k in fields)
        with self._tx():
            self.db.execute(
                f"UPDATE transactions SET {cols} WHERE id=?", (*fields.values(), txn_id)
            )
            if "state" in fields:
                self._event(txn_id, None, str(fields["state"]), str(fields.get("error") or ""))

    def event(self, txn_id: int, event: str, detail: str = "", seq: int | None = None) -> None:
        """Append a free-form event line to a transaction's log."""
        with self._tx():
            self._event(txn_id, seq, event, detail)

    def _event(self, txn_id: int, seq: int | None, event: str, detail: str, at: str = "") -> None:
        self.db.execute(
            "INSERT INTO events(txn_id, seq, at, event, detail) VALUES (?,?,?,?,?)",
            (txn_id, seq, at or utcnow(), event, detail),
        )

    def add_notes(self, txn_id: int, **values: object) -> None:
        """Merge free-form notes (JSON values) into a transaction, even a closed one."""
        self._merge(txn_id, "notes", values)

    def add_results(self, txn_id: int, **values: object) -> None:
        """Merge results (e.g. before/after throughput from verify) into a transaction."""
        self._merge(txn_id, "results", values)

    def _merge(self, txn_id: int, column: str, values: dict[str, object]) -> None:
        with self._tx():
            row = self.db.execute(f"SELECT {column} FROM transactions WHERE id=?", (txn_id,))
            found = row.fetchone()
            if found is None:
                raise NotFoundError(f"transaction {txn_id} is not in {self.path}")
            where = f"{printable(self.path)}: transaction {txn_id}"
            have = checked_row({column: found[0]}, {column: "json"}, where)[column]
            merged = {**have, **values}
            self.db.execute(
                f"UPDATE transactions SET {column}=? WHERE id=?", (json.dumps(merged), txn_id)
            )

    # ------------------------------------------------------------------ reads
    def open_transactions(self) -> list[TxnRow]:
        """Transactions not yet committed or rolled back, oldest first."""
        marks = ",".join("?" * len(OPEN_STATES))
        rows = self.db.execute(
            f"SELECT id FROM transactions WHERE state IN ({marks}) ORDER BY id", OPEN_STATES
        )
        return [self.row(r[0]) for r in rows.fetchall()]

    def get(self, txn_id: int, events: bool = False) -> dict[str, Any]:
        """`row` as a plain dict, for the readers that index it themselves (history, revert,
        verify)."""
        return dict(self.row(txn_id, events))

    def row(self, txn_id: int, events: bool = False) -> TxnRow:
        """One transaction with its steps (and event log when asked), each column checked by
        type at the door (`checked_row`): a damaged row is one line naming it (`damaged`)."""
        row = self.db.execute("SELECT * FROM transactions WHERE id=?", (txn_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"transaction {txn_id} is not in {self.path}")
        where = f"{printable(self.path)}: transaction {txn_id}"
        txn = checked_row(dict(row), TXN_COLUMNS, where)
        steps = self.db.execute(
            "SELECT seq, name, state, reversible, commit_point, data, error, started, ended"
            " FROM steps WHERE txn_id=? ORDER BY seq",
            (txn_id,),
        ).fetchall()
        txn["steps"] = []
        for s in steps:
            step = checked_row(dict(s), STEP_COLUMNS, f"{where} step {printable(s['seq'])}")
            step["reversible"] = bool(step["reversible"])
            step["commit_point"] = bool(step["commit_point"])
            txn["steps"].append(step)
        if events:
            ev = self.db.execute(
                "SELECT seq, at, event, detail FROM events WHERE txn_id=? ORDER BY id", (txn_id,)
            )
            txn["events"] = [checked_row(dict(e), EVENT_COLUMNS, f"{where} event")
                             for e in ev.fetchall()]
        return cast(TxnRow, txn)  # every column checked by type above

    def transactions(
        self,
        *,
        kind: str | None = None,
        target: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        events: bool = False,
    ) -> list[dict[str, Any]]:
        """Transactions newest first, optionally filtered."""
        where, args = [], []
        for col, val in (("kind", kind), ("target", target), ("state", state)):
            if val is not None:
                where.append(f"{col}=?")
                args.append(val)
        sql = "SELECT id FROM transactions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        ids = [r[0] for r in self.db.execute(sql, args).fetchall()]
        return [self.get(i, events=events) for i in ids]
