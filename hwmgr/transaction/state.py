"""The state directory (default /var/lib/hwmgr): host lock, SQLite journal and file backups.

Layout: `journal.sqlite` (transactions, steps, events), `lock` (flock + holder info),
`backups/<txn>/<original path>` (+ a `.hwmgr-backup.json` record with its sha256; an upgrade
never deletes them),
`expectations/` (what `verify` checks after a reboot). Everything goes through `host.path()`,
so a temporary root stands in for a real machine in tests.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from hwmgr.config import DEFAULT_STATE_DIR
from hwmgr.errors import (
    BadInputError,
    HwmgrError,
    LockedError,
    NotFoundError,
    NotPermittedError,
)
from hwmgr.host.seam import Host

SCHEMA_VERSION = 1
OPEN_STATES = ("running", "interrupted", "failed")
LOCK_POLL_SECONDS = 0.05
BACKUP_RECORD = ".hwmgr-backup.json"  # sidecar next to each backup copy


def utcnow() -> str:
    """Current UTC time as `2026-11-21T10:00:00.123Z` (sortable, unambiguous)."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a real file (streamed, any size)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class StateDir:
    """The state dir of one host, addressed by its logical path on that host."""

    def __init__(self, host: Host, path: str = DEFAULT_STATE_DIR) -> None:
        if not path.startswith("/"):
            raise BadInputError(f"state dir '{path}': expected an absolute path")
        self.host = host
        self.path = "/" + path.strip("/")
        self.real = host.path(self.path)
        self._journal: Journal | None = None
        self._lock: Lock | None = None

    def __repr__(self) -> str:
        return f"StateDir({self.path!r} on {self.host!r})"

    @property
    def journal_file(self) -> Path:
        return self.real / "journal.sqlite"

    @property
    def lock_file(self) -> Path:
        return self.real / "lock"

    @property
    def backups(self) -> str:
        """Logical path of the backup area."""
        return f"{self.path}/backups"

    @property
    def expectations(self) -> str:
        """Logical path where armed post-reboot expectations live."""
        return f"{self.path}/expectations"

    def ensure(self) -> None:
        """Create the layout (idempotent); a clear error when we may not."""
        try:
            for logical in (self.path, self.backups, self.expectations):
                self.host.makedirs(logical)
        except PermissionError:
            raise NotPermittedError(
                f"cannot create state dir {self.real}: permission denied (run as root)"
            ) from None
        except OSError as exc:
            raise HwmgrError(f"cannot create state dir {self.real}: {exc.strerror}") from None

    # ------------------------------------------------------------------ lock
    def lock(self, command: str, wait: bool | float = False) -> Lock:
        """The host lock as a context manager; re-entrant within this StateDir object."""
        return Lock(self, command, wait)

    @property
    def locked(self) -> bool:
        """True while this object holds the host lock."""
        return self._lock is not None

    # ------------------------------------------------------------------ journal
    def journal(self) -> Journal:
        """The journal, created on first use (needs write access)."""
        if self._journal is None:
            self.ensure()
            self._journal = Journal(self.journal_file)
        return self._journal

    def read_journal(self) -> Journal | None:
        """The journal for reading, or None when this host never ran a transaction."""
        if self._journal is not None:
            return self._journal
        if not self.journal_file.is_file():
            return None
        self._journal = Journal(self.journal_file)
        return self._journal

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    # ------------------------------------------------------------------ backups
    def backup_file(self, logical: str, txn_id: int) -> dict[str, Any]:
        """Keep a copy of `logical` before it changes; returns the record undo needs.

        Idempotent: if this transaction already backed the file up, the first record is
        returned, so re-running a step after a crash never overwrites the original backup.
        """
        dest = f"{self.backups}/{int(txn_id)}/{logical.strip('/')}"
        meta = self.host.path(dest + BACKUP_RECORD)
        if meta.is_file():
            return json.loads(meta.read_text())
        src = self.host.path(logical)
        record: dict[str, Any] = {"path": logical, "existed": src.exists(), "backup": None}
        if record["existed"]:
            self.host.copy_file(logical, dest)
            st = os.stat(src)
            record.update(
                backup=dest,
                sha256=sha256_file(self.host.path(dest)),
                size=st.st_size,
                mode=st.st_mode & 0o7777,
                taken=utcnow(),
            )
        self.host.write_bytes(dest + BACKUP_RECORD, json.dumps(record, indent=1).encode())
        return record

    def verify_backup(self, record: dict[str, Any]) -> bool:
        """True when the backup a record names is present and matches its checksum."""
        if not record.get("existed"):
            return True
        real = self.host.path(record["backup"])
        return real.is_file() and sha256_file(real) == record["sha256"]

    def restore_file(self, record: dict[str, Any]) -> None:
        """Put a backed-up file back (or remove it if it did not exist); idempotent."""
        path = record["path"]
        if not record.get("existed"):
            self.host.remove(path)
            return
        real = self.host.path(path)
        if real.is_file() and sha256_file(real) == record["sha256"]:
            return
        if not self.verify_backup(record):
            raise HwmgrError(
                f"backup {record['backup']} of {path} is missing or its sha256 does not match"
                " the journal; refusing to restore it"
            )
        self.host.copy_file(record["backup"], path)
        if sha256_file(real) != record["sha256"]:
            raise HwmgrError(f"restored {path} does not match its backup sha256")


