"""The kernel gate: every hwmgr-managed driver built, installed and checked for a newly
installed kernel before that kernel may become the boot default.

A driver is managed when the journal has an upgrade of it still in effect (`upgrade_chain`:
a rollback to inbox ends it). For each one, `gate_driver` builds the same version with DKMS
for KVER only, installs it for KVER only, runs depmod for KVER, rebuilds KVER's initramfs for
a storage driver, and checks what can be checked without booting: `modinfo -k KVER` (vermagic,
version, signer), `depmod -e -E Module.symvers` (no unknown symbol) and the initramfs listing.
The outcome is kept per kernel in `<state>/kernels/KVER.json`, which `check` reads; the boot
default is held (lifecycle/gate/bootloader.py) while a driver is not ready, the hold kept in
`<state>/kernels/hold.json` so a later passing run restores exactly what was there.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

from hwmgr.config import DEFAULT_BUILD_TIMEOUT
from hwmgr.errors import BadInputError, HwmgrError, NotFoundError
from hwmgr.host.seam import Host
from hwmgr.inventory import guard
from hwmgr.lifecycle import INSTALL_TREE
from hwmgr.lifecycle.builds import kmod
from hwmgr.lifecycle.builds.buildlog import BuildFailed, keep_log
from hwmgr.lifecycle.builds.dkms import Dkms
from hwmgr.lifecycle.builds.recipe import load_recipe
from hwmgr.lifecycle.expect import parse_expectation
from hwmgr.lifecycle.gate import bootloader, gaterecord
from hwmgr.lifecycle.gate.gatesteps import GateSteps
from hwmgr.transaction.journal import utcnow
from hwmgr.transaction.state import StateDir

QUICK = 120.0


@dataclass
class Managed:
    """A driver hwmgr installed and still manages: what the gate rebuilds."""

    driver: str
    version: str
    modules: list[str]
    storage: bool
    sign_key: str | None = None
    sign_cert: str | None = None


def managed_drivers(state: StateDir) -> list[Managed]:
    """The drivers an upgrade still in effect installed (`gaterecord.in_effect`), each with
    whether its recipe says it is a storage driver (initramfs)."""
    out = []
    for driver, p in gaterecord.in_effect(state):
        try:
            storage = load_recipe(driver, p.get("drivers_dir")).initramfs
        except HwmgrError:  # the recipe moved: the upgrade's own initramfs decision stands
            storage = bool(p.get("initramfs"))
        out.append(Managed(driver, p["version"], list(p["modules"]), bool(storage),
                           p.get("sign_key"), p.get("sign_cert")))
    return out


@dataclass
class Readiness:
    """One driver's outcome for one kernel."""

    driver: str
    version: str
    ready: bool
    why: str
    facts: dict[str, object] = field(default_factory=dict)  # what was checked (per module)


def _modinfo(host: Host, kver: str, module: str, fld: str) -> str:
    """One `modinfo -k KVER -F FIELD` value of the module modprobe resolves ('' if none)."""
    argv = ["modinfo", *kmod.base_args(host), "-k", kver, "-F", fld, module]
    res = host.run(argv, timeout=QUICK)
    return res.stdout.strip() if res.ok else ""


def _unknown_symbols(host: Host, kver: str, kos: list[str]) -> tuple[str | None, list[str]]:
    """(the Module.symvers used, depmod's complaints about `kos`): `depmod -n -e -E` resolves
    every symbol against the kernel's own export list without writing anything."""
    symvers = f"{INSTALL_TREE}/{kver}/build/Module.symvers"
    if not host.exists(symvers):
        return None, []
    argv = ["depmod", *kmod.base_args(host), "-n", "-e", "-E", str(host.path(symvers)), kver]
    res = host.run(argv, timeout=QUICK)
    if not res.available:
        raise HwmgrError("depmod is not available on this machine: install the 'kmod' package")
    names = tuple("/" + ko.rsplit("/", 1)[-1] for ko in kos)  # depmod names each by path
    bad = [ln.strip() for ln in res.stderr.splitlines()
           if any(n in ln for n in names) and re.search(r"unknown symbol|disagrees", ln)]
    return symvers, bad


def _signing(host: Host, kver: str, module: str, secure_boot: bool | None) -> tuple[str, bool]:
    """(what the signature state is, whether it is acceptable): DKMS signs on its own when
    it has a key (its mok_signing_key); Secure Boot on and no signature is not ready."""
    signer = _modinfo(host, kver, module, "signer")
    if signer:
        return f"signed by {signer}", True
    if secure_boot:
        return ("unsigned while Secure Boot is on: the module would not load (give DKMS a "
                "module-signing key: HWMGR_SIGN_KEY/HWMGR_SIGN_CERT at upgrade, or "
                f"{guard.DKMS_MOK_KEY})"), False
    if secure_boot is False:
        return "unsigned: Secure Boot off", True
    return "unsigned: Secure Boot state unknown (mokutil and efivars unreadable)", True


