"""The journaled steps of driver upgrades and rollbacks, registered by transaction kind.

Each step has do / undo / check (docs/architecture.md, "Transactions") and a description made
from the same params it runs with: `hwmgr plan` prints those descriptions, so the plan lists
exactly the steps that run. `REGISTRY` lets `hwmgr recover` rebuild the steps of an
interrupted transaction from its journaled params alone; the params hold the concrete values
the steps need (`params.UpgradeParams`, `RollbackParams`; docs/formats.md, "Journal"), read
back through `params.upgrade` / `params.rollback` by every step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Mapping, Optional, TypedDict

from hwmgr.config import DEFAULT_BUILD_TIMEOUT
from hwmgr.errors import HwmgrError
from hwmgr.host.hashing import sha256_file
from hwmgr.lifecycle import params as journaled
from hwmgr.lifecycle import pkgsteps
from hwmgr.lifecycle.builds import initramfs, kmod
from hwmgr.lifecycle.builds.buildlog import BuildFailed, BuildUI, activity, keep_log
from hwmgr.lifecycle.builds.dkms import Dkms, render_dkms_conf
from hwmgr.lifecycle.builds.kmod import ModuleFiles
from hwmgr.lifecycle.builds.recipe import Recipe, load_recipe
from hwmgr.lifecycle.builds.tarball import unpack_source
from hwmgr.lifecycle.expect import EXPECTATION_FORMAT, Armed
from hwmgr.lifecycle.params import DriverParams, RollbackParams, UpgradeParams
from hwmgr.lifecycle.source.fetch import Source
from hwmgr.lifecycle.source.mirror import fetch_mirrored, source_mirrors
from hwmgr.lifecycle.source.signature import check_signature
from hwmgr.transaction.engine import Ctx, Step
from hwmgr.transaction.journal import damaged


class _Fetched(TypedDict):
    path: str
    sha256: str
    origin: str
    seconds: float


class FetchData(_Fetched, total=False):
    """What the fetch step journals (history --steps shows `origin`)."""

    signed_by: str  # the key that signed the package, when the catalog names one


class ArmData(TypedDict):
    expectation: str  # the expectation file's path


def _upgrade(ctx: Ctx) -> UpgradeParams:
    return journaled.upgrade(ctx.params)


def _rollback(ctx: Ctx) -> RollbackParams:
    return journaled.rollback(ctx.params)


def _driver(ctx: Ctx) -> DriverParams:
    """The params every driver change has (the steps an upgrade and a rollback share)."""
    return _upgrade(ctx) if ctx.kind == "upgrade" else _rollback(ctx)


def _ui(ctx: Ctx) -> BuildUI | None:
    """The progress reporter when it shows builds (`ui.lifecycle.ProgressUI`), else None."""
    return ctx.ui if isinstance(ctx.ui, BuildUI) else None


def _seconds(limit: object) -> float:
    """A journaled build limit (read back as hostile data): only a usable number counts."""
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) \
            and math.isfinite(limit) and limit > 0:
        return float(limit)
    return DEFAULT_BUILD_TIMEOUT


def _dkms(ctx: Ctx) -> Dkms:
    return Dkms(ctx.host, mok_key=journaled.text_setting(ctx.params, "sign_key"),
                mok_cert=journaled.text_setting(ctx.params, "sign_cert"),
                build_timeout=_seconds(journaled.setting(ctx.params, "build_timeout")))


def _recipe(ctx: Ctx) -> Recipe:
    return load_recipe(_upgrade(ctx)["driver"], journaled.text_setting(ctx.params, "drivers_dir"))


def _work(ctx: Ctx) -> str:
    return f"{ctx.state.path}/work/{ctx.txn_id}"


def _expect_path(ctx: Ctx) -> str:
    return f"{ctx.state.expectations}/{_driver(ctx)['driver']}.json"


def _fetch_do(ctx: Ctx) -> FetchData:
    p, ui = _upgrade(ctx), _ui(ctx)
    src = Source.from_catalog(p["source"])
    cache = journaled.text_setting(ctx.params, "cache_dir")
    if cache is None:  # never the current dir: a plan always journals one
        raise damaged("journaled upgrade params.cache_dir", "expected a string, got none")
    res = fetch_mirrored(ctx.host, src, cache,
                         offline=bool(journaled.setting(ctx.params, "offline")),
                         mirror=journaled.text_setting(ctx.params, "mirror"),
                         per_source=source_mirrors(p["source"]),
                         progress=ui.download(src.name(), src.size) if ui else None,
                         on_retry=ui.retry if ui else None,
                         who=f"{p['driver']} {p['version']}")
    out: FetchData = {"path": str(res.path), "sha256": res.sha256, "origin": res.origin,
                      "seconds": round(res.seconds, 3)}
    key = p["source"].get("signing_key")
    if isinstance(key, str) and key:
        out["signed_by"] = check_signature(ctx.host, res.path, ctx.state.path, key)
    return out


def _fetch_check(ctx: Ctx) -> bool:
    source = _upgrade(ctx)["source"]
    p = ctx.data.get("path")
    if source.get("signing_key") and not ctx.data.get("signed_by"):
        return False  # a crash between download and signature check: check again
    return isinstance(p, str) and Path(p).is_file() and sha256_file(p) == source["sha256"]


def _unpack_do(ctx: Ctx) -> dict[str, str]:
    recipe = _recipe(ctx)
    source = Path(ctx.output("fetch")["path"])  # an SRPM or a vendor tarball
    ctx.host.remove_tree(_work(ctx))
    tree = unpack_source(ctx.host, source, _work(ctx), recipe, _upgrade(ctx)["version"])
    return {"tree": str(tree)}


def _unpack_undo(ctx: Ctx) -> None:
    ctx.host.remove_tree(_work(ctx))


def _add_do(ctx: Ctx) -> None:
    p = _upgrade(ctx)
    d, name, ver = _dkms(ctx), p["driver"], p["version"]
    if "pre_existing" not in ctx.data:
        ctx.save(pre_existing=d.is_added(name, ver))
    if ctx.data["pre_existing"]:
        return
    recipe = _recipe(ctx)
    d.add(ctx.output("unpack")["tree"], name, ver, dkms_conf=render_dkms_conf(recipe, ver),
          replace=True)


def _add_check(ctx: Ctx) -> bool:
    p = _upgrade(ctx)
    return bool(_dkms(ctx).is_added(p["driver"], p["version"]))


def _add_undo(ctx: Ctx) -> None:
    if ctx.data.get("pre_existing"):
        return
    p = _upgrade(ctx)
    _dkms(ctx).remove(p["driver"], p["version"], "all", delete_source=True)


def _build_do(ctx: Ctx) -> dict[str, dict[str, dict[str, str]]]:
    p, ui = _upgrade(ctx), _ui(ctx)
    d, name, ver = _dkms(ctx), p["driver"], p["version"]
    built: dict[str, dict[str, str]] = {}
    for k in p["kernels"]:
        with activity(ui, f"dkms build {name}/{ver} for {k}"):
            try:
                kos = d.build(name, ver, k)
            except BuildFailed as exc:
                raise _keep_build_log(ctx, exc) from None
        built[k] = {m: str(path) for m, path in kos.items()}
        ctx.save(built=built)
    return {"built": built}


def _keep_build_log(ctx: Ctx, exc: BuildFailed) -> BuildFailed:
    """Copy the failed build's make.log into the state dir's logs/ before the undo deletes
    the DKMS tree, journal where it is (`history --steps` shows it), show its last lines;
    returns the failure to raise, naming the kept copy."""
    p, ui = _upgrade(ctx), _ui(ctx)
    dest = f"{ctx.state.path}/logs/{ctx.txn_id}-{p['driver']}-{p['version']}-{exc.kernel}.make.log"
    kept = keep_log(ctx.host, exc, dest)
    ctx.save(make_log=kept, **exc.as_dict())
    if ui is not None and exc.facts.tail:
        ui.build_log(kept or exc.log, list(exc.facts.tail))
    return exc.kept_at(kept) if kept else exc


def _build_check(ctx: Ctx) -> bool:
    p = _upgrade(ctx)
    d, name, ver = _dkms(ctx), p["driver"], p["version"]
    try:
        for k in p["kernels"]:
            for m in p["modules"]:
                d.built_ko(name, ver, k, m)
    except HwmgrError:
        return False
    return True


def _backup_do(ctx: Ctx) -> dict[str, ModuleFiles]:
    p = _driver(ctx)
    saved: ModuleFiles = {}
    for k in p["kernels"]:
        saved[k] = {}
        for m in p["modules"]:
            cur = kmod.resolve(ctx.host, m, k).as_dict()
            cur["backup"] = ctx.backup(cur["path"]) if cur["path"] else None
            saved[k][m] = cur
    return {"saved": saved}


def _noop(ctx: Ctx) -> None:
    """Nothing to undo here: an earlier step's undo removes what this one made."""


