"""Driver upgrade and rollback as journaled transactions (docs/architecture.md, "Transactions").

`plan_upgrade` / `plan_rollback` decide everything up front (versions, kernels, devices,
backups, refusals) without changing the host; the plan's step list is described by the
same `hwmgr.lifecycle.steps.REGISTRY` that runs. `run_plan` turns a plan into a
`Transaction` whose steps come from that registry, so `hwmgr recover` can rebuild them from
the journal alone. Configuration comes in as arguments; nothing here reads it by itself.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional, TypedDict

from hwmgr.catalog.verdict import source_refusal
from hwmgr.catalog.versions import parse
from hwmgr.config import Config
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_UNKNOWN,
    HwmgrError,
    NotFoundError,
    NothingToDo,
    RefusedError,
    UnknownError,
    VersionError,
)
from hwmgr.host import capture
from hwmgr.host.seam import Host
from hwmgr.inventory import guard as safety
from hwmgr.inventory.scan import Inventory
from hwmgr.lifecycle.builds import kmod
from hwmgr.lifecycle.builds.advice import not_in_catalog
from hwmgr.lifecycle.builds.dkms import Dkms
from hwmgr.lifecycle.builds.headers import headers_package, kernels_with_headers
from hwmgr.lifecycle.builds.kmod import ModuleFiles
from hwmgr.lifecycle.builds.pkgcheck import check_package
from hwmgr.lifecycle.builds.recipe import load_recipe
from hwmgr.lifecycle.params import DeviceRecord, PackageRef, RollbackParams, UpgradeParams
from hwmgr.lifecycle.record import UpgradeRecord, upgrade_chain
from hwmgr.lifecycle.steps import REGISTRY, describe
from hwmgr.transaction.engine import Registry, StepUI, Transaction
from hwmgr.transaction.pending import reboot_needed, waiting_for
from hwmgr.transaction.result import TxnResult
from hwmgr.transaction.state import StateDir

if TYPE_CHECKING:  # annotations only
    from hwmgr.catalog.load import Catalog

MIN_FREE = 64 << 20
MAX_VERSION_LEN = 64

# Refusals are listed in the order a human should fix them: the command line, then the
# catalog's verdict, then kernel support, then what a snapshot could not answer, then the
# host's own safety checks. The plan's exit code is the first refusal's.
INPUT, CATALOG, KERNEL, UNREAD, HOST = range(5)


class Refusal(str):
    """Why a plan must not run (a str, so it reads as its message) with its exit code."""

    code: int
    rank: int

    def __new__(cls, reason: str, code: int = EXIT_REFUSED, rank: int = HOST) -> Refusal:
        obj = super().__new__(cls, reason)
        obj.code, obj.rank = code, rank
        return obj

    def as_dict(self) -> RefusalRecord:
        return {"reason": str(self), "code": self.code}


class RefusalRecord(TypedDict):
    reason: str
    code: int  # the exit code it means


class KeptFile(TypedDict):
    """A module file the plan keeps a copy of before anything changes."""

    kernel: str
    module: str
    path: Optional[str]
    version: Optional[str]
    sha256: Optional[str]


@dataclass
class Plan:
    """Everything an upgrade or rollback will do, decided before anything changes."""

    action: str
    driver: str
    to_version: str
    from_versions: dict[str, str | None]
    kernels: list[str]
    modules: list[str]
    devices: list[DeviceRecord] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    backups: list[KeptFile] = field(default_factory=list)
    initramfs: dict[str, bool | None] = field(default_factory=dict)
    reboot_required: bool = False  # after this change (transaction.pending.reboot_needed)
    reboot_pending: list[str] = field(default_factory=list)  # now, for this driver: why
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    params: Mapping[str, object] = field(default_factory=dict)  # UpgradeParams, RollbackParams
    unread: list[str] = field(default_factory=list)  # kernels whose module a snapshot lacks

    def refuse(self, reason: str, code: int = EXIT_REFUSED, rank: int = HOST) -> None:
        """Add a refusal, keeping the list in fix-first order (stable within a rank)."""
        self.refusals.append(Refusal(reason, code, rank))
        self.refusals.sort(key=lambda r: getattr(r, "rank", HOST))

    @property
    def exit_code(self) -> int:
        """The first refusal's code (0 when nothing refuses)."""
        return getattr(self.refusals[0], "code", EXIT_REFUSED) if self.refusals else 0

    def as_dict(self) -> dict[str, Any]:
        refusals = [r if isinstance(r, Refusal) else Refusal(r) for r in self.refusals]
        d = asdict(self)
        d.pop("params")
        d["refusals"] = [r.as_dict() for r in refusals]
        return d


