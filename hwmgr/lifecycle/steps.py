"""The journaled steps of driver upgrades and rollbacks, registered by transaction kind.

Each step has do / undo / check (docs/architecture.md, "Transactions"); `REGISTRY` lets
`hwmgr recover` rebuild the steps of an interrupted transaction from its journaled params alone.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

from hwmgr.config import Config
from hwmgr.errors import HwmgrError
from hwmgr.lifecycle import kmod
from hwmgr.lifecycle.expect import EXPECTATION_FORMAT
from hwmgr.transaction.engine import Ctx, Step


def _settings(ctx: Ctx) -> Config:
    return Config(**ctx.params["settings"])


def _dkms(ctx: Ctx) -> Any:
    from hwmgr.lifecycle.dkms import Dkms

    s = _settings(ctx)
    return Dkms(ctx.host, mok_key=s.sign_key, mok_cert=s.sign_cert)


def _work(ctx: Ctx) -> str:
    return f"{ctx.state.path}/work/{ctx.txn_id}"


def _expect_path(ctx: Ctx) -> str:
    return f"{ctx.state.expectations}/{ctx.params['driver']}.json"


def _fetch_do(ctx: Ctx) -> dict[str, Any]:
    from hwmgr.lifecycle.fetch import Source, fetch

    s = _settings(ctx)
    src = Source.from_catalog(ctx.params["source"])
    progress = ctx.ui.download(src.name(), src.size) if ctx.ui else None
    res = fetch(src, ctx.host.path(s.cache_dir), offline=s.offline,
                mirror=Path(s.mirror) if s.mirror else None, progress=progress)
    out = {"path": str(res.path), "sha256": res.sha256, "origin": res.origin,
           "seconds": round(res.seconds, 3)}
    key = ctx.params["source"].get("signing_key")
    if key:
        from hwmgr.lifecycle.signature import check_signature

        out["signed_by"] = check_signature(ctx.host, res.path, s.state_dir, key)
    return out


def _fetch_check(ctx: Ctx) -> bool:
    from hwmgr.host.hashing import sha256_file

    p = ctx.data.get("path")
    if ctx.params["source"].get("signing_key") and not ctx.data.get("signed_by"):
        return False  # a crash between download and signature check: check again
    return bool(p) and Path(p).is_file() and sha256_file(p) == ctx.params["source"]["sha256"]


def _unpack_do(ctx: Ctx) -> dict[str, Any]:
    from hwmgr.lifecycle.recipe import load_recipe
    from hwmgr.lifecycle.srpm import unpack_srpm

    recipe = load_recipe(ctx.params["driver"], _settings(ctx).drivers_dir)
    srpm = Path(ctx.output("fetch")["path"])
    ctx.host.remove_tree(_work(ctx))
    tree = unpack_srpm(ctx.host, srpm, ctx.host.makedirs(_work(ctx)), recipe,
                       ctx.params["version"])
    return {"tree": str(tree)}


def _unpack_undo(ctx: Ctx) -> None:
    ctx.host.remove_tree(_work(ctx))


def _add_do(ctx: Ctx) -> dict[str, Any]:
    from hwmgr.lifecycle.dkms import render_dkms_conf
    from hwmgr.lifecycle.recipe import load_recipe

    d, name, ver = _dkms(ctx), ctx.params["driver"], ctx.params["version"]
    if "pre_existing" not in ctx.data:
        ctx.save(pre_existing=d.is_added(name, ver))
    if ctx.data["pre_existing"]:
        return {}
    recipe = load_recipe(name, _settings(ctx).drivers_dir)
    d.add(ctx.output("unpack")["tree"], name, ver, dkms_conf=render_dkms_conf(recipe, ver),
          replace=True)
    return {}


def _add_check(ctx: Ctx) -> bool:
    return bool(_dkms(ctx).is_added(ctx.params["driver"], ctx.params["version"]))


def _add_undo(ctx: Ctx) -> None:
    if ctx.data.get("pre_existing"):
        return
    _dkms(ctx).remove(ctx.params["driver"], ctx.params["version"], "all", delete_source=True)


def _build_do(ctx: Ctx) -> dict[str, Any]:
    d, name, ver = _dkms(ctx), ctx.params["driver"], ctx.params["version"]
    built: dict[str, dict[str, str]] = {}
    for k in ctx.params["kernels"]:
        with ctx.ui.activity(f"dkms build {name}/{ver} for {k}") if ctx.ui else nullcontext():
            kos = d.build(name, ver, k)
        built[k] = {m: str(p) for m, p in kos.items()}
        ctx.save(built=built)
    return {"built": built}


def _build_check(ctx: Ctx) -> bool:
    d, name, ver = _dkms(ctx), ctx.params["driver"], ctx.params["version"]
    try:
        for k in ctx.params["kernels"]:
            for m in ctx.params["modules"]:
                d.built_ko(name, ver, k, m)
    except HwmgrError:
        return False
    return True


def _backup_do(ctx: Ctx) -> dict[str, Any]:
    saved: dict[str, dict[str, Any]] = {}
    for k in ctx.params["kernels"]:
        saved[k] = {}
        for m in ctx.params["modules"]:
            cur = kmod.resolve(ctx.host, m, k).as_dict()
            cur["backup"] = ctx.backup(cur["path"]) if cur["path"] else None
            saved[k][m] = cur
    return {"saved": saved}


def _noop(ctx: Ctx) -> None:
    """Nothing to undo here: an earlier step's undo removes what this one made."""


