"""What the journal says is not settled yet: reboot pending, known from the journal and the
boot id rather than guessed from versions, and transactions left open (`open_transactions`).

This module is the one owner of "does it need a reboot": `reboot_needed` is the rule a plan
applies (`plan` prints it, the transaction journals it as `needs_reboot`), and
`reboot_pending` reads that answer back for `check` (exit 7), `verify` (reboot-pending, exit
7), `history` and `plan` (the state now), so they never disagree.

The engine notes the boot id (`/proc/sys/kernel/random/boot_id`) in a transaction when it
commits. A committed transaction that needs a reboot (`needs_reboot`: the plan's journaled
answer; without one, any upgrade or rollback) and that committed during the boot the host is
in now is *pending*: the new module is on disk, another one is live. The newest committed
transaction of a target decides: a rollback that put back the very build still loaded (in the
boot of its upgrade) leaves nothing pending, though the upgrade before it did.

Transactions journaled before hwmgr noted boot ids carry none: they are never reported (no
knowledge to go on). When the current boot id is unknown (a snapshot taken by an older
hwmgr) the newest candidate per target is reported with status "unknown".
"""

from __future__ import annotations

import sqlite3
from typing import Mapping, Sequence

from hwmgr import safejson
from hwmgr.errors import BadInputError
from hwmgr.host.capture import BOOT_ID, boot_id, retake
from hwmgr.host.seam import Host
from hwmgr.output import printable
from hwmgr.transaction.journal import checked_row
from hwmgr.transaction.state import StateDir

NEEDS_REBOOT_KINDS = ("upgrade", "rollback")
NOTE = "boot_id"  # the transactions' notes key the engine sets just before it commits


def needs_reboot(kind: str, params: object, notes: object) -> bool:
    """True when a committed transaction only takes effect after a reboot: its plan's
    journaled answer (`reboot_needed`) when it has one, else by its kind or a note."""
    said = params.get("needs_reboot") if isinstance(params, dict) else None
    if isinstance(said, bool):
        return said
    marked = any(isinstance(d, dict) and d.get("needs_reboot") is True for d in (params, notes))
    return kind in NEEDS_REBOOT_KINDS or marked


def reboot_needed(host: Host, modules: Sequence[str], kernels: Sequence[str],
                  leaves: Mapping[str, Mapping[str, object]] | None = None) -> bool:
    """The rule: a driver change needs a reboot when it changes a kernel other than the
    running one (booting it is the reboot), or a module loaded now, unless what is loaded is
    the very build the change leaves on disk (`leaves`: kernel -> module -> its record with
    `srcversion`; a rollback in the boot of the upgrade it undoes). A module not loaded in
    the running kernel loads the new build when first needed: no reboot."""
    running = host.read_attr("/proc/sys/kernel/osrelease")
    if running is None or any(k != running for k in kernels):
        return True
    left = (leaves or {}).get(running) or {}
    for m in modules:
        base = f"/sys/module/{m.replace('-', '_')}"
        if not host.is_dir(base):
            continue
        live = host.read_attr(f"{base}/srcversion")
        rec = left.get(m)
        if live is None or not isinstance(rec, Mapping) or rec.get("srcversion") != live:
            return True
    return False


# the columns reboot_pending shows, as journal.checked_row checks them (params and notes are
# read by `_obj`, leniently)
_COLUMNS = {"id": "int", "kind": "text", "target": "text", "ended": "text?"}


def reboot_pending(host: Host, state_dir: str) -> list[dict[str, object]]:
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
    out: list[dict[str, object]] = []
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
        if target in seen:
            continue
        seen.add(target)  # its newest committed transaction decides
        if not needs_reboot(row["kind"], params, notes):
            continue
        if booted is None:
            continue  # journaled without a boot id: nothing known either way
        entry: dict[str, object] = {"driver": target, "target": target, "txn": row["id"],
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


def pending_for(entries: list[dict[str, object]], driver: str) -> dict[str, object] | None:
    """The entry that says `driver`'s armed state waits for a reboot, if any."""
    return next((e for e in entries if e["target"] == driver), None)


def waiting_for(host: Host, state_dir: str, target: str) -> list[str]:
    """Why `target` waits for a reboot now (the journal's answer, as check and verify read
    it), so a plan states the host's state the same way."""
    return [str(e["reason"]) for e in reboot_pending(host, state_dir) if e["target"] == target]


def _obj(text: object) -> dict[str, object]:
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