def _install_do(ctx: Ctx) -> dict[str, ModuleFiles]:
    p = _upgrade(ctx)
    d, name, ver = _dkms(ctx), p["driver"], p["version"]
    after: ModuleFiles = {}
    if "uninstalled" not in ctx.data:  # DKMS versions this install displaces, per kernel
        ctx.save(uninstalled={k: [e.version for e in d.status(name) if e.kernel == k
                                  and e.version != ver and e.state == "installed"]
                              for k in p["kernels"]})
    for k in p["kernels"]:
        for other in ctx.data["uninstalled"].get(k, []):
            # one DKMS version installed per kernel; uninstall keeps its build for rollback
            d.uninstall(name, other, k, depmod=False)
        # --force: the catalog, not DKMS's "is it newer" guess, decides what is installed
        d.install(name, ver, k, force=True)
        kmod.depmod(ctx.host, k)
        after[k] = {}
        for m in p["modules"]:
            got = kmod.resolve(ctx.host, m, k)
            if got.version != ver:
                raise HwmgrError(
                    f"after dkms install, {m} for {k} resolves to {got.describe()}, not {ver}"
                )
            after[k][m] = got.as_dict()
        ctx.save(after=after)
    return {"after": after}


def _install_check(ctx: Ctx) -> bool:
    p = _upgrade(ctx)
    return all(kmod.resolve(ctx.host, m, k).version == p["version"]
               for k in p["kernels"] for m in p["modules"])


