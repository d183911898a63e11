"""What the kernel gate keeps in the state dir, and what `check` shows from it.

Managed drivers (an upgrade still in effect in the journal; a rollback to inbox ends it), the
per-kernel records `<state>/kernels/KVER.json` and the hold `<state>/kernels/hold.json`. Kept
apart from the gate itself (lifecycle/gate/kernelgate.py) so `check` reads them without importing
the DKMS build and download machinery; with no managed driver it reads only the journal.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Mapping, Optional, TypedDict, cast

from hwmgr import safejson
from hwmgr.errors import BadInputError
from hwmgr.host.seam import Host
from hwmgr.lifecycle import INSTALL_TREE
from hwmgr.lifecycle.params import UpgradeParams
from hwmgr.lifecycle.record import chain_of
from hwmgr.numtext import digits_key
from hwmgr.output import printable
from hwmgr.transaction.state import StateDir

KERNELS = "kernels"  # under the state dir: KVER.json per gated kernel, hold.json
HOLD = "hold.json"
MAX_RECORD = 1 << 20


class _HoldRequired(TypedDict):
    backend: str  # the boot loader's back-end (bootloader.BACKENDS) that holds
    kernels: list[str]  # the kernels not ready, held off
    saved: dict[str, object]  # what the back-end had before (its `hold`), for `restore`


class Hold(_HoldRequired, total=False):
    """`hold.json`: the boot default held on the running kernel."""

    held_on: str  # the running kernel it holds on
    since: str


class GateRecord(TypedDict):
    """`KVER.json`: the gate's outcome for one kernel."""

    kernel: str
    running: Optional[str]
    checked: str
    ready: bool
    interrupted: Optional[str]  # why a signal stopped it
    drivers: dict[str, dict[str, object]]  # driver -> version, ready, why, facts


def in_effect(state: StateDir) -> list[tuple[str, UpgradeParams]]:
    """(driver, params of its newest upgrade) for each driver an upgrade still in effect
    installed, by name (damaged journal: exit 8): the drivers the gate manages. The journal
    is opened read-only: `check` reads this, and never changes the journal."""
    journal = state.query_journal()
    if journal is None:
        return []
    where = printable(f"{state.path}/journal.sqlite")
    try:
        targets = sorted({t["target"] for t in journal.transactions(kind="upgrade",
                                                                    state="committed")})
        chains = {d: chain_of(journal.transactions(target=d), where) for d in targets}
    except sqlite3.DatabaseError as exc:
        raise BadInputError(f"{where}: not a usable hwmgr journal ({exc})") from None
    # a driver rolled back to inbox has an empty chain: not managed any more
    return [(d, chains[d][-1]["params"]) for d in targets if chains[d]]


def installed(host: Host, kver: str) -> bool:
    """True when `kver` is installed: its modules dir and its kernel image are there (in
    /boot, or beside its modules where kernel-install hosts keep it)."""
    return host.is_dir(f"{INSTALL_TREE}/{kver}") and (
        host.exists(f"/boot/vmlinuz-{kver}") or host.exists(f"{INSTALL_TREE}/{kver}/vmlinuz"))


def record_path(state: StateDir, kver: str) -> str:
    return f"{state.path}/{KERNELS}/{kver}.json"


def read(host: Host, path: str) -> dict[str, object] | None:
    """A record the gate wrote, or None; anything else there is exit 8 naming it."""
    data = host.read_bytes(path, limit=MAX_RECORD)
    if data is None:
        return None
    obj = safejson.load(data, path)
    if not isinstance(obj, dict):
        raise BadInputError(f"{path}: not a kernel-gate record (expected a JSON object)")
    return obj


def write(host: Host, path: str, obj: Mapping[str, object]) -> None:
    host.makedirs(path.rsplit("/", 1)[0])
    host.write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def read_record(host: Host, state: StateDir, kver: str) -> GateRecord | None:
    """A kernel's record (its `drivers` checked an object: what `check` reads)."""
    rec = read(host, record_path(state, kver))
    if rec is not None and not isinstance(rec.get("drivers"), dict):
        raise BadInputError(f"{record_path(state, kver)}: field drivers: expected an object")
    return cast(Optional[GateRecord], rec)  # drivers checked above


def read_hold(host: Host, state: StateDir) -> Hold | None:
    """The hold, its backend, kernels and saved checked by type (what release reads)."""
    path = f"{state.path}/{KERNELS}/{HOLD}"
    hold = read(host, path)
    if hold is not None and (not isinstance(hold.get("backend"), str)
                             or not isinstance(hold.get("kernels"), list)
                             or not isinstance(hold.get("saved"), dict)):
        raise BadInputError(f"{path}: not a kernel-gate hold (backend, kernels, saved)")
    return cast(Optional[Hold], hold)  # checked above


# ------------------------------------------------------------------ what check shows
def _newer(a: str, b: str) -> bool:
    """True when kernel release `a` sorts after `b` (numbers compared as numbers)."""
    def key(s: str) -> list[tuple[int, tuple[int, str] | str]]:
        return [(0, digits_key(p)) if p.isascii() and p.isdigit() else (1, p)
                for p in re.findall(r"\d+|[^\d.+~-]+", s)]
    return key(a) > key(b)


def check_items(host: Host, state_dir: str, running: str | None) -> list[dict[str, str]]:
    """One item per managed driver and kernel, installed and not running, that is newer than
    `running` (as check read it) or has a record: {driver, kernel, status (ok|drift|unknown),
    reason}. The journal is read only when there is such a kernel (most checks: none)."""
    state = StateDir(host, state_dir)
    names = [f[:-len(".json")] for f in host.listdir(f"{state.path}/{KERNELS}")
             if f.endswith(".json") and f != HOLD]
    kernels = sorted({k for k in [*host.listdir(INSTALL_TREE), *names]
                      if k != running and (k in names or not running or _newer(k, running))
                      and installed(host, k)})
    if not kernels:
        return []
    try:
        drivers = [(d, p["version"]) for d, p in in_effect(state)]
        out = []
        for k in kernels if drivers else []:
            rec = read_record(host, state, k)
            for driver, version in drivers:
                got = rec["drivers"].get(driver) if rec else None
                out.append(_item(driver, version, k, got))
        return out
    finally:
        state.close()


def _item(driver: str, version: str, kver: str, got: object) -> dict[str, str]:
    head = f"{driver} ready for kernel {kver}"
    if not isinstance(got, dict) or got.get("version") != version:
        was = f" (gated for {got.get('version')})" if isinstance(got, dict) else ""
        return {"driver": driver, "kernel": kver, "status": "unknown",
                "reason": f"{head}: unknown: {driver} {version} not gated{was}; run "
                          f"hwmgr kernel-gate {kver}"}
    if got.get("ready") is True:
        return {"driver": driver, "kernel": kver, "status": "ok", "reason": f"{head}: yes"}
    return {"driver": driver, "kernel": kver, "status": "drift",
            "reason": f"{head}: no: {got.get('why')} (then: hwmgr kernel-gate {kver})"}