# ============================================================================ planning
def _affected_devices(host: Host, driver: str, modules: list[str]) -> list[DeviceRecord]:
    names = {driver, *modules}
    scan = Inventory(host).scan()
    ifs = {i.name: i for i in scan.interfaces}
    out: list[DeviceRecord] = []
    for d in scan.devices:
        if d.driver in names or d.pci_driver in names:
            # link baseline and firmware: verify compares them after the reboot
            out.append({"address": d.address, "vendor_id": d.vendor_id,
                        "device_id": d.device_id, "interfaces": list(d.interfaces),
                        "driver_version": d.driver_version,
                        "firmware_version": d.firmware_version,
                        "links": {n: {"operstate": ifs[n].operstate,
                                      "speed_mbps": ifs[n].speed_mbps}
                                  for n in d.interfaces if n in ifs}})
    return out


def _safety(host: Host, plan: Plan, settings: Config, env: Mapping[str, str] | None,
            force: bool, signed: bool | None = None) -> None:
    """Add refusals for routes/SSH, Secure Boot and free space (nothing is changed)."""
    ifaces = {i for d in plan.devices for i in d["interfaces"]}
    if ifaces and capture.lacks(host, capture.ROUTES):
        plan.refuse(capture.retake("routing table (/proc/net/route, /proc/net/ipv6_route)",
                                   host, capture.ROUTES),
                    EXIT_UNKNOWN, UNREAD)
    critical = []
    for iface in sorted(ifaces & safety.default_route_interfaces(host)):
        critical.append(f"{iface} carries the default route")
    ssh_if = safety.ssh_interface(host, env)
    if ssh_if and ssh_if in ifaces:
        critical.append(f"{ssh_if} carries the current SSH session")
    for c in critical:
        msg = f"{c}, and {plan.driver} drives it: a failed driver would cut this host off"
        if force:
            plan.warnings.append(msg + " (--force given)")
        else:
            plan.refuse(msg + " (use --force after arranging console access)")
    if capture.lacks(host, capture.SECURE_BOOT):
        plan.refuse(capture.retake("Secure Boot state (mokutil --sb-state, /sys/firmware/efi)",
                                   host, capture.SECURE_BOOT),
                    EXIT_UNKNOWN, UNREAD)
        sb: bool | None = False
    else:
        sb = safety.secure_boot(host)
    if sb and signed is False:
        plan.refuse("Secure Boot is enabled and the package's modules are unsigned: they "
                    "would not load (build it with --sign-key/--sign-cert)")
    elif sb and signed is None and not safety.signing_key(host, settings.sign_key,
                                                          settings.sign_cert):
        plan.refuse(
            "Secure Boot is enabled and no module-signing key is configured "
            f"({settings.sign_key or safety.DKMS_MOK_KEY}): the new module would not load"
        )
    for what, path in (("state", settings.state_dir), ("cache", settings.cache_dir)):
        free = host.free_bytes(path)
        if free is not None and free < MIN_FREE:
            plan.refuse(f"not enough space in the {what} dir {path}: {free >> 20} MiB free")


def running_kernel(host: Host) -> str | None:
    """The release the host runs (its /proc, else what the snapshot recorded)."""
    return host.read_attr("/proc/sys/kernel/osrelease") or host.meta.get("kernel") or None


def _kernels(host: Host, requested: list[str] | None) -> list[str]:
    """`--kernel` values, else every kernel with headers (a kernel installed but not booted
    included), else the running kernel: the plan then names the headers package it needs."""
    if requested:
        return list(dict.fromkeys(requested))
    found = kernels_with_headers(host)
    if found:
        return found
    running = running_kernel(host)
    return [running] if running else []


