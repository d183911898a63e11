"""The state directory (default /var/lib/hwmgr): host lock, SQLite journal and file backups.

Layout: `journal.sqlite` (transactions, steps, events), `lock` (flock + holder info),
`backups/<txn>/<original path>` (+ a `.hwmgr-backup.json` record with its sha256; an upgrade
never deletes them),
`expectations/` (what `verify` checks after a reboot). Everything goes through `host.path()`,
so a temporary root stands in for a real machine in tests.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Optional, TypedDict, cast

from hwmgr.config import DEFAULT_STATE_DIR
from hwmgr.errors import (
    BadInputError,
    HwmgrError,
    NotPermittedError,
)
from hwmgr.host.hashing import sha256_file
from hwmgr.host.seam import Host
from hwmgr.output import printable
from hwmgr.transaction.journal import Journal, utcnow
from hwmgr.transaction.lock import Lock

BACKUP_RECORD = ".hwmgr-backup.json"  # sidecar next to each backup copy



class _Kept(TypedDict):
    path: str  # the logical path backed up
    existed: bool  # False: undo removes what the step made
    backup: Optional[str]  # where the copy is, None when nothing existed


class BackupRecord(_Kept, total=False):
    """What `backup_file` journals for undo: the copy's place and what it must still be."""

    sha256: str
    size: int
    mode: int
    taken: str  # when (UTC)


def backup_record(value: object, where: str) -> BackupRecord:
    """A journaled `BackupRecord` read back (a step's data is JSON): checked before a
    restore trusts it; else a one-line error naming `where`."""
    if not (isinstance(value, dict) and isinstance(value.get("path"), str)
            and isinstance(value.get("existed"), bool)
            and isinstance(value.get("backup"), (str, type(None)))):
        raise HwmgrError(f"{where}: not a backup record (path, existed, backup)")
    record: BackupRecord = cast(BackupRecord, value)  # checked above
    return record


class StateDir:
    """The state dir of one host, addressed by its logical path on that host."""

    def __init__(self, host: Host, path: str = DEFAULT_STATE_DIR) -> None:
        if not path.startswith("/"):
            raise BadInputError(f"state dir '{path}': expected an absolute path")
        self.host = host
        self.path = "/" + path.strip("/")
        self.real = host.path(self.path)
        if host.live:  # the state dir is one of the live host's write roots by definition
            host.allow_writes(self.path)
        self._journal: Journal | None = None
        self._ro_journal: Journal | None = None
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
            self._journal = self._open_journal()
        return self._journal

    def _open_journal(self) -> Journal:
        logical = f"{self.path}/journal.sqlite"
        return Journal(self.journal_file,
                       lambda **kw: self.host.journal_connect(logical, **kw))

    def read_journal(self) -> Journal | None:
        """The journal for reading, or None when this host never ran a transaction.

        A snapshot's journal (`host.meta` set) is opened read-only, resolved inside its root."""
        if self.host.meta:
            return self.query_journal()
        if self._journal is not None:
            return self._journal
        if not self.journal_file.is_file():
            return None
        self._journal = self._open_journal()
        return self._journal

    def query_journal(self) -> Journal | None:
        """The journal opened read-only (SQLite `mode=ro`) for showing it, or None when there
        is none; creates nothing. Under a snapshot root, links resolve inside the root."""
        if self._ro_journal is not None:
            return self._ro_journal
        host = self.host
        real_dir = host.resolve(self.path) if not host.live else self.path
        if real_dir is None or not os.path.lexists(real_dir):
            return None
        if not os.path.isdir(real_dir):
            raise BadInputError(f"state dir {printable(self.path)} is not a directory")
        real = self.existing_file("journal.sqlite")
        if real is None:
            return None
        self._ro_journal = Journal(
            Path(real), lambda **kw: host.journal_connect_readonly(real, **kw),
            readonly=True)
        return self._ro_journal

    def existing_file(self, name: str) -> str | None:
        """The real path of the regular file `name` in the state dir, for opening read-only;
        None when it is absent. Under a snapshot root links resolve inside the root; anything
        but a regular file (a FIFO would block SQLite's open) is BadInputError."""
        logical = f"{self.path}/{name}"
        real = self.host.resolve(logical) if not self.host.live else logical
        try:
            mode = os.stat(real).st_mode if real is not None else None
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise BadInputError(f"{printable(logical)}: cannot read ({exc.strerror})") from None
        if mode is None:
            return None
        if not stat.S_ISREG(mode):
            raise BadInputError(f"{printable(logical)}: not a regular file")
        return real

    def close(self) -> None:
        for journal in (self._journal, self._ro_journal):
            if journal is not None:
                journal.close()
        self._journal = self._ro_journal = None

    # ------------------------------------------------------------------ backups
    def backup_file(self, logical: str, txn_id: int) -> BackupRecord:
        """Keep a copy of `logical` before it changes; returns the record undo needs.

        Idempotent: if this transaction already backed the file up, the first record is
        returned, so re-running a step after a crash never overwrites the original backup.
        """
        dest = f"{self.backups}/{int(txn_id)}/{logical.strip('/')}"
        meta = self.host.path(dest + BACKUP_RECORD)
        if meta.is_file():
            first: BackupRecord = json.loads(meta.read_text())
            return first
        src = self.host.path(logical)
        record: BackupRecord = {"path": logical, "existed": src.exists(), "backup": None}
        if record["existed"]:
            self.host.copy_file(logical, dest)
            st = os.stat(src)
            record["backup"] = dest
            record["sha256"] = sha256_file(self.host.path(dest))
            record["size"] = st.st_size
            record["mode"] = st.st_mode & 0o7777
            record["taken"] = utcnow()
        self.host.write_bytes(dest + BACKUP_RECORD, json.dumps(record, indent=1).encode())
        return record

    def verify_backup(self, record: BackupRecord) -> bool:
        """True when the backup a record names is present and matches its checksum."""
        if not record.get("existed"):
            return True
        backup = record["backup"]
        if backup is None:  # a damaged record: nothing to restore from
            return False
        real = self.host.path(backup)
        return real.is_file() and sha256_file(real) == record["sha256"]

    def restore_file(self, record: BackupRecord) -> None:
        """Put a backed-up file back (or remove it if it did not exist); idempotent."""
        path = record["path"]
        if not record.get("existed"):
            self.host.remove(path)
            return
        real = self.host.path(path)
        if real.is_file() and sha256_file(real) == record["sha256"]:
            return
        backup = record["backup"]
        if backup is None or not self.verify_backup(record):
            raise HwmgrError(
                f"backup {record['backup']} of {path} is missing or its sha256 does not match"
                " the journal; refusing to restore it"
            )
        self.host.copy_file(backup, path)
        if sha256_file(real) != record["sha256"]:
            raise HwmgrError(f"restored {path} does not match its backup sha256")


def history(
    state: StateDir,
    *,
    limit: int | None = None,
    kind: str | None = None,
    target: str | None = None,
    events: bool = False,
) -> list[dict[str, Any]]:
    """Transactions newest first, each with its steps (for `hwmgr history`); [] if none."""
    journal = state.read_journal()
    if journal is None:
        return []
    return journal.transactions(kind=kind, target=target, limit=limit, events=events)