def _check(host: Host, m: Managed, kver: str, kos: dict[str, str],
           secure_boot: bool | None) -> tuple[dict[str, object], str | None]:
    """What modinfo, depmod and the initramfs say for KVER; (facts, why not ready or None)."""
    facts: dict[str, object] = {}
    paths: dict[str, str] = {}  # each module's file, once modinfo found one
    for mod in m.modules:
        got = kmod.resolve(host, mod, kver)
        magic = (got.vermagic or "").split()
        sign, sign_ok = _signing(host, kver, mod, secure_boot)
        facts[mod] = {"path": got.path, "version": got.version, "srcversion": got.srcversion,
                      "sha256": got.sha256, "vermagic": got.vermagic, "signature": sign}
        if got.path is None:
            return facts, f"modinfo -k {kver} {mod} finds no module"
        paths[mod] = got.path
        if got.version != m.version:
            return facts, f"modinfo -k {kver} {mod} says version {got.version}, not {m.version}"
        if magic[:1] != [kver]:
            return facts, f"{got.path} vermagic is {got.vermagic!r}, not for {kver}"
        if not sign_ok:
            return facts, f"{mod}: {sign}"
    symvers, bad = _unknown_symbols(host, kver, list(kos.values()))
    facts["symvers"] = symvers or "none (no Module.symvers in the headers: not checked)"
    if bad:
        return facts, f"depmod -e -E {symvers}: {bad[0]}"
    if m.storage:
        listing = kmod.initramfs_files(host, kver)
        facts["initramfs"] = kmod.initramfs_image(host, kver)
        for mod in m.modules:
            path = paths[mod]
            if listing is None or not kmod.image_holds(listing, path):
                return facts, f"the initramfs of {kver} does not hold {path}"
    return facts, None


def gate_driver(host: Host, state: StateDir, m: Managed, kver: str,
                secure_boot: bool | None, dkms: Dkms | None = None,
                build_timeout: float = DEFAULT_BUILD_TIMEOUT,
                steps: GateSteps | None = None) -> Readiness:
    """Build, install (KVER only), depmod, initramfs and check one managed driver; each a
    step of `steps`, whose signal stops it and undoes a half-done install
    (`_settle`)."""
    d = dkms or Dkms(host, mok_key=m.sign_key, mok_cert=m.sign_cert,
                     build_timeout=build_timeout)
    st = steps or GateSteps()

    def no(why: str, **facts: object) -> Readiness:
        return Readiness(m.driver, m.version, False, why, facts)

    def stopped() -> Readiness | None:
        if not st.stopped:
            return None
        at = st.step
        st.settle()
        _settle(host, d, m, kver, at)
        return no(st.why())

    try:
        d.check_headers(kver)
    except NotFoundError as exc:
        return no(exc.message)
    if not d.is_added(m.driver, m.version):
        src = d.source_dir(m.driver, m.version)
        return no(f"DKMS has no {m.driver}/{m.version} (its source {src} is gone): run "
                  f"hwmgr upgrade {m.driver} --to {m.version} again")
    if not st.start("dkms-build"):
        return stopped() or no(st.why())
    try:
        d.build(m.driver, m.version, kver)
    except BuildFailed as exc:
        if st.stopped:
            return stopped() or no(st.why())
        dest = f"{state.path}/logs/gate-{kver}-{m.driver}-{m.version}.make.log"
        kept = keep_log(host, exc, dest)
        exc = exc.kept_at(kept) if kept else exc
        return no(exc.message, make_line=exc.make_line, first_error=exc.facts.first_error,
                  make_log=kept or exc.log)
    except HwmgrError as exc:
        return stopped() or no(exc.message)
    try:
        if not st.start("dkms-install"):
            return stopped() or no(st.why())
        for e in d.status(m.driver):  # one DKMS version per kernel, as upgrade keeps it
            if e.kernel == kver and e.version != m.version and e.state == "installed":
                d.uninstall(m.driver, e.version, kver, depmod=False)
        kos = {mod: str(p) for mod, p in d.install(m.driver, m.version, kver,
                                                   force=True).items()}
        if not st.start("depmod"):
            return stopped() or no(st.why())
        kmod.depmod(host, kver)
        if m.storage:
            if not st.start("initramfs"):
                return stopped() or no(st.why())
            kmod.rebuild_initramfs(host, kver)
    except HwmgrError as exc:
        return stopped() or no(exc.message)
    if not st.start("check"):
        return stopped() or no(st.why())
    facts, why = _check(host, m, kver, kos, secure_boot)
    halted = stopped()
    if halted:
        return halted
    if why:
        return no(why, **facts)
    return Readiness(m.driver, m.version, True, "built, installed and checked", facts)


