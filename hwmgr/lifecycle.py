"""Driver upgrade and rollback as journaled transactions (design.md §7).

`plan_upgrade` / `plan_rollback` decide everything up front (versions, kernels, devices,
backups, refusals) without changing the host. `run_plan` turns a plan into a `Transaction`
whose steps come from `REGISTRY`, so `hwmgr recover` can rebuild them from the journal alone.
"""

from __future__ import annotations

import fnmatch
import json
import os
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from hwmgr import kmod, safety
from hwmgr.errors import HwmgrError, NotFoundError, NothingToDo, RefusedError
from hwmgr.host import Host
from hwmgr.state import StateDir
from hwmgr.transaction import Ctx, Step, Transaction, TxnResult, history

EXPECT_DIR = "expectations"
MIN_FREE = 64 << 20


@dataclass
class Settings:
    """Where hwmgr keeps its state and downloads, and how it may fetch."""

    state_dir: str = "/var/lib/hwmgr"
    cache_dir: str = "/var/cache/hwmgr"
    offline: bool = False
    mirror: str | None = None
    drivers_dir: str | None = None
    sign_key: str | None = None
    sign_cert: str | None = None


@dataclass
class Plan:
    """Everything an upgrade or rollback will do, decided before anything changes."""

    action: str
    driver: str
    to_version: str
    from_versions: dict[str, str | None]
    kernels: list[str]
    modules: list[str]
    devices: list[dict[str, Any]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    backups: list[dict[str, Any]] = field(default_factory=list)
    initramfs: dict[str, bool | None] = field(default_factory=dict)
    reboot_required: bool = False
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("params")
        return d


# ============================================================================ planning
def _affected_devices(host: Host, driver: str, modules: list[str]) -> list[dict[str, Any]]:
    from hwmgr.inventory import Inventory

    names = {driver, *modules}
    scan = Inventory(host).scan()
    ifs = {i["name"]: i for i in scan.interfaces}
    out = []
    for d in scan.devices:
        if d["driver"] in names or d["pci_driver"] in names:
            # link baseline and firmware: verify compares them after the reboot
            out.append({"address": d["address"], "vendor_id": d["vendor_id"],
                        "device_id": d["device_id"], "interfaces": d["interfaces"],
                        "driver_version": d["driver_version"],
                        "firmware_version": d["firmware_version"],
                        "links": {n: {"operstate": ifs[n]["operstate"],
                                      "speed_mbps": ifs[n]["speed_mbps"]}
                                  for n in d["interfaces"] if n in ifs}})
    return out


def _safety(host: Host, plan: Plan, settings: Settings, env: Mapping[str, str] | None,
            force: bool) -> None:
    """Add refusals for routes/SSH, Secure Boot and free space (nothing is changed)."""
    ifaces = {i for d in plan.devices for i in d["interfaces"]}
    critical = []
    for iface in sorted(ifaces & safety.default_route_interfaces(host)):
        critical.append(f"{iface} carries the default route")
    ssh_if = safety.ssh_interface(host, env)
    if ssh_if and ssh_if in ifaces:
        critical.append(f"{ssh_if} carries the current SSH session")
    for c in critical:
        msg = f"{plan.driver} drives {c}; a failed driver would cut this host off"
        (plan.warnings if force else plan.refusals).append(
            msg + (" (--force given)" if force else " (use --force after arranging console access)")
        )
    sb = safety.secure_boot(host)
    if sb and not safety.signing_key(host, settings.sign_key, settings.sign_cert):
        plan.refusals.append(
            "Secure Boot is enabled and no module-signing key is configured "
            f"({settings.sign_key or safety.DKMS_MOK_KEY}): the new module would not load"
        )
    for what, path in (("state", settings.state_dir), ("cache", settings.cache_dir)):
        free = host.free_bytes(path)
        if free is not None and free < MIN_FREE:
            plan.refusals.append(
                f"not enough space in the {what} dir {path}: {free >> 20} MiB free")


def _kernels(host: Host, requested: list[str] | None) -> list[str]:
    from hwmgr.dkms import kernels_with_headers

    if requested:
        return list(dict.fromkeys(requested))
    running = host.read_attr("/proc/sys/kernel/osrelease")
    ks = [running] if running else []
    return list(dict.fromkeys(ks + kernels_with_headers(host)))


def _check_headers(host: Host, kernels: list[str], plan: Plan) -> None:
    from hwmgr.dkms import Dkms

    d = Dkms(host)
    for k in kernels:
        try:
            d.check_headers(k)
        except HwmgrError as exc:
            plan.refusals.append(str(exc))


def _current(host: Host, modules: list[str], kernels: list[str]) -> dict[str, dict[str, Any]]:
    return {k: {m: kmod.resolve(host, m, k).as_dict() for m in modules} for k in kernels}


def plan_upgrade(
    host: Host, catalog: Any, driver: str, version: str, *, settings: Settings,
    kernels: list[str] | None = None, force: bool = False,
    env: Mapping[str, str] | None = None,
) -> Plan:
    """Decide an upgrade of `driver` to `version`; refusals say why it must not run."""
    from hwmgr.catalog import source_refusal
    from hwmgr.recipe import load_recipe

    entry = catalog.entry(driver)  # NotFoundError for an unknown driver
    recipe = load_recipe(driver, settings.drivers_dir)
    modules = recipe.module_names
    ks = _kernels(host, kernels)
    versions = entry.get("versions", {})
    info = versions.get(version)
    current = _current(host, modules, ks)
    plan = Plan("upgrade", driver, version,
                {k: current[k][modules[0]]["version"] for k in ks}, ks, modules)
    if info is None:
        listed = ", ".join(sorted(versions)) or "none"
        raise NotFoundError(f"{driver} {version} is not in the catalog (listed: {listed})")
    if info.get("status") == "known-bad":
        plan.refusals.append(f"{driver} {version} is known-bad: {info.get('reason', '')}".strip())
    if info.get("status") == "deprecated" and not force:
        plan.refusals.append(f"{driver} {version} is deprecated in the catalog (--force to use)")
    source = info.get("source")
    why = source_refusal(source)
    if why:
        plan.refusals.append(f"{driver} {version}: {why}")
    globs = info.get("kernels") or ["*"]
    for k in ks:
        if not any(fnmatch.fnmatchcase(k, g) for g in globs):
            plan.refusals.append(f"{driver} {version} is not for kernel {k} (catalog: {globs})")
        if not recipe.supports_kernel(k):
            plan.refusals.append(f"the {driver} recipe does not support kernel {k}")
    if not ks:
        plan.refusals.append("no target kernel: pass --kernel or install kernel headers")
    _check_headers(host, ks, plan)
    if ks and all(current[k][m]["version"] == version for k in ks for m in modules):
        raise NothingToDo(f"{driver} {version} is already installed for {', '.join(ks)}")
    plan.devices = _affected_devices(host, driver, modules)
    _safety(host, plan, settings, env, force)
    loaded = any(kmod.loaded_version(host, m)[0] for m in modules)
    plan.reboot_required = loaded or bool(plan.devices)
    for k in ks:
        plan.initramfs[k] = kmod.in_initramfs(host, modules, k) if recipe.initramfs else False
        for m in modules:
            cur = current[k][m]
            plan.backups.append({"kernel": k, "module": m, "path": cur["path"],
                                 "version": cur["version"], "sha256": cur["sha256"]})
    plan.steps = [
        f"fetch {source.get('url') if isinstance(source, dict) else '?'} (sha256 checked)",
        f"unpack the SRPM with rpm into {settings.state_dir}/work/",
        f"dkms add {driver}/{version}",
        *[f"dkms build {driver}/{version} for {k}" for k in ks],
        "back up the current module files into the state dir (kept for rollback)",
        *[f"dkms install {driver}/{version} for {k} + depmod" for k in ks],
        *[f"rebuild the initramfs for {k}" for k in ks if plan.initramfs.get(k)],
        f"arm post-reboot verification of {driver} {version}",
    ]
    plan.params = {
        "driver": driver, "version": version, "modules": modules, "kernels": ks,
        "source": source if isinstance(source, dict) else {},
        "initramfs": [k for k in ks if plan.initramfs.get(k)],
        "settings": asdict(settings),
        "devices": plan.devices,
        "from": {k: current[k] for k in ks},
    }
    return plan


def upgrade_chain(state: StateDir, driver: str) -> list[dict[str, Any]]:
    """Committed upgrades of `driver` still in effect, oldest first (rollbacks pop them)."""
    txns = [t for t in reversed(history(state, target=driver)) if t["state"] == "committed"]
    stack: list[dict[str, Any]] = []
    for t in txns:
        if t["kind"] == "upgrade":
            stack.append(t)
        elif t["kind"] == "rollback":
            undo_to = t["params"].get("undo_upgrade")
            while stack:
                top = stack.pop()
                if top["id"] == undo_to:
                    break
    return stack


def plan_rollback(
    host: Host, driver: str, *, settings: Settings, to: str | None = None,
    force: bool = False, env: Mapping[str, str] | None = None,
) -> Plan:
    """Decide a rollback: restore the module files an earlier upgrade backed up."""
    state = StateDir(host, settings.state_dir)
    if state.read_journal() is None:
        raise NothingToDo(f"no hwmgr upgrade of {driver} is recorded on this host")
    chain = upgrade_chain(state, driver)
    if not chain:
        raise NothingToDo(f"no hwmgr upgrade of {driver} is in effect: nothing to roll back")
    top = chain[-1]["params"]
    if to is None:
        target = chain[-1]
    else:
        target = None
        for t in reversed(chain):
            before = {v["version"] for k in t["params"]["from"].values() for v in k.values()}
            before |= {v["version"] or "inbox" for k in t["params"]["from"].values()
                       for v in k.values()} if t is chain[0] else set()
            if (to == "inbox" and t is chain[0]) or to in before:
                target = t
                break
        if target is None:
            raise NotFoundError(
                f"no recorded state of {driver} at version {to!r} to roll back to "
                f"(upgrades in effect: {', '.join(t['params']['version'] for t in chain)})"
            )
    tp = target["params"]
    modules, ks = tp["modules"], tp["kernels"]
    current = _current(host, modules, ks)
    remove = [t["params"]["version"] for t in chain[chain.index(target):]]
    plan = Plan("rollback", driver, "", {k: current[k][modules[0]]["version"] for k in ks},
                ks, modules)
    saved = next((st["data"].get("saved") for st in target["steps"] if st["name"] == "backup"),
                 None)
    if not saved:
        raise HwmgrError(f"transaction #{target['id']} recorded no backup of {driver}")
    dest = {k: saved[k] for k in ks}
    reinstall = next((st["data"].get("uninstalled") for st in target["steps"]
                      if st["name"] == "install"), None) or {}
    plan.to_version = dest[ks[0]][modules[0]]["version"] or "inbox"
    for k in ks:
        for m in modules:
            if current[k][m]["version"] != top["version"]:
                msg = (f"{m} for {k} is {current[k][m]['version'] or 'absent'}, not the "
                       f"{top['version']} hwmgr installed: something else changed it")
                (plan.warnings if force else plan.refusals).append(msg)
            plan.backups.append({"kernel": k, "module": m, "path": current[k][m]["path"],
                                 "version": current[k][m]["version"],
                                 "sha256": current[k][m]["sha256"]})
    plan.devices = _affected_devices(host, driver, modules)
    _safety(host, plan, settings, env, force)
    plan.reboot_required = any(kmod.loaded_version(host, m)[0] for m in modules) or bool(
        plan.devices)
    plan.initramfs = {k: k in tp.get("initramfs", []) for k in ks}
    plan.steps = [
        "back up the current module files into the state dir",
        *[f"dkms remove {driver}/{v}" for v in reversed(remove)],
        *[f"restore {d[m]['path'] or f'(no {m} module)'} for {k} (sha256 checked) + depmod"
          for k, d in dest.items() for m in modules],
        *[f"rebuild the initramfs for {k}" for k in ks if plan.initramfs.get(k)],
        f"arm post-reboot verification of {driver} {plan.to_version}",
    ]
    plan.params = {
        "driver": driver, "version": plan.to_version, "modules": modules, "kernels": ks,
        "remove_versions": remove, "undo_upgrade": target["id"], "restore": dest,
        "reinstall": reinstall,
        "initramfs": [k for k in ks if plan.initramfs.get(k)],
        "settings": asdict(settings), "devices": plan.devices,
    }
    return plan


# ============================================================================ steps
def _settings(ctx: Ctx) -> Settings:
    return Settings(**ctx.params["settings"])


def _dkms(ctx: Ctx) -> Any:
    from hwmgr.dkms import Dkms

    s = _settings(ctx)
    return Dkms(ctx.host, mok_key=s.sign_key, mok_cert=s.sign_cert)


def _work(ctx: Ctx) -> str:
    return f"{ctx.state.path}/work/{ctx.txn_id}"


def _expect_path(ctx: Ctx) -> str:
    return f"{ctx.state.path}/{EXPECT_DIR}/{ctx.params['driver']}.json"


def _fetch_do(ctx: Ctx) -> dict[str, Any]:
    from hwmgr.fetch import Source, fetch

    s = _settings(ctx)
    src = Source.from_catalog(ctx.params["source"])
    progress = ctx.ui.download(src.name(), src.size) if ctx.ui else None
    res = fetch(src, ctx.host.path(s.cache_dir), offline=s.offline,
                mirror=Path(s.mirror) if s.mirror else None, progress=progress)
    out = {"path": str(res.path), "sha256": res.sha256, "origin": res.origin,
           "seconds": round(res.seconds, 3)}
    key = ctx.params["source"].get("signing_key")
    if key:
        from hwmgr.signature import check_signature

        out["signed_by"] = check_signature(ctx.host, res.path, s.state_dir, key)
    return out


def _fetch_check(ctx: Ctx) -> bool:
    from hwmgr.state import sha256_file

    p = ctx.data.get("path")
    if ctx.params["source"].get("signing_key") and not ctx.data.get("signed_by"):
        return False  # a crash between download and signature check: check again
    return bool(p) and Path(p).is_file() and sha256_file(p) == ctx.params["source"]["sha256"]


def _unpack_do(ctx: Ctx) -> dict[str, Any]:
    from hwmgr.recipe import load_recipe
    from hwmgr.srpm import unpack_srpm

    recipe = load_recipe(ctx.params["driver"], _settings(ctx).drivers_dir)
    srpm = Path(ctx.output("fetch")["path"])
    ctx.host.remove_tree(_work(ctx))
    tree = unpack_srpm(ctx.host, srpm, ctx.host.makedirs(_work(ctx)), recipe,
                       ctx.params["version"])
    return {"tree": str(tree)}


def _unpack_undo(ctx: Ctx) -> None:
    ctx.host.remove_tree(_work(ctx))


def _add_do(ctx: Ctx) -> dict[str, Any]:
    from hwmgr.dkms import render_dkms_conf
    from hwmgr.recipe import load_recipe

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
        "format": "hwmgr-expectation", "version": 1,
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


def run_plan(host: Host, plan: Plan, settings: Settings, *, command: str,
             wait: bool | float = False, ui: Any = None) -> TxnResult:
    """Run a refusal-free plan as one transaction under the host lock."""
    if plan.refusals:
        raise RefusedError(plan.refusals[0])
    state = StateDir(host, settings.state_dir)
    with state.lock(command=command, wait=wait):
        for r in Transaction.recover(state, REGISTRY):
            if not r.closed:
                raise RefusedError(f"an earlier transaction #{r.id} is still open: {r.error}")
        return Transaction(state, REGISTRY, plan.action, plan.params,
                           target=plan.driver, command=command, ui=ui).run()


def recover(host: Host, settings: Settings, *, wait: bool | float = False) -> list[TxnResult]:
    """Finish or undo interrupted transactions (exactly old or new state afterwards)."""
    state = StateDir(host, settings.state_dir)
    if state.read_journal() is None:
        return []
    with state.lock(command="hwmgr recover", wait=wait):
        return Transaction.recover(state, REGISTRY)


def settings_from(args: Any, env: Mapping[str, str] | None = None) -> Settings:
    """Settings from CLI args, then HWMGR_* environment variables, then defaults."""
    env = env if env is not None else os.environ
    state = getattr(args, "state_dir", None) or env.get("HWMGR_STATE_DIR") or Settings.state_dir
    cache = getattr(args, "cache_dir", None) or env.get("HWMGR_CACHE_DIR") or Settings.cache_dir
    return Settings(
        state_dir=os.path.abspath(state),  # host paths are absolute; ./x means here
        cache_dir=os.path.abspath(cache),
        offline=bool(getattr(args, "offline", False)),
        mirror=getattr(args, "mirror", None),
        drivers_dir=env.get("HWMGR_DRIVERS_DIR"),
        sign_key=env.get("HWMGR_SIGN_KEY"),
        sign_cert=env.get("HWMGR_SIGN_CERT"),
    )