def _running_left_out(host: Host, kernels: list[str], plan: Plan) -> None:
    """Warn when the running kernel is not a target: it keeps its driver until a reboot."""
    running = running_kernel(host)
    if running and kernels and running not in kernels:
        plan.warnings.append(
            f"the running kernel {running} is not a target (it has no headers or --kernel left "
            f"it out): it keeps the current driver; install {headers_package(host, running)} "
            f"to build for it too")


def _check_headers(host: Host, kernels: list[str], plan: Plan) -> None:
    d = Dkms(host)
    unrecorded = capture.lacks(host, capture.HEADERS)
    for k in kernels:
        try:
            d.check_headers(k)
        except NotFoundError as exc:
            if unrecorded:  # an older snapshot: absence proves nothing
                plan.refuse(capture.retake(f"kernel headers listing (/lib/modules/{k}/build)",
                                           host, capture.HEADERS),
                            EXIT_UNKNOWN, UNREAD)
            else:
                plan.refuse(str(exc), EXIT_REFUSED, KERNEL)
        except HwmgrError as exc:
            plan.refuse(str(exc), exc.exit_code, INPUT)


def _current(host: Host, modules: list[str], kernels: list[str],
             plan: Plan | None = None) -> ModuleFiles:
    """What each module resolves to per kernel; with `plan`, what a snapshot lacks is a
    refusal (exit 11) and the module reads as unknown, instead of ending the plan."""
    out: ModuleFiles = {}
    for k in kernels:
        out[k] = {}
        for m in modules:
            try:
                out[k][m] = kmod.resolve(host, m, k).as_dict()
            except UnknownError as exc:
                if plan is None:
                    raise
                plan.refuse(str(exc), exc.exit_code, UNREAD)
                plan.unread.append(k)
                out[k][m] = kmod.ModuleFile(m, k).as_dict()
    return out


def _version_refusal(version: str, scheme: str) -> str | None:
    """Why `--to VERSION` is not a version string at all (too long, or unparseable)."""
    if len(version) > MAX_VERSION_LEN:
        return (f"--to {version[:24]!r}... is {len(version)} characters long; a version is at "
                f"most {MAX_VERSION_LEN}")
    try:
        parse(version, scheme)
    except VersionError as exc:
        return f"--to: {exc}"
    return None


def kernel_mismatch(driver: str, version: str, kernel: str, globs: list[str],
                    site_dir: str = "/etc/hwmgr/catalog.d") -> str:
    """Why a version does not apply to a kernel: the nearest declared kernel, and the
    site-file line that declares this kernel tested (a version's kernels merge by value
    across layers, so the line names only the new one)."""
    near = max(globs, key=lambda g: difflib.SequenceMatcher(None, g, kernel).ratio())
    layer = {"drivers": {driver: {"versions": {version: {"kernels": [kernel]}}}}}
    return (f"{driver} {version} is not for kernel {kernel} (catalog: {globs}; nearest "
            f"declared: {near}); if this site built and tested it on {kernel}, add to "
            f"{site_dir}/60-kernels.json: {json.dumps(layer)}")