def _restore(ctx: Ctx, wanted: ModuleFiles, versions: list[str],
             reinstall: Mapping[str, list[str]]) -> None:
    """Remove DKMS `versions`, re-install the DKMS versions that were installed before
    (`reinstall`, so DKMS's own records match again), then make each module file exactly
    what `wanted` records (sha256 checked)."""
    d, name = _dkms(ctx), _driver(ctx)["driver"]
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
        kmod.depmod(ctx.host, k)  # the initramfs is the "initramfs" step's (build.initramfs)
    for v in versions:  # drop DKMS registrations no kernel uses any more
        if not any(e.version == v and e.kernel for e in d.status(name)):
            d.remove(name, v, "all", delete_source=True)


def _matches(ctx: Ctx, wanted: ModuleFiles) -> bool:
    for k, mods in wanted.items():
        for m, rec in mods.items():
            now = kmod.resolve(ctx.host, m, k)
            if (now.path, now.sha256) != (rec.get("path"), rec.get("sha256")):
                return False
    return True


def _saved(ctx: Ctx) -> ModuleFiles:
    """What the backup step of this transaction saved (journaled by `_backup_do`)."""
    saved: ModuleFiles = ctx.output("backup").get("saved", {})
    return saved


def _install_undo(ctx: Ctx) -> None:
    _restore(ctx, _saved(ctx), [_upgrade(ctx)["version"]], ctx.data.get("uninstalled", {}))


def _expectation(ctx: Ctx, version: str, files: ModuleFiles) -> Armed:
    p = _driver(ctx)
    return {
        "format": EXPECTATION_FORMAT, "version": 1,
        "driver": p["driver"], "expected_version": version,
        "modules": p["modules"], "txn": ctx.txn_id, "kind": ctx.kind,
        "kernels": {k: {m: {"path": r.get("path"), "version": r.get("version"),
                            "srcversion": r.get("srcversion"), "sha256": r.get("sha256")}
                        for m, r in mods.items()} for k, mods in files.items()},
        "devices": p.get("devices", []),
        "boot_attempts": 0,
    }


def _arm_do_with(files_of: Callable[[Ctx], ModuleFiles]) -> Callable[[Ctx], ArmData]:
    def do(ctx: Ctx) -> ArmData:
        path = _expect_path(ctx)
        if "previous" not in ctx.data:
            prev = ctx.host.read_text(path)
            ctx.save(previous=prev)
        exp = _expectation(ctx, _driver(ctx)["version"], files_of(ctx))
        ctx.host.write_bytes(path, (json.dumps(exp, indent=1) + "\n").encode())
        return {"expectation": path}

    return do


def _arm_check(ctx: Ctx) -> bool:
    text = ctx.host.read_text(_expect_path(ctx))
    try:
        doc = json.loads(text or "null")
    except json.JSONDecodeError:
        return False
    return isinstance(doc, dict) and doc.get("txn") == ctx.txn_id


def _arm_undo(ctx: Ctx) -> None:
    prev = ctx.data.get("previous")
    if prev:
        ctx.host.write_bytes(_expect_path(ctx), prev.encode())
    elif "previous" in ctx.data:
        ctx.host.remove(_expect_path(ctx))


def _resolved(ctx: Ctx) -> ModuleFiles:
    """What the modules resolve to now: the truth to arm, even after a crash mid-step."""
    p = _upgrade(ctx)
    return {k: {m: kmod.resolve(ctx.host, m, k).as_dict() for m in p["modules"]}
            for k in p["kernels"]}


def _kernels(names: Optional[list[str]]) -> str:
    return ", ".join(names or []) or "no kernel"


