"""The kernel gate: every hwmgr-managed driver built, installed and checked for a newly
installed kernel before that kernel may become the boot default.

A driver is managed when the journal has an upgrade of it still in effect (`upgrade_chain`:
a rollback to inbox ends it). For each one, `gate_driver` builds the same version with DKMS
for KVER only, installs it for KVER only, runs depmod for KVER, rebuilds KVER's initramfs for
a storage driver, and checks what can be checked without booting: `modinfo -k KVER` (vermagic,
version, signer), `depmod -e -E Module.symvers` (no unknown symbol) and the initramfs listing.
The outcome is kept per kernel in `<state>/kernels/KVER.json`, which `check` reads; the boot
default is held (lifecycle/bootloader.py) while a driver is not ready, the hold kept in
`<state>/kernels/hold.json` so a later passing run restores exactly what was there.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

from hwmgr import safejson
from hwmgr.errors import BadInputError, HwmgrError, NotFoundError
from hwmgr.host.seam import Host
from hwmgr.lifecycle import bootloader, kmod
from hwmgr.lifecycle.buildlog import BuildFailed, keep_log
from hwmgr.lifecycle.dkms import INSTALL_TREE, Dkms
from hwmgr.lifecycle.plan import running_kernel, upgrade_chain
from hwmgr.lifecycle.recipe import load_recipe
from hwmgr.transaction.journal import utcnow
from hwmgr.transaction.state import StateDir

KERNELS = "kernels"  # under the state dir: KVER.json per gated kernel, hold.json
HOLD = "hold.json"
QUICK = 120.0
MAX_RECORD = 1 << 20


@dataclass
class Managed:
    """A driver hwmgr installed and still manages: what the gate rebuilds."""

    driver: str
    version: str
    modules: list[str]
    storage: bool
    sign_key: str | None = None
    sign_cert: str | None = None


@dataclass
class Readiness:
    """One driver's outcome for one kernel."""

    driver: str
    version: str
    ready: bool
    why: str
    facts: dict[str, Any] = field(default_factory=dict)


def managed_drivers(state: StateDir) -> list[Managed]:
    """The drivers an upgrade still in effect installed, by name (damaged journal: exit 8)."""
    journal = state.read_journal()
    if journal is None:
        return []
    try:
        targets = sorted({t["target"] for t in journal.transactions(kind="upgrade",
                                                                    state="committed")})
    except sqlite3.DatabaseError as exc:
        raise BadInputError(f"{state.path}/journal.sqlite: not a usable hwmgr journal ({exc})"
                            ) from None
    out = []
    for driver in targets:
        chain = upgrade_chain(state, driver)
        if not chain:
            continue  # rolled back to inbox: not managed any more
        p = chain[-1]["params"]
        try:
            storage = load_recipe(driver, p.get("drivers_dir")).initramfs
        except HwmgrError:  # the recipe moved: the upgrade's own initramfs decision stands
            storage = bool(p.get("initramfs"))
        out.append(Managed(driver, p["version"], list(p["modules"]), bool(storage),
                           p.get("sign_key"), p.get("sign_cert")))
    return out


def installed(host: Host, kver: str) -> bool:
    """True when `kver` is installed: its modules dir and its kernel image are there."""
    return host.is_dir(f"{INSTALL_TREE}/{kver}") and host.exists(f"/boot/vmlinuz-{kver}")


def _modinfo(host: Host, kver: str, module: str, fld: str) -> str:
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
    names = tuple(ko.rsplit("/", 1)[-1] for ko in kos)
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
        return "unsigned while Secure Boot is on: the module would not load", False
    if secure_boot is False:
        return "unsigned: Secure Boot off", True
    return "unsigned: Secure Boot state unknown (mokutil and efivars unreadable)", True


def _check(host: Host, m: Managed, kver: str, kos: dict[str, str],
           secure_boot: bool | None) -> tuple[dict[str, Any], str | None]:
    """What modinfo, depmod and the initramfs say for KVER; (facts, why not ready or None)."""
    facts: dict[str, Any] = {}
    for mod in m.modules:
        got = kmod.resolve(host, mod, kver)
        magic = (got.vermagic or "").split()
        sign, sign_ok = _signing(host, kver, mod, secure_boot)
        facts[mod] = {"path": got.path, "version": got.version,
                      "vermagic": got.vermagic, "signature": sign}
        if got.path is None:
            return facts, f"modinfo -k {kver} {mod} finds no module"
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
            path = facts[mod]["path"]
            if listing is None or not kmod.image_holds(listing, path):
                return facts, f"the initramfs of {kver} does not hold {path}"
    return facts, None