def plan_upgrade(
    host: Host, catalog: Catalog, driver: str, version: str, *, settings: Config,
    kernels: list[str] | None = None, force: bool = False,
    env: Mapping[str, str] | None = None, package: str | None = None,
) -> Plan:
    """Decide an upgrade of `driver` to `version`; refusals say why it must not run. With
    `package` (a site-built binary package, hostile input) it is installed instead of
    building: checked against the catalog's `packages` and inspected first (pkgcheck)."""
    entry = catalog.entry(driver)  # NotFoundError for an unknown driver
    recipe = load_recipe(driver, settings.drivers_dir)
    modules = recipe.module_names
    versions = entry.get("versions", {})
    bad_version = _version_refusal(version, str(entry.get("version_scheme") or "rpm"))
    info = None if bad_version else versions.get(version)
    pkg, pkg_refusal = None, None
    if package is not None and info is not None:
        try:
            pkg = check_package(host, info, driver, version, package, kernels, modules)
        except HwmgrError as exc:
            pkg_refusal = Refusal(str(exc), exc.exit_code, INPUT)
    ks = _kernels(host, kernels or ([pkg.kernel] if pkg else None))
    shown = version if len(version) <= MAX_VERSION_LEN else f"{version[:24]}..."
    plan = Plan("upgrade", driver, shown, {}, ks, modules)
    current = _current(host, modules, ks, plan)
    plan.from_versions = {k: current[k][modules[0]]["version"] for k in ks}
    if pkg_refusal:
        plan.refuse(pkg_refusal, pkg_refusal.code, INPUT)
    if bad_version:
        plan.refuse(bad_version, EXIT_BAD_INPUT, INPUT)
    elif info is None:
        plan.refuse(not_in_catalog(driver, version, versions), EXIT_NOT_FOUND, CATALOG)
    status = info.get("status") if info else None
    if status == "known-bad":
        reason = info.get("reason", "") if info else ""
        plan.refuse(f"{driver} {version} is known-bad: {reason}".strip(), EXIT_REFUSED, CATALOG)
    if status == "deprecated" and not force:
        plan.refuse(f"{driver} {version} is deprecated in the catalog (--force to use)",
                    EXIT_REFUSED, CATALOG)
    source = info.get("source") if info else None
    why = source_refusal(source) if info and package is None else None
    if why:
        plan.refuse(f"{driver} {version}: {why}", EXIT_REFUSED, CATALOG)
    globs = (info.get("kernels") if info else None) or ["*"]
    for k in ks:
        if not any(fnmatch.fnmatchcase(k, g) for g in globs):
            plan.refuse(kernel_mismatch(driver, version, k, globs, settings.site_catalog_dir),
                        EXIT_REFUSED, KERNEL)
        if not recipe.supports_kernel(k):
            plan.refuse(f"the {driver} recipe does not support kernel {k}", EXIT_REFUSED, KERNEL)
    if not ks:
        plan.refuse("no target kernel: pass --kernel or install kernel headers",
                    EXIT_REFUSED, KERNEL)
    if package is None:  # a binary package needs no headers
        _check_headers(host, ks, plan)
        _running_left_out(host, ks, plan)
    fix_first = any(getattr(r, "rank", HOST) <= CATALOG for r in plan.refusals)
    if (ks and not fix_first and not plan.unread
            and all(current[k][m]["version"] == version for k in ks for m in modules)):
        raise NothingToDo(f"{driver} {version} is already installed for {', '.join(ks)}")
    plan.devices = _affected_devices(host, driver, modules)
    _safety(host, plan, settings, env, force,
            signed=None if package is None else bool(pkg and pkg.signed))
    plan.reboot_required = reboot_needed(host, modules, ks)
    plan.reboot_pending = waiting_for(host, settings.state_dir, driver)
    for k in ks:
        plan.initramfs[k] = kmod.in_initramfs(host, modules, k) if recipe.initramfs else False
        for m in modules:
            cur = current[k][m]
            plan.backups.append({"kernel": k, "module": m, "path": cur["path"],
                                 "version": cur["version"], "sha256": cur["sha256"]})
    params: UpgradeParams = {
        "driver": driver, "version": version, "modules": modules, "kernels": ks,
        "source": source if isinstance(source, dict) else {},
        "initramfs": [k for k in ks if plan.initramfs.get(k)],
        "devices": plan.devices,
        "from": {k: current[k] for k in ks},
        "drivers_dir": str(recipe.directory.parent), "cache_dir": settings.cache_dir,
        "offline": settings.offline, "mirror": settings.mirror,
        "sign_key": settings.sign_key, "sign_cert": settings.sign_cert,
        "build_timeout": settings.build_timeout, "needs_reboot": plan.reboot_required,
    }
    if package is not None:
        params["package"] = pkg.as_dict() if pkg else {"path": package}
    plan.params = params
    # no steps for a string that is not a version
    plan.steps = [] if bad_version else describe(REGISTRY["upgrade"](plan.params))
    return plan


def _rollback_target(chain: list[UpgradeRecord], driver: str, to: str) -> UpgradeRecord:
    """The newest upgrade in `chain` that replaced version `to` ("inbox": the first one)."""
    for t in reversed(chain):
        before = {v["version"] for k in t["params"]["from"].values() for v in k.values()}
        before |= {v["version"] or "inbox" for k in t["params"]["from"].values()
                   for v in k.values()} if t is chain[0] else set()
        if (to == "inbox" and t is chain[0]) or to in before:
            return t
    raise NotFoundError(
        f"no recorded state of {driver} at version {to!r} to roll back to "
        f"(upgrades in effect: {', '.join(t['params']['version'] for t in chain)})"
    )