def _install_do(ctx: Ctx) -> dict[str, Any]:
    d, name, ver = _dkms(ctx), ctx.params["driver"], ctx.params["version"]
    after: dict[str, dict[str, Any]] = {}
    if "uninstalled" not in ctx.data:  # DKMS versions this install displaces, per kernel
        ctx.save(uninstalled={k: [e.version for e in d.status(name) if e.kernel == k
                                  and e.version != ver and e.state == "installed"]
                              for k in ctx.params["kernels"]})
    for k in ctx.params["kernels"]:
        for other in ctx.data["uninstalled"].get(k, []):
            # one DKMS version installed per kernel; uninstall keeps its build for rollback
            d.uninstall(name, other, k, depmod=False)
        # --force: the catalog, not DKMS's "is it newer" guess, decides what is installed
        d.install(name, ver, k, force=True)
        kmod.depmod(ctx.host, k)
        after[k] = {}
        for m in ctx.params["modules"]:
            got = kmod.resolve(ctx.host, m, k)
            if got.version != ver:
                raise HwmgrError(
                    f"after dkms install, {m} for {k} resolves to {got.describe()}, not {ver}"
                )
            after[k][m] = got.as_dict()
        ctx.save(after=after)
    return {"after": after}


def _install_check(ctx: Ctx) -> bool:
    ver = ctx.params["version"]
    return all(kmod.resolve(ctx.host, m, k).version == ver
               for k in ctx.params["kernels"] for m in ctx.params["modules"])


def _restore(ctx: Ctx, wanted: dict[str, dict[str, Any]], versions: list[str],
             reinstall: dict[str, list[str]]) -> None:
    """Remove DKMS `versions`, re-install the DKMS versions that were installed before
    (`reinstall`, so DKMS's own records match again), then make each module file exactly
    what `wanted` records (sha256 checked)."""
    d, name = _dkms(ctx), ctx.params["driver"]
    for k, mods in wanted.items():
        for v in versions:
            d.remove(name, v, k, depmod=False)
        for v in reinstall.get(k, []):
            if any(e.version == v and e.kernel == k for e in d.status(name)):
                d.install(name, v, k, force=True, depmod=False)
        for m, rec in mods.items():
            now = kmod.resolve(ctx.host, m, k)
            backup = rec.get("backup")
            if rec.get("path") and backup and backup.get("existed"):
                if now.path != rec["path"] or now.sha256 != rec["sha256"]:
                    ctx.state.restore_file(backup)
            elif not rec.get("path") and now.path and not now.builtin:
                ctx.host.remove(now.path)  # there was no such module before
        kmod.depmod(ctx.host, k)
        if k in ctx.params.get("initramfs", []):
            kmod.rebuild_initramfs(ctx.host, k)
    for v in versions:  # drop DKMS registrations no kernel uses any more
        if not any(e.version == v and e.kernel for e in d.status(name)):
            d.remove(name, v, "all", delete_source=True)


def _matches(ctx: Ctx, wanted: dict[str, dict[str, Any]]) -> bool:
    for k, mods in wanted.items():
        for m, rec in mods.items():
            now = kmod.resolve(ctx.host, m, k)
            if (now.path, now.sha256) != (rec.get("path"), rec.get("sha256")):
                return False
    return True


def _install_undo(ctx: Ctx) -> None:
    saved = ctx.output("backup").get("saved", {})
    _restore(ctx, saved, [ctx.params["version"]], ctx.data.get("uninstalled", {}))