def gate_driver(host: Host, state: StateDir, m: Managed, kver: str,
                secure_boot: bool | None, dkms: Dkms | None = None) -> Readiness:
    """Build, install (KVER only), depmod, initramfs and check one managed driver."""
    d = dkms or Dkms(host, mok_key=m.sign_key, mok_cert=m.sign_cert)

    def no(why: str, **facts: Any) -> Readiness:
        return Readiness(m.driver, m.version, False, why, facts)

    try:
        d.check_headers(kver)
    except NotFoundError as exc:
        return no(exc.message)
    if not d.is_added(m.driver, m.version):
        src = d.source_dir(m.driver, m.version)
        return no(f"DKMS has no {m.driver}/{m.version} (its source {src} is gone): run "
                  f"hwmgr upgrade {m.driver} --to {m.version} again")
    try:
        d.build(m.driver, m.version, kver)
    except BuildFailed as exc:
        dest = f"{state.path}/logs/gate-{kver}-{m.driver}-{m.version}.make.log"
        kept = keep_log(host, exc, dest)
        exc = exc.kept_at(kept) if kept else exc
        return no(exc.message, make_line=exc.make_line, first_error=exc.facts.first_error,
                  make_log=kept or exc.log)
    except HwmgrError as exc:
        return no(exc.message)
    try:
        for e in d.status(m.driver):  # one DKMS version per kernel, as upgrade keeps it
            if e.kernel == kver and e.version != m.version and e.state == "installed":
                d.uninstall(m.driver, e.version, kver, depmod=False)
        kos = {mod: str(p) for mod, p in d.install(m.driver, m.version, kver,
                                                   force=True).items()}
        kmod.depmod(host, kver)
        if m.storage:
            kmod.rebuild_initramfs(host, kver)
    except HwmgrError as exc:
        return no(exc.message)
    facts, why = _check(host, m, kver, kos, secure_boot)
    if why:
        return no(why, **facts)
    return Readiness(m.driver, m.version, True, "built, installed and checked", facts)


# ------------------------------------------------------------------ records
def record_path(state: StateDir, kver: str) -> str:
    return f"{state.path}/{KERNELS}/{kver}.json"


def _read(host: Host, path: str) -> dict[str, Any] | None:
    """A record the gate wrote, or None; anything else there is exit 8 naming it."""
    data = host.read_bytes(path, limit=MAX_RECORD)
    if data is None:
        return None
    obj = safejson.load(data, path)
    if not isinstance(obj, dict):
        raise BadInputError(f"{path}: not a kernel-gate record (expected a JSON object)")
    return obj


def _write(host: Host, path: str, obj: dict[str, Any]) -> None:
    host.makedirs(path.rsplit("/", 1)[0])
    host.write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def read_record(host: Host, state: StateDir, kver: str) -> dict[str, Any] | None:
    rec = _read(host, record_path(state, kver))
    if rec is not None and not isinstance(rec.get("drivers"), dict):
        raise BadInputError(f"{record_path(state, kver)}: field drivers: expected an object")
    return rec


def write_record(host: Host, state: StateDir, kver: str, running: str | None,
                 results: list[Readiness]) -> dict[str, Any]:
    rec = {"kernel": kver, "running": running, "checked": utcnow(),
           "ready": all(r.ready for r in results),
           "drivers": {r.driver: {k: v for k, v in asdict(r).items() if k != "driver"}
                       for r in results}}
    _write(host, record_path(state, kver), rec)
    return rec


# ------------------------------------------------------------------ the hold
def read_hold(host: Host, state: StateDir) -> dict[str, Any] | None:
    path = f"{state.path}/{KERNELS}/{HOLD}"
    hold = _read(host, path)
    if hold is not None and (not isinstance(hold.get("backend"), str)
                             or not isinstance(hold.get("kernels"), list)
                             or not isinstance(hold.get("saved"), dict)):
        raise BadInputError(f"{path}: not a kernel-gate hold (backend, kernels, saved)")
    return hold