class Lock:
    """One lock per host: flock on <state>/lock, holder info (pid, command, since) inside.

    The kernel drops a flock when its process dies, so a crashed holder never blocks anyone.
    """

    def __init__(self, state: StateDir, command: str, wait: bool | float = False) -> None:
        self.state = state
        self.command = command
        self.wait = wait
        self._fd: int | None = None
        self._reentered = False

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def holder(self) -> dict[str, Any]:
        """Who wrote the lock file last ({} when empty or unreadable)."""
        try:
            info = json.loads(self.state.lock_file.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def acquire(self) -> None:
        """Take the lock, polling up to `wait` seconds; LockedError names the holder."""
        if self.state._lock is not None:
            self._reentered = True
            return
        self.state.ensure()
        try:
            fd = os.open(self.state.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except PermissionError:
            raise NotPermittedError(
                f"cannot open lock {self.state.lock_file}: permission denied (run as root)"
            ) from None
        start = time.monotonic()
        try:
            while True:
                try:
                    flags = fcntl.LOCK_EX if self.wait is True else fcntl.LOCK_EX | fcntl.LOCK_NB
                    fcntl.flock(fd, flags)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    waited = time.monotonic() - start
                    if self.wait is False or waited >= float(self.wait):
                        raise LockedError(self._busy_message(waited)) from None
                    time.sleep(LOCK_POLL_SECONDS)
            info = {"pid": os.getpid(), "command": self.command, "since": utcnow()}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.state._lock = self

    def _busy_message(self, waited: float) -> str:
        info = self.holder()
        cmd = str(info.get("command") or "?")
        cmd = cmd if cmd.startswith("hwmgr") else f"hwmgr {cmd}"
        who = f"pid {info.get('pid', '?')} ({cmd}) since {info.get('since', '?')}"
        tail = f" (waited {waited:.1f}s)" if self.wait not in (False, 0) else ""
        return f"state dir {self.state.real} locked by {who}{tail}"

    def release(self) -> None:
        if self._reentered:
            self._reentered = False
            return
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None
            self.state._lock = None


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


class Journal:
    """Durable record of transactions: SQLite, rollback journal, synchronous=FULL.

    Every write is its own committed SQL transaction, so once a method returns the record
    survives a crash of this process (and, with FULL, a power cut).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.db = sqlite3.connect(str(path), timeout=10.0, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=DELETE")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise BadInputError(
                    f"{path}: journal schema {version} is newer than this hwmgr ({SCHEMA_VERSION})"
                )
            if version < SCHEMA_VERSION:
                with self._tx():
                    for stmt in _SCHEMA.split(";"):
                        if stmt.strip():
                            self.db.execute(stmt)
                    self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise BadInputError(f"{path}: not a usable hwmgr journal ({exc})") from None

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
        params: dict[str, Any],
        steps: list[tuple[str, bool, bool]],
        *,
        command: str = "",
        kernel: str | None = None,
        hostname: str | None = None,
    ) -> int:
        """Open a transaction with all its steps pending; returns its id."""
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
        data: dict[str, Any] | None = None,
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

    def save_data(self, txn_id: int, seq: int, data: dict[str, Any]) -> None:
        """Replace a step's journaled data (used while the step is still running)."""
        with self._tx():
            self.db.execute(
                "UPDATE steps SET data=? WHERE txn_id=? AND seq=?", (json.dumps(data), txn_id, seq)
            )

    def set_txn(self, txn_id: int, **fields: Any) -> None:
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

    def add_notes(self, txn_id: int, **values: Any) -> None:
        """Merge free-form notes (JSON values) into a transaction, even a closed one."""
        self._merge(txn_id, "notes", values)

    def add_results(self, txn_id: int, **values: Any) -> None:
        """Merge results (e.g. before/after throughput from verify) into a transaction."""
        self._merge(txn_id, "results", values)

    def _merge(self, txn_id: int, column: str, values: dict[str, Any]) -> None:
        with self._tx():
            row = self.db.execute(f"SELECT {column} FROM transactions WHERE id=?", (txn_id,))
            found = row.fetchone()
            if found is None:
                raise NotFoundError(f"transaction {txn_id} is not in {self.path}")
            merged = {**json.loads(found[0] or "{}"), **values}
            self.db.execute(
                f"UPDATE transactions SET {column}=? WHERE id=?", (json.dumps(merged), txn_id)
            )

    # ------------------------------------------------------------------ reads
    def open_transactions(self) -> list[dict[str, Any]]:
        """Transactions not yet committed or rolled back, oldest first."""
        marks = ",".join("?" * len(OPEN_STATES))
        rows = self.db.execute(
            f"SELECT id FROM transactions WHERE state IN ({marks}) ORDER BY id", OPEN_STATES
        )
        return [self.get(r[0]) for r in rows.fetchall()]

    def get(self, txn_id: int, events: bool = False) -> dict[str, Any]:
        """One transaction with its steps (and event log when asked)."""
        row = self.db.execute("SELECT * FROM transactions WHERE id=?", (txn_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"transaction {txn_id} is not in {self.path}")
        txn = dict(row)
        for key in ("params", "notes", "results"):
            txn[key] = json.loads(txn[key] or "{}")
        steps = self.db.execute(
            "SELECT seq, name, state, reversible, commit_point, data, error, started, ended"
            " FROM steps WHERE txn_id=? ORDER BY seq",
            (txn_id,),
        ).fetchall()
        txn["steps"] = [
            {
                **dict(s),
                "data": json.loads(s["data"] or "{}"),
                "reversible": bool(s["reversible"]),
                "commit_point": bool(s["commit_point"]),
            }
            for s in steps
        ]
        if events:
            ev = self.db.execute(
                "SELECT seq, at, event, detail FROM events WHERE txn_id=? ORDER BY id", (txn_id,)
            )
            txn["events"] = [dict(e) for e in ev.fetchall()]
        return txn

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


def iter_backups(state: StateDir) -> Iterator[dict[str, Any]]:
    """Every backup record under the state dir (for audits and `hwmgr rollback`)."""
    base = state.host.path(state.backups)
    if not base.is_dir():
        return
    for meta in sorted(base.rglob("*" + BACKUP_RECORD)):
        try:
            yield json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
