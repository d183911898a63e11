"""What the journal says is not settled yet: reboot pending, known from the journal and the
boot id rather than guessed from versions, and transactions left open (`open_transactions`).

The engine notes the boot id (`/proc/sys/kernel/random/boot_id`) in a transaction when it
commits. A transaction that installs something the running kernel only picks up at the next
boot (an upgrade or rollback, or any transaction noted `needs_reboot`, e.g. a settings apply)
and that committed during the boot the host is in now is *pending*: the new module is on
disk, the old one is live. `check` reports it (exit 7) and `verify` waits for the reboot.

Transactions journaled before hwmgr noted boot ids carry none: they are never reported (no
knowledge to go on). When the current boot id is unknown (a snapshot taken by an older
hwmgr) the newest candidate per target is reported with status "unknown".
"""

from __future__ import annotations

import sqlite3
from typing import Any

from hwmgr import safejson
from hwmgr.errors import BadInputError
from hwmgr.host.capture import BOOT_ID, boot_id, retake
from hwmgr.host.seam import Host
from hwmgr.output import printable
from hwmgr.transaction.journal import checked_row
from hwmgr.transaction.state import StateDir

NEEDS_REBOOT_KINDS = ("upgrade", "rollback")
NOTE = "boot_id"  # the transactions' notes key the engine sets just before it commits


def needs_reboot(kind: str, params: Any, notes: Any) -> bool:
    """True when a committed transaction of this kind only takes effect after a reboot."""
    marked = any(isinstance(d, dict) and d.get("needs_reboot") is True for d in (params, notes))
    return kind in NEEDS_REBOOT_KINDS or marked


# the columns reboot_pending shows, as journal.checked_row checks them (params and notes are
# read by `_obj`, leniently)
_COLUMNS = {"id": "int", "kind": "text", "target": "text", "ended": "text?"}


def reboot_pending(host: Host, state_dir: str) -> list[dict[str, Any]]:
    """Committed transactions not yet live: one entry per target, newest first.

    Each entry: {driver, target, txn, kind, status ("pending" | "unknown"), reason}. Reads
    the journal read-only; never creates or changes anything."""
    state = StateDir(host, state_dir)
    try:
        journal = state.query_journal()
        if journal is None:
            return []
        rows = journal.db.execute(
            "SELECT id, kind, target, params, notes, ended FROM transactions"
            " WHERE state='committed' ORDER BY id DESC").fetchall()
    except sqlite3.DatabaseError as exc:
        raise BadInputError(f"{state.path}/journal.sqlite: not a usable hwmgr journal ({exc})"
                         ) from None
    finally:
        state.close()
    now = boot_id(host)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    where = f"{state.path}/journal.sqlite: transaction"
    for raw in rows:
        # every column by type before use (a blob where text belongs reached check's JSON
        # and failed there); params and notes stay lenient: damaged ones mean "not known"
        row = checked_row({k: raw[k] for k in _COLUMNS}, _COLUMNS,
                          f"{where} #{printable(raw['id'])}")
        params, notes = _obj(raw["params"]), _obj(raw["notes"])
        booted = notes.get(NOTE) if isinstance(notes.get(NOTE), str) else None
        if now is not None and booted is not None and booted != now:
            break  # ids grow with time: everything older committed in an earlier boot too
        target = row["target"]
        if target in seen or not needs_reboot(row["kind"], params, notes):
            continue
        seen.add(target)
        if booted is None:
            continue  # journaled without a boot id: nothing known either way
        entry = {"driver": target, "target": target, "txn": row["id"],
                 "kind": row["kind"], "committed": row["ended"]}
        if now is None:
            why = retake("boot id (/proc/sys/kernel/random/boot_id)", host, BOOT_ID) if host.meta \
                else "the current boot id cannot be read"
            entry.update(status="unknown",
                         reason=f"{row['kind']} #{row['id']} of {target}: {why}")
        else:
            entry.update(status="pending",
                         reason=f"{row['kind']} #{row['id']} of {target} committed during "
                         "this boot: installed, not yet live until the next reboot")
        out.append(entry)
    return out


def pending_for(entries: list[dict[str, Any]], driver: str) -> dict[str, Any] | None:
    """The entry that says `driver`'s armed state waits for a reboot, if any."""
    return next((e for e in entries if e["target"] == driver), None)


def _obj(text: Any) -> dict[str, Any]:
    """A journal JSON column as a dict; anything else (damaged, hostile: a blob, deep
    nesting, a 5,000-digit number) as {}: no knowledge to go on, as for an old journal."""
    if not isinstance(text, (str, bytes)):
        return {}
    try:
        value = safejson.parse(text or "{}")
    except safejson.JSONError:
        return {}
    return value if isinstance(value, dict) else {}


def open_transactions(host: Host, state_dir: str) -> list[str]:
    """One line per transaction a crash or a failed undo left open (read only, no lock)."""
    journal = StateDir(host, state_dir).read_journal()
    if journal is None:
        return []
    return [f"transaction #{t['id']} ({t['kind']} {t['target']}) is still {t['state']}: "
            "the host may be half-changed; run `hwmgr recover`"
            for t in journal.open_transactions()]