def upgrade_steps(raw: Mapping[str, object]) -> list[Step]:
    """fetch → unpack → dkms add → build → back up → install (commit) → initramfs → arm;
    from a binary package (params["package"]) the steps of lifecycle.pkgsteps."""
    params = journaled.upgrade(raw)
    dv = f"{params['driver']}/{params['version']}"
    src = params["source"]
    get = (f"download {src['url']}" if src.get("url") else
           f"take {src.get('filename', '?')} from the cache or a mirror (no URL)")
    ks = _kernels(params["kernels"])
    image = (f"keep the initramfs of {_kernels(params.get('initramfs'))} in the state dir, "
             "rebuild it and check it holds the new module"
             if params.get("initramfs") else "none to rebuild (no initramfs holds it)")
    backup = Step("backup", _backup_do, _noop, lambda c: "saved" in c.data,
                  description="back up the current module files into the state dir "
                  "(kept for rollback)")
    rebuild = Step("initramfs", initramfs.rebuild_do, initramfs.restore_undo,
                   initramfs.rebuilt_check, description=image)
    arm = Step("arm", _arm_do_with(_resolved), _arm_undo, _arm_check,
               description=f"arm post-reboot verification of {params['driver']} "
               f"{params['version']}")
    package = params.get("package")
    if package:  # a site-built binary package instead of a DKMS build
        return pkgsteps.package_steps(params, package, backup=backup, image=rebuild, arm=arm,
                                      restore=lambda c, saved: _restore(c, saved, [], {}))
    return [
        Step("fetch", _fetch_do, None, _fetch_check,
             description=f"{get} (sha256 checked; kept on rollback)"),
        Step("unpack", _unpack_do, _unpack_undo, lambda c: bool(c.data.get("tree"))
             and Path(c.data["tree"]).is_dir(),
             description="unpack the vendor source (an SRPM with rpm, or the vendor's "
                         "tarball) into the state dir's work/"),
        Step("dkms-add", _add_do, _add_undo, _add_check, description=f"dkms add {dv}"),
        Step("dkms-build", _build_do, _noop, _build_check,
             description=f"dkms build {dv} for {ks}"),
        backup,
        Step("install", _install_do, _install_undo, _install_check, commit_point=True,
             description=f"dkms install {dv} for {ks} + depmod"),
        rebuild,
        arm,
    ]


def _rb_restore_do(ctx: Ctx) -> None:
    p = _rollback(ctx)
    pkgsteps.remove_packages(ctx, p.get("remove_packages") or [])  # their files go with them
    _restore(ctx, p["restore"], p["remove_versions"], p.get("reinstall", {}))
    if not _matches(ctx, p["restore"]):
        raise HwmgrError("after rollback the module files do not match the recorded ones")


def _rb_restore_undo(ctx: Ctx) -> None:
    pkgsteps.reinstall_packages(ctx, _rollback(ctx).get("remove_packages") or [])
    for k, mods in _saved(ctx).items():
        for rec in mods.values():
            backup = rec.get("backup")
            if backup and backup.get("existed"):
                ctx.state.restore_file(backup)
        kmod.depmod(ctx.host, k)


def rollback_steps(raw: Mapping[str, object]) -> list[Step]:
    """back up current → remove DKMS versions + restore recorded files (commit) → arm."""
    params = journaled.rollback(raw)
    d, mods = params["driver"], params["modules"]
    restore = [*(f"dpkg --purge {p['name']}" for p in params.get("remove_packages") or []),
               *(f"dkms remove {d}/{v}" for v in reversed(params["remove_versions"])),
               *(f"restore {files[m]['path'] or f'(no {m} module)'} for {k}"
                 for k, files in params["restore"].items() for m in mods)]
    if restore:
        restore[-1] += " (sha256 checked) + depmod"
    # a storage driver's initramfs: its own step, so undo puts the image back byte for byte
    images = [Step("initramfs", initramfs.rollback_do, initramfs.restore_undo,
                   initramfs.rebuilt_check, description=(
                       f"keep the initramfs of {_kernels(params.get('initramfs'))}, put back the "
                       f"one transaction #{params['undo_upgrade']} kept (sha256 checked; "
                       "rebuilt instead if something else changed it since)"))
              ] if params.get("initramfs") else []
    return [
        Step("backup", _backup_do, _noop, lambda c: "saved" in c.data,
             description="back up the current module files into the state dir"),
        Step("restore", _rb_restore_do, _rb_restore_undo,
             lambda c: _matches(c, _rollback(c)["restore"]), commit_point=True,
             description="; ".join(restore)),
        *images,
        Step("arm", _arm_do_with(lambda c: _rollback(c)["restore"]), _arm_undo, _arm_check,
             description=f"arm post-reboot verification of {d} {params['version']}"),
    ]


def describe(steps: list[Step]) -> list[str]:
    """The plan's step list: each step that will run, by name, with what it does."""
    return [f"{s.name}: {s.description}" for s in steps]


REGISTRY: dict[str, Callable[[Mapping[str, object]], list[Step]]] = {
    "upgrade": upgrade_steps,
    "rollback": rollback_steps,
}
