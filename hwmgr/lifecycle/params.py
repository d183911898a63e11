"""What an upgrade or a rollback journals as its params, typed, and the one edge that reads
them back from the journal's JSON (`upgrade`, `rollback`).

The plan builds these records; the engine journals them as JSON and hands them back, after a
crash from the journal alone, as a plain object. Each step kind's factory narrows that object
once here: the fields the steps index are checked by type (a damaged journal is one line
naming the field, `journal.damaged`, exit 8) and the steps then read known types. Site values
a step only passes on (cache dir, mirror, signing pair, build limit) are read leniently by
`setting`, as before: a journal of hwmgr <= 2026.11 kept them under "settings", and a value
of the wrong type there means "not set".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, TypedDict, cast

from hwmgr import safejson
from hwmgr.catalog.entry import Source
from hwmgr.lifecycle.builds.kmod import ModuleFiles
from hwmgr.transaction.journal import damaged

if TYPE_CHECKING:  # a type only: `check` reads upgrade records without dpkg's or DKMS's code
    from hwmgr.lifecycle.builds.pkgcheck import PackageRecord

LEGACY = "settings"  # where journals of hwmgr <= 2026.11 kept the site values


class LinkRecord(TypedDict):
    operstate: Optional[str]
    speed_mbps: Optional[int]


class DeviceRecord(TypedDict):
    """A device the driver drives, as the plan found it (verify compares after the reboot)."""

    address: str
    vendor_id: Optional[str]
    device_id: Optional[str]
    interfaces: list[str]
    driver_version: Optional[str]
    firmware_version: Optional[str]
    links: dict[str, LinkRecord]  # interface -> its link baseline


class PackageRef(TypedDict):
    """A binary package a rollback purges (and its undo reinstalls from the state dir)."""

    name: str
    sha256: str


class _Driver(TypedDict):
    driver: str
    version: str  # installed (upgrade) or restored (rollback; "inbox": the distribution's)
    modules: list[str]
    kernels: list[str]


class DriverParams(_Driver, total=False):
    """What every driver change journals; the optional keys are absent in older journals."""

    initramfs: list[str]  # the kernels whose initramfs holds the module
    devices: list[DeviceRecord]
    sign_key: Optional[str]  # DKMS's module-signing pair
    sign_cert: Optional[str]
    build_timeout: float  # seconds one dkms build may take (site build_timeout_seconds)
    needs_reboot: bool  # the plan's answer (transaction.pending.reboot_needed)


class _Source(TypedDict):
    source: Source  # the catalog's source entry (url, sha256, size, ...)


# the functional form because "from" is a keyword
_From = TypedDict("_From", {"from": ModuleFiles}, total=False)  # what each module was before


class UpgradeParams(DriverParams, _Source, _From, total=False):
    """What an upgrade journals: every value its steps need, resolved when it was planned."""

    drivers_dir: str  # the dir holding <driver>/recipe.json: the recipe the plan read
    cache_dir: str
    offline: bool
    mirror: Optional[str]  # --mirror, else the site config's mirror
    package: PackageRecord  # `upgrade --package`: the checked binary package, not a build


class _Rollback(TypedDict):
    remove_versions: list[str]  # DKMS versions to remove
    undo_upgrade: int  # the upgrade transaction whose backup is restored
    restore: ModuleFiles  # the files to put back


class RollbackParams(DriverParams, _Rollback, total=False):
    """What a rollback journals: the files to restore, the DKMS versions to remove."""

    remove_packages: list[PackageRef]  # binary packages to dpkg --purge
    reinstall: dict[str, list[str]]  # kernel -> DKMS versions to install again


def _field(raw: Mapping[str, object], key: str, types: safejson.Types, where: str,
           required: bool) -> None:
    if key in raw or required:
        safejson.typed(raw.get(key), types, f"{where}.{key}", damaged)


def _names(raw: Mapping[str, object], key: str, where: str, required: bool = True) -> None:
    """A list of strings (module names, kernel releases, versions)."""
    if key not in raw and not required:
        return
    for i, v in enumerate(safejson.typed(raw.get(key), list, f"{where}.{key}", damaged)):
        safejson.typed(v, str, f"{where}.{key}[{i}]", damaged)


def _files(raw: Mapping[str, object], key: str, where: str, required: bool) -> None:
    """{kernel: {module: record}} with each record's path, version and sha256 text or null."""
    if key not in raw and not required:
        return
    for k, mods in safejson.typed(raw.get(key), dict, f"{where}.{key}", damaged).items():
        for m, rec in safejson.typed(mods, dict, f"{where}.{key}.{k}", damaged).items():
            safejson.typed(rec, dict, f"{where}.{key}.{k}.{m}", damaged)
            for f in ("path", "version", "sha256"):
                safejson.typed(rec.get(f), (str, type(None)), f"{where}.{key}.{k}.{m}.{f}",
                               damaged)


def _driver(raw: Mapping[str, object], where: str) -> None:
    for key in ("driver", "version"):
        _field(raw, key, str, where, True)
    for key in ("modules", "kernels"):
        _names(raw, key, where)
    _names(raw, "initramfs", where, required=False)
    _field(raw, "devices", list, where, False)


def upgrade(raw: Mapping[str, object]) -> UpgradeParams:
    """An upgrade's journaled params, checked by type where its steps index them."""
    where = "journaled upgrade params"
    _driver(raw, where)
    _field(raw, "source", dict, where, True)
    _field(raw, "package", dict, where, False)
    return cast(UpgradeParams, raw)  # the fields the steps read are checked above


def rollback(raw: Mapping[str, object]) -> RollbackParams:
    """A rollback's journaled params, checked by type where its steps index them."""
    where = "journaled rollback params"
    _driver(raw, where)
    _names(raw, "remove_versions", where)
    _field(raw, "undo_upgrade", int, where, True)
    _files(raw, "restore", where, True)
    _field(raw, "remove_packages", list, where, False)
    _field(raw, "reinstall", dict, where, False)
    return cast(RollbackParams, raw)  # the fields the steps read are checked above


def setting(params: Mapping[str, object], key: str) -> object:
    """A site value the steps pass on (older journals: from their "settings" copy); the
    caller narrows it, a value of the wrong type meaning "not set"."""
    if key in params:
        return params[key]
    legacy = params.get(LEGACY)
    return legacy.get(key) if isinstance(legacy, dict) else None


def text_setting(params: Mapping[str, object], key: str) -> str | None:
    """`setting` when it is a string, else None."""
    value = setting(params, key)
    return value if isinstance(value, str) else None