def hold(host: Host, state: StateDir, kver: str, running: str) -> dict[str, Any]:
    """Keep the boot default on `running` while `kver` is not ready; the first hold keeps
    what the boot loader had, a later one only adds its kernel."""
    current = read_hold(host, state)
    if current is None:
        backend = bootloader.detect(host)
        if backend is None:
            raise HwmgrError(f"not ready for kernel {kver}, and no boot loader hwmgr can hold "
                             "was found (GRUB, grubby, systemd-boot): the default is NOT held")
        saved = backend.hold(host, running)
        current = {"backend": backend.name, "held_on": running, "kernels": [],
                   "saved": saved, "since": utcnow()}
    elif current.get("held_on") != running:  # a hold from another boot: hold this one now
        backend = bootloader.by_name(current["backend"])
        if backend is None:
            raise BadInputError(f"{state.path}/{KERNELS}/{HOLD}: unknown back-end "
                                f"{current['backend']!r}")
        fresh = backend.hold(host, running)
        current["held_on"], current["saved"]["held_entry"] = running, fresh.get("held_entry")
    if kver not in current["kernels"]:
        current["kernels"].append(kver)
    _write(host, f"{state.path}/{KERNELS}/{HOLD}", current)
    return current


def release(host: Host, state: StateDir, kver: str) -> dict[str, Any] | None:
    """Drop `kver` from the hold; with no kernel left held, restore exactly what the boot
    loader had and forget the hold. Returns the hold as it was, or None when none."""
    current = read_hold(host, state)
    if current is None:
        return None
    left = [k for k in current["kernels"] if k != kver]
    path = f"{state.path}/{KERNELS}/{HOLD}"
    if left:
        _write(host, path, {**current, "kernels": left})
        return current
    backend = bootloader.by_name(current["backend"])
    if backend is None:
        raise BadInputError(f"{path}: unknown back-end {current['backend']!r}")
    backend.restore(host, current["saved"])
    host.remove(path)
    return current


# ------------------------------------------------------------------ what check shows
def _newer(a: str, b: str) -> bool:
    """True when kernel release `a` sorts after `b` (numbers compared as numbers)."""
    def key(s: str) -> list[tuple[int, Any]]:
        return [(0, int(p)) if p.isdigit() else (1, p) for p in re.findall(r"\d+|[^\d.+~-]+", s)]
    return key(a) > key(b)


def check_items(host: Host, state_dir: str) -> list[dict[str, Any]]:
    """One item per managed driver and installed, not-running kernel newer than the running
    one: {driver, kernel, status (ok|drift|unknown), reason}. Nothing is read beyond the
    journal when no driver is managed."""
    state = StateDir(host, state_dir)
    try:
        drivers = managed_drivers(state) if state.existing_file("journal.sqlite") else []
        if not drivers:
            return []
        running = running_kernel(host)
        kernels = [k for k in host.listdir(INSTALL_TREE)
                   if k != running and installed(host, k) and (not running or _newer(k, running))]
        kernels += [f[:-len(".json")] for f in host.listdir(f"{state.path}/{KERNELS}")
                    if f.endswith(".json") and f != HOLD and f[:-5] not in kernels
                    and f[:-5] != running and installed(host, f[:-5])]
        out = []
        for k in sorted(set(kernels)):
            rec = read_record(host, state, k)
            for m in drivers:
                out.append(_item(m, k, (rec or {}).get("drivers", {}).get(m.driver)))
        return out
    finally:
        state.close()


def _item(m: Managed, kver: str, got: Any) -> dict[str, Any]:
    head = f"{m.driver} ready for kernel {kver}"
    if not isinstance(got, dict) or got.get("version") != m.version:
        was = f" (gated for {got.get('version')})" if isinstance(got, dict) else ""
        return {"driver": m.driver, "kernel": kver, "status": "unknown",
                "reason": f"{head}: unknown: {m.driver} {m.version} not gated{was}; run "
                          f"hwmgr kernel-gate {kver}"}
    if got.get("ready") is True:
        return {"driver": m.driver, "kernel": kver, "status": "ok", "reason": f"{head}: yes"}
    return {"driver": m.driver, "kernel": kver, "status": "drift",
            "reason": f"{head}: no: {got.get('why')}"}