def _initramfs_do(ctx: Ctx) -> dict[str, Any]:
    done = {k: kmod.rebuild_initramfs(ctx.host, k) for k in ctx.params.get("initramfs", [])}
    return {"rebuilt": done}


def _expectation(ctx: Ctx, version: str, files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": EXPECTATION_FORMAT, "version": 1,
        "driver": ctx.params["driver"], "expected_version": version,
        "modules": ctx.params["modules"], "txn": ctx.txn_id, "kind": ctx.kind,
        "kernels": {k: {m: {"path": r.get("path"), "version": r.get("version"),
                            "srcversion": r.get("srcversion"), "sha256": r.get("sha256")}
                        for m, r in mods.items()} for k, mods in files.items()},
        "devices": ctx.params.get("devices", []),
        "boot_attempts": 0,
    }


def _arm_do_with(files_of: Callable[[Ctx], dict[str, dict[str, Any]]]) -> Callable:
    def do(ctx: Ctx) -> dict[str, Any]:
        path = _expect_path(ctx)
        if "previous" not in ctx.data:
            prev = ctx.host.read_text(path)
            ctx.save(previous=prev)
        exp = _expectation(ctx, ctx.params["version"], files_of(ctx))
        ctx.host.write_bytes(path, (json.dumps(exp, indent=1) + "\n").encode())
        return {"expectation": path}

    return do


def _arm_check(ctx: Ctx) -> bool:
    text = ctx.host.read_text(_expect_path(ctx))
    try:
        doc = json.loads(text) if text else None
    except json.JSONDecodeError:
        return False
    return bool(doc) and doc.get("txn") == ctx.txn_id


def _arm_undo(ctx: Ctx) -> None:
    prev = ctx.data.get("previous")
    if prev:
        ctx.host.write_bytes(_expect_path(ctx), prev.encode())
    elif "previous" in ctx.data:
        ctx.host.remove(_expect_path(ctx))


def _resolved(ctx: Ctx) -> dict[str, dict[str, Any]]:
    """What the modules resolve to now: the truth to arm, even after a crash mid-step."""
    return {k: {m: kmod.resolve(ctx.host, m, k).as_dict() for m in ctx.params["modules"]}
            for k in ctx.params["kernels"]}


def upgrade_steps(params: dict[str, Any]) -> list[Step]:
    """fetch → unpack → dkms add → build → back up → install (commit) → initramfs → arm."""
    return [
        Step("fetch", _fetch_do, None, _fetch_check, description="download and verify"),
        Step("unpack", _unpack_do, _unpack_undo, lambda c: bool(c.data.get("tree"))
             and Path(c.data["tree"]).is_dir()),
        Step("dkms-add", _add_do, _add_undo, _add_check),
        Step("dkms-build", _build_do, _noop, _build_check),
        Step("backup", _backup_do, _noop, lambda c: "saved" in c.data),
        Step("install", _install_do, _install_undo, _install_check, commit_point=True),
        Step("initramfs", _initramfs_do, _noop, lambda c: "rebuilt" in c.data),
        Step("arm", _arm_do_with(_resolved), _arm_undo, _arm_check),
    ]


def _rb_restore_do(ctx: Ctx) -> dict[str, Any]:
    _restore(ctx, ctx.params["restore"], ctx.params["remove_versions"],
             ctx.params.get("reinstall", {}))
    if not _matches(ctx, ctx.params["restore"]):
        raise HwmgrError("after rollback the module files do not match the recorded ones")
    return {}


def _rb_restore_undo(ctx: Ctx) -> None:
    saved = ctx.output("backup").get("saved", {})
    for k, mods in saved.items():
        for rec in mods.values():
            if rec.get("backup") and rec["backup"].get("existed"):
                ctx.state.restore_file(rec["backup"])
        kmod.depmod(ctx.host, k)


def rollback_steps(params: dict[str, Any]) -> list[Step]:
    """back up current → remove DKMS versions + restore recorded files (commit) → arm."""
    return [
        Step("backup", _backup_do, _noop, lambda c: "saved" in c.data),
        Step("restore", _rb_restore_do, _rb_restore_undo,
             lambda c: _matches(c, c.params["restore"]), commit_point=True),
        Step("arm", _arm_do_with(lambda c: c.params["restore"]), _arm_undo, _arm_check),
    ]


REGISTRY: dict[str, Callable[[dict[str, Any]], list[Step]]] = {
    "upgrade": upgrade_steps,
    "rollback": rollback_steps,
}