def _settle(host: Host, d: Dkms, m: Managed, kver: str, step: str) -> None:
    """After a signal at `step`: a stopped `dkms build` registered nothing for KVER (DKMS
    keeps a build only once make finished); an install or depmod that was running is undone
    or redone so the files, DKMS and modules.dep of KVER agree. KVER is not booted by
    default (the gate holds it), so a finished build or a checked install is kept."""
    if step == "dkms-install":
        d.uninstall(m.driver, m.version, kver, depmod=False)
    if step in ("dkms-install", "depmod"):
        kmod.depmod(host, kver)


def _text(value: object) -> str | None:
    """A module fact as the expectation keeps it: a string, or None."""
    return value if isinstance(value, str) else None


def extend_expectation(host: Host, state: StateDir, kver: str, r: Readiness) -> str | None:
    """Let `verify` on KVER check what the gate installed: a ready driver's armed expectation
    for the same version gains KVER's module files (as the upgrade records them for its
    kernels). Returns the expectation's path when it was extended."""
    path = f"{state.expectations}/{r.driver}.json"
    raw = host.read_bytes(path)
    if not r.ready or raw is None:
        return None
    exp = parse_expectation(raw, path)
    if exp.get("expected_version") != r.version:
        return None
    exp.setdefault("kernels", {})[kver] = {
        mod: {"path": _text(found.get("path")), "version": _text(found.get("version")),
              "srcversion": _text(found.get("srcversion")), "sha256": _text(found.get("sha256"))}
        for mod in exp["modules"] if isinstance(found := r.facts.get(mod), dict)}
    host.write_bytes(path, (json.dumps(exp, indent=1) + "\n").encode())
    return path


# ------------------------------------------------------------------ records
def write_record(host: Host, state: StateDir, kver: str, running: str | None,
                 results: list[Readiness], interrupted: str | None = None
                 ) -> gaterecord.GateRecord:
    """Keep the gate's outcome for `kver` in `<state>/kernels/KVER.json` (what `check`
    shows): per driver its version, ready, why and the facts checked, with the time; an
    `interrupted` gate (why) is not ready, whatever its drivers got to."""
    rec: gaterecord.GateRecord = {"kernel": kver, "running": running, "checked": utcnow(),
           "ready": interrupted is None and all(r.ready for r in results),
           "interrupted": interrupted,
           "drivers": {r.driver: {k: v for k, v in asdict(r).items() if k != "driver"}
                       for r in results}}
    gaterecord.write(host, gaterecord.record_path(state, kver), rec)
    return rec


# ------------------------------------------------------------------ the hold
def hold(host: Host, state: StateDir, kver: str, running: str,
         boot: Host | None = None) -> gaterecord.Hold:
    """Keep the boot default on `running` while `kver` is not ready; the first hold keeps
    what the boot loader had, a later one only adds its kernel. The boot loader is read and
    changed on `boot` (default: `host`)."""
    boot = boot or host
    current = gaterecord.read_hold(host, state)
    if current is None:
        backend = bootloader.detect(boot)
        if backend is None:
            raise HwmgrError("no boot loader hwmgr can hold was found (GRUB, grubby, "
                             "systemd-boot)")
        saved = backend.hold(boot, running)
        current = {"backend": backend.name, "held_on": running, "kernels": [],
                   "saved": dict(saved), "since": utcnow()}
    elif current.get("held_on") != running:  # a hold from another boot: hold this one now
        backend = bootloader.by_name(current["backend"])
        if backend is None:
            where = f"{state.path}/{gaterecord.KERNELS}/{gaterecord.HOLD}"
            raise BadInputError(f"{where}: unknown back-end {current['backend']!r}")
        fresh = backend.hold(boot, running)
        current["held_on"], current["saved"]["held_entry"] = running, fresh.get("held_entry")
    if kver not in current["kernels"]:
        current["kernels"].append(kver)
    gaterecord.write(host, f"{state.path}/{gaterecord.KERNELS}/{gaterecord.HOLD}", current)
    return current


def release(host: Host, state: StateDir, kver: str,
            boot: Host | None = None) -> gaterecord.Hold | None:
    """Drop `kver` from the hold; with no kernel left held, restore exactly what the boot
    loader had (on `boot`, default `host`) and forget the hold. Returns the hold as it was,
    or None when none."""
    current = gaterecord.read_hold(host, state)
    if current is None:
        return None
    left = [k for k in current["kernels"] if k != kver]
    path = f"{state.path}/{gaterecord.KERNELS}/{gaterecord.HOLD}"
    if left:
        gaterecord.write(host, path, {**current, "kernels": left})
        return current
    backend = bootloader.by_name(current["backend"])
    if backend is None:
        raise BadInputError(f"{path}: unknown back-end {current['backend']!r}")
    backend.restore(boot or host, current["saved"])
    host.remove(path)
    return current
