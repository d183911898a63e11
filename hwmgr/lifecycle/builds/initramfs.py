"""The initramfs around a storage-driver change: keep the image, rebuild it, check, restore.

A RAID or HBA driver usually carries the root filesystem, so the kernel loads it from the
initramfs, not from /lib/modules: installing a new .ko changes nothing at boot until the
image is rebuilt. For each kernel whose initramfs held the module when the change was
planned (`params["initramfs"]`), the step keeps a byte-exact copy of the current image in
the state dir's backups (journaled before anything changes), rebuilds it with the host's
own tool (`kmod.rebuild_initramfs`: update-initramfs or dracut) and checks that the image
holds the module file modprobe now resolves to. Undo puts the kept image back byte for
byte. A rollback restores the image the undone upgrade kept, when the image is still the
one hwmgr built since (otherwise something else rebuilt it, and the tool rebuilds it again
rather than throw that change away).
"""

from __future__ import annotations

from typing import Mapping, Optional, TypedDict

from hwmgr.errors import HwmgrError
from hwmgr.host.hashing import sha256_file
from hwmgr.lifecycle.builds import kmod
from hwmgr.transaction.engine import Ctx
from hwmgr.transaction.state import BackupRecord, backup_record


class Rebuilt(TypedDict):
    """One kernel's image after the step: how it came to be and what it must still be."""

    image: str
    how: str  # the tool that rebuilt it, or "restored"
    sha256: Optional[str]
    holds: dict[str, str]  # module -> the file the image holds


class ImagePlan(TypedDict):
    """A rollback's decision for one kernel's image, journaled before anything changes."""

    image: str
    restore: Optional[BackupRecord]  # the undone upgrade's copy, None: rebuild it


def _names(ctx: Ctx, key: str) -> list[str]:
    """A list of names in the journaled params ("modules", "initramfs"); none when absent."""
    value = ctx.params.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _image(ctx: Ctx, kver: str) -> str:
    """The kernel's initramfs path; an error when the planned image has disappeared."""
    found = kmod.initramfs_image(ctx.host, kver)
    if found is None:
        raise HwmgrError(f"the initramfs of {kver} (planned to be rebuilt) is gone from /boot")
    return found[0]


def _sha(ctx: Ctx, path: str) -> str | None:
    real = ctx.host.path(path)
    return sha256_file(real) if real.is_file() else None


def _check_holds(ctx: Ctx, kver: str) -> dict[str, str]:
    """Each module's file as modprobe resolves it for `kver`, checked present in the image."""
    held: dict[str, str] = {}
    for m in _names(ctx, "modules"):
        mod = kmod.resolve(ctx.host, m, kver)
        if mod.builtin or not mod.path:
            continue  # nothing of it to carry (built in, or no module now: an inbox-less undo)
        listing = kmod.initramfs_files(ctx.host, kver)
        if listing is None:
            raise HwmgrError(f"cannot list the initramfs of {kver} to check it holds {m}")
        if not kmod.image_holds(listing, mod.path):
            raise HwmgrError(f"the rebuilt initramfs of {kver} does not hold {mod.path} "
                             f"({m} {mod.version or ''}): the old image is put back".rstrip())
        held[m] = mod.path
    return held


def _record(ctx: Ctx, kver: str, path: str, how: str) -> Rebuilt:
    return {"image": path, "how": how, "sha256": _sha(ctx, path),
            "holds": _check_holds(ctx, kver)}


def _rebuilt(ctx: Ctx) -> dict[str, Rebuilt]:
    """What this step journaled so far (a re-run after a crash goes on from there)."""
    done: dict[str, Rebuilt] = dict(ctx.data.get("rebuilt") or {})
    return done


def rebuild_do(ctx: Ctx) -> dict[str, dict[str, Rebuilt]]:
    """Keep each planned kernel's image, rebuild it with the host's tool, check it."""
    done = _rebuilt(ctx)
    for k in _names(ctx, "initramfs"):
        path = _image(ctx, k)
        ctx.backup(path)  # idempotent: a re-run after a crash keeps the first copy
        tool = kmod.rebuild_initramfs(ctx.host, k)
        done[k] = _record(ctx, k, path, tool)
        ctx.save(rebuilt=done)
    return {"rebuilt": done}


def rebuilt_check(ctx: Ctx) -> bool:
    """Every planned image is the one this step built (a crash mid-step re-runs it)."""
    done = _rebuilt(ctx)
    return all(k in done and _sha(ctx, done[k]["image"]) == done[k]["sha256"]
               for k in _names(ctx, "initramfs"))


def restore_undo(ctx: Ctx) -> None:
    """Put every image this step kept back, byte for byte (sha256 checked)."""
    for key, record in ctx.data.items():
        if key.startswith("backup:"):
            ctx.state.restore_file(backup_record(record, f"step initramfs {key}"))


def _kept_by(txn: Mapping[str, object]) -> tuple[dict[str, BackupRecord], dict[str, Rebuilt]]:
    """(backup records by image path, rebuilt records by kernel) of a transaction's step
    (a journal row: `Journal.get`)."""
    steps = txn.get("steps")
    for st in steps if isinstance(steps, list) else []:
        if isinstance(st, dict) and st.get("name") == "initramfs":
            data = st.get("data")
            if not isinstance(data, dict):
                break
            kept = {k[len("backup:"):]: backup_record(v, f"transaction {txn.get('id')} {k}")
                    for k, v in data.items() if k.startswith("backup:")}
            rebuilt: dict[str, Rebuilt] = data.get("rebuilt") or {}
            return kept, rebuilt
    return {}, {}


def _ours(ctx: Ctx, kver: str, sha: str | None) -> bool:
    """True when `sha` is an image an upgrade of this driver built since the undone one."""
    journal = ctx.state.journal()
    for t in journal.transactions(kind="upgrade", target=ctx.params["driver"]):
        if t["id"] >= ctx.params["undo_upgrade"]:
            rec = _kept_by(t)[1].get(kver)
            if rec and rec.get("sha256") == sha:
                return True
    return False


def rollback_do(ctx: Ctx) -> dict[str, dict[str, Rebuilt]]:
    """Keep each image, then put back the one the undone upgrade kept (or rebuild)."""
    if "plan" not in ctx.data:  # decided once, journaled before anything changes
        kept, _ = _kept_by(ctx.state.journal().get(ctx.params["undo_upgrade"]))
        plan: dict[str, ImagePlan] = {}
        for k in _names(ctx, "initramfs"):
            path = _image(ctx, k)
            old = kept.get(path)
            ok = old is not None and old.get("existed") and _ours(ctx, k, _sha(ctx, path))
            plan[k] = {"image": path, "restore": old if ok else None}
        ctx.save(plan=plan)
    done = _rebuilt(ctx)
    planned: dict[str, ImagePlan] = ctx.data["plan"]
    for k, what in planned.items():
        ctx.backup(what["image"])
        if what["restore"]:
            ctx.state.restore_file(what["restore"])
            done[k] = _record(ctx, k, what["image"], "restored")
        else:
            ctx.log(f"the initramfs of {k} changed since hwmgr built it: rebuilding it")
            done[k] = _record(ctx, k, what["image"], kmod.rebuild_initramfs(ctx.host, k))
        ctx.save(rebuilt=done)
    return {"rebuilt": done}
