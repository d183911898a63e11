"""Verdicts: a matched device's driver version judged against its catalog entry."""

from __future__ import annotations

import fnmatch
from typing import Any, Mapping, Protocol, Sequence, TypedDict

from hwmgr.catalog import versions
from hwmgr.catalog.refs import FIRMWARE_SCHEME, driver_key, inbox_policies
from hwmgr.errors import VersionError


class Match(Protocol):
    """What a verdict needs of the loader's match (load.Match): the loader imports this
    module, so the verdict names the shape, not the class."""

    @property
    def driver(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def entry(self) -> Mapping[str, Any]: ...
    @property
    def name(self) -> str: ...


class Catalog(Protocol):
    """What a verdict asks the loaded catalog (load.Catalog)."""

    def recommended(self, dev: Mapping[str, Any],
                    kernel: str | None = None) -> tuple[str, dict[str, Any]] | None: ...

    def applicable(self, m: Any, dev: Mapping[str, Any],
                   kernel: str | None) -> dict[str, dict[str, Any]]: ...


class Firmware(TypedDict, total=False):
    """The recommended version's firmware floor against what the device runs."""

    min: str
    current: Any  # the inventory's raw value (None when unknown)
    ok: bool | None  # None: not comparable (see note) or unknown
    note: str


class _VerdictKeys(TypedDict):
    entry: str
    status: str  # one of load.VERDICTS
    recommended_version: str | None
    reason: str
    match: str  # one of load.LEVELS
    device_name: str


class Verdict(_VerdictKeys, total=False):
    """A device's catalog verdict, as inventory and check report it."""

    firmware: Firmware
    listed_status: str  # the catalog status of the version found, when it is listed
    in_tree: bool  # judged by the entry's in-tree (inbox) policy


def _kernel_ok(globs: Sequence[str] | None, kernel: str | None) -> bool:
    """No globs, or an unknown kernel, never excludes; otherwise one glob must match."""
    if not globs or not kernel:
        return True
    return any(fnmatch.fnmatchcase(kernel, g) for g in globs)

_FROM_STATUS = {"recommended": "ok", "known-good": "ok", "baseline": "ok",
                "deprecated": "outdated", "known-bad": "known-bad"}


def decide(cat: Catalog, m: Match, dev: Mapping[str, Any], kernel: str | None) -> Verdict:
    """Apply the verdict rules: driver binding, in-tree (inbox) policy, listed status, then
    order against the recommended version (never across schemes). `unknown` when something
    could not be read (no driver, no version); `uncatalogued` when the version was read but
    the catalog has no verdict on it (not listed, not comparable, no in-tree policy)."""
    entry, name = m.entry, m.driver
    scheme = entry["version_scheme"]
    rec = cat.recommended(dev, kernel)
    rec_ver = rec[0] if rec else None
    out: Verdict = {"entry": name, "status": "unknown", "recommended_version": rec_ver,
                    "reason": "", "match": m.level, "device_name": m.name}
    if rec and rec[1].get("firmware"):
        out["firmware"] = _firmware(rec[1]["firmware"]["min"], dev.get("firmware_version"),
                                    entry.get("firmware_scheme", FIRMWARE_SCHEME))

    def settle(status: str, reason: str) -> Verdict:
        out["status"], out["reason"] = status, reason
        return out

    def unknown(reason: str) -> Verdict:  # something about the device could not be read
        return settle("unknown", reason)

    def uncatalogued(reason: str) -> Verdict:  # read, but the catalog has no verdict on it
        return settle("uncatalogued", reason)

    norm = driver_key(name)
    accepted = {norm} | {driver_key(p) for p in entry.get("pci_drivers", [])}
    nic, pci = driver_key(dev.get("driver")), driver_key(dev.get("pci_driver"))
    if not nic and not pci:
        return unknown("no driver is bound to this device")
    if not ({nic, pci} & accepted):
        return unknown(f"bound to {dev.get('driver') or dev.get('pci_driver')}, "
                       f"not to {name} (the catalog entry)")
    if nic != norm and not dev.get("interfaces"):  # e.g. its netdev is in another netns
        return unknown(f"no network interface of this device is visible here (another "
                       f"network namespace?), so whether {name} drives it cannot be read; "
                       "check from the namespace that holds its interface")
    if nic != norm:
        return unknown(f"{name} is not driving this device (driver: {dev.get('driver')})")
    raw = dev.get("driver_version")
    raw = raw.strip() if isinstance(raw, str) else None
    if not raw:
        return unknown(f"{name} version is unknown")
    try:
        in_tree = versions.parse_driver_version(raw, kernel).kernel_release
    except VersionError:
        in_tree = False
    if in_tree:
        policies = inbox_policies(entry)
        if not policies:
            return uncatalogued(f"{name} reports the kernel release {raw} (distro in-tree "
                                "build); the catalog has no policy for in-tree builds")
        inbox = next((p for p in policies if _kernel_ok(p.get("kernels"), kernel)), None)
        if inbox is None:
            covered = ", ".join(g for p in policies for g in p.get("kernels", []))
            return uncatalogued(f"{name} in-tree build on kernel {kernel}: the catalog's "
                                f"in-tree policy covers {covered} only")
        out["listed_status"], out["in_tree"] = inbox["status"], True
        return settle(_FROM_STATUS[inbox["status"]], inbox["reason"])
    listed = _listed(cat.applicable(m, dev, kernel), raw, scheme, kernel)
    try:
        cmp_rec = versions.compare(raw, rec_ver, scheme, kernel=kernel) if rec_ver else None
    except VersionError as exc:
        if listed is None:
            return uncatalogued(f"cannot compare {raw} with recommended {rec_ver}: {exc}")
        cmp_rec = None
    if listed is not None:
        st = listed["status"]
        out["listed_status"] = st
        if st == "known-good" and cmp_rec is not None and cmp_rec < 0:
            return settle("outdated", f"known-good, but {rec_ver} is recommended")
        return settle(_FROM_STATUS[st], listed["reason"])
    if cmp_rec is None:
        return uncatalogued(f"{name} {raw} is not in the catalog")
    if cmp_rec < 0:
        return settle("outdated", f"{raw} is older than the recommended {rec_ver}")
    word = "the same as" if cmp_rec == 0 else "newer than"
    return settle("ok", f"{raw} is not listed but {word} the recommended {rec_ver}")


def _normal(version: str, scheme: str, kernel: str | None) -> str | None:
    """The form a driver scheme reduces a reported version to (decorations dropped), or None
    when it does not parse."""
    try:
        parsed = versions.parse(version, scheme, kernel=kernel)
    except VersionError:
        return None
    return parsed.normalized if isinstance(parsed, versions.DriverVersion) else version


def _listed(known: Mapping[str, Any], raw: str, scheme: str,
            kernel: str | None) -> Mapping[str, Any] | None:
    """The catalog's entry for a reported version: the exact string, else the one whose
    normalised form is the same (the field prints '3.0-1 (January 2015)' where modinfo says
    '3.0-1', '1.713.36-0 storm 7.13.15.0' where the catalog lists '1.713.36-0')."""
    if raw in known:
        return known[raw]  # type: ignore[no-any-return]
    want = _normal(raw, scheme, kernel)
    if want is None:
        return None
    return next((entry for key, entry in known.items()
                 if _normal(key, scheme, kernel) == want), None)


def _firmware(minimum: str, current: Any, scheme: str) -> Firmware:
    """Firmware requirement of the recommended version vs what the device runs."""
    fw: Firmware = {"min": minimum, "current": current, "ok": None}
    if isinstance(current, str) and current.strip():
        try:
            fw["ok"] = versions.compare(current, minimum, scheme) >= 0
        except VersionError as exc:
            fw["note"] = str(exc)
    return fw


def source_refusal(source: Mapping[str, Any] | None) -> str | None:
    """Why an upgrade must refuse to fetch this source (None if it may): no source, an
    unverified one (no known checksum), or plain http without allow_http."""
    if not source:
        return "the catalog gives no source for this version"
    if source.get("verified") is False or not source.get("sha256"):
        return f"source {source.get('url')} is not verified (no known sha256/size)"
    if str(source.get("url", "")).startswith("http://") and source.get("allow_http") is not True:
        return f"source {source.get('url')} is plain http and not marked allow_http"
    return None