def plan_rollback(
    host: Host, driver: str, *, settings: Config, to: str | None = None,
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
    target = chain[-1] if to is None else _rollback_target(chain, driver, to)
    tp = target["params"]
    modules, ks = tp["modules"], tp["kernels"]
    current = _current(host, modules, ks)
    undone = chain[chain.index(target):]
    remove = [t["params"]["version"] for t in undone if not t["params"].get("package")]
    packages: list[PackageRef] = [{"name": pkg["name"], "sha256": pkg["sha256"]}
                                  for t in undone if (pkg := t["params"].get("package"))]
    plan = Plan("rollback", driver, "", {k: current[k][modules[0]]["version"] for k in ks},
                ks, modules)
    saved = target["saved"]
    if not saved:
        raise HwmgrError(f"transaction #{target['id']} recorded no backup of {driver}")
    dest = {k: saved[k] for k in ks}
    reinstall = target["uninstalled"] or {}
    plan.to_version = dest[ks[0]][modules[0]]["version"] or "inbox"
    for k in ks:
        for m in modules:
            if current[k][m]["version"] != top["version"]:
                msg = (f"{m} for {k} is {current[k][m]['version'] or 'absent'}, not the "
                       f"{top['version']} hwmgr installed: something else changed it")
                if force:
                    plan.warnings.append(msg)
                else:
                    plan.refuse(msg, EXIT_REFUSED, CATALOG)
            plan.backups.append({"kernel": k, "module": m, "path": current[k][m]["path"],
                                 "version": current[k][m]["version"],
                                 "sha256": current[k][m]["sha256"]})
    # the devices as the upgrade found them: a broken driver may have left none bound now,
    # and the restored driver should bring back exactly those (verify checks them)
    plan.devices = tp.get("devices") or _affected_devices(host, driver, modules)
    _safety(host, plan, settings, env, force)
    plan.reboot_required = reboot_needed(host, modules, ks, dest)
    plan.reboot_pending = waiting_for(host, settings.state_dir, driver)
    plan.initramfs = {k: k in tp.get("initramfs", []) for k in ks}
    params: RollbackParams = {
        "driver": driver, "version": plan.to_version, "modules": modules, "kernels": ks,
        "remove_versions": remove, "remove_packages": packages,
        "undo_upgrade": target["id"], "restore": dest,
        "reinstall": reinstall, "needs_reboot": plan.reboot_required,
        "initramfs": [k for k in ks if plan.initramfs.get(k)],
        "devices": plan.devices,
        "sign_key": settings.sign_key, "sign_cert": settings.sign_cert,
        "build_timeout": settings.build_timeout,
    }
    plan.params = params
    plan.steps = describe(REGISTRY["rollback"](params))
    return plan


def run_plan(host: Host, plan: Plan, state_dir: str, *, command: str,
             wait: bool | float = False, ui: StepUI | None = None,
             results: Mapping[str, object] | None = None) -> TxnResult:
    """Run a refusal-free plan as one transaction under the host lock; `results` (e.g. the
    throughput measured before) are journaled with it."""
    if plan.refusals:
        raise HwmgrError(plan.refusals[0], exit_code=plan.exit_code)
    state = StateDir(host, state_dir)
    with state.lock(command=command, wait=wait):
        for r in Transaction.recover(state, REGISTRY):
            if not r.closed:
                raise RefusedError(f"an earlier transaction #{r.id} is still open: {r.error}")
        return Transaction(state, REGISTRY, plan.action, plan.params, target=plan.driver,
                           command=command, ui=ui, results=results).run()


def recover(host: Host, state_dir: str, *, wait: bool | float = False,
            extra: Registry | None = None) -> list[TxnResult]:
    """Finish or undo interrupted transactions (exactly old or new state afterwards);
    `extra` adds the step registries of other packages (apply / revert)."""
    state = StateDir(host, state_dir)
    if state.read_journal() is None:
        return []
    with state.lock(command="hwmgr recover", wait=wait):
        return Transaction.recover(state, {**REGISTRY, **(extra or {})})
