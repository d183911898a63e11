"""The expectation file an upgrade or rollback arms and `verify` checks after the reboot.

Lifecycle steps write `<state>/expectations/<driver>.json`; verification reads it. The format
lives here, with its writer's layer, so the reader (hwmgr.verify) imports down to it.
"""

from __future__ import annotations

from typing import Optional, TypedDict, cast

from hwmgr import safejson
from hwmgr.errors import BadInputError
from hwmgr.host.seam import Host
from hwmgr.lifecycle.params import DeviceRecord

EXPECTATION_FORMAT = "hwmgr-expectation"
# the optional fields verify reads and writes back, with their JSON types
OPTIONAL: dict[str, safejson.Types] = {
    "expected_version": str, "txn": int, "kind": str, "boot_attempts": int, "verified": dict,
    "auto_rollback": dict, "auto_rollback_allowed": bool,
}
MAX_BOOT_ATTEMPTS = 1000  # verify counts boots; far more than any max_boot_attempts


class ExpectedModule(TypedDict):
    """One module file armed on one kernel (path None: no module there)."""

    path: Optional[str]
    version: Optional[str]
    srcversion: Optional[str]
    sha256: Optional[str]


class Armed(TypedDict):
    """What an upgrade or rollback arms: every key, as the writer knows them."""

    format: str  # EXPECTATION_FORMAT
    version: int  # of the format: 1
    driver: str
    expected_version: str
    modules: list[str]
    txn: int
    kind: str
    kernels: dict[str, dict[str, ExpectedModule]]  # kernel -> module -> the file armed
    devices: list[DeviceRecord]
    boot_attempts: int


class ArmedDevice(TypedDict, total=False):
    """A device of an expectation read back: `validate` checks the address, the interfaces
    and the link baselines; the rest is compared as found."""

    address: str
    vendor_id: object
    device_id: object
    firmware_version: object
    interfaces: list[str]
    links: dict[str, dict[str, object]]  # ifname -> {operstate, speed_mbps}


class ReadModule(TypedDict, total=False):
    """A module file of an expectation read back (each value a string or None)."""

    path: Optional[str]
    version: Optional[str]
    srcversion: Optional[str]
    sha256: Optional[str]


class Expectation(TypedDict, total=False):
    """An expectation file as `validate` lets it through (the reader's view: a file may lack
    the optional keys, `OPTIONAL`) and as verify writes it back with its marks."""

    format: str
    version: int
    driver: str
    modules: list[str]
    kernels: dict[str, dict[str, ReadModule]]  # kernel release -> module -> file
    devices: list[ArmedDevice]
    expected_version: Optional[str]
    txn: Optional[int]
    kind: Optional[str]
    boot_attempts: int
    verified: dict[str, object]  # {at, kernel}: marked once verification passed
    auto_rollback: dict[str, object]  # {started, reason, txn, state}: at most one attempt
    auto_rollback_allowed: bool
    armed_by: dict[str, object]


def validate(doc: object, where: str) -> Expectation:
    """Check an expectation's shape; BadInputError naming the file and field. The same dict,
    typed: what verify writes into it is written back."""
    if not isinstance(doc, dict):
        raise BadInputError(f"{where}: expected a JSON object")
    if doc.get("format") != EXPECTATION_FORMAT:
        raise BadInputError(f"{where}: format is {doc.get('format')!r}, "
                            f"expected {EXPECTATION_FORMAT!r}")
    if doc.get("version") != 1 or isinstance(doc.get("version"), bool):
        raise BadInputError(f"{where}: version {doc.get('version')!r} is not supported (1)")
    if not isinstance(doc.get("driver"), str) or not doc["driver"]:
        raise BadInputError(f"{where}: 'driver' must be a non-empty string")
    mods = doc.get("modules")
    if not isinstance(mods, list) or not mods or not all(isinstance(m, str) for m in mods):
        raise BadInputError(f"{where}: 'modules' must be a non-empty list of module names")
    kernels = doc.get("kernels", {})
    if not isinstance(kernels, dict):
        raise BadInputError(f"{where}: 'kernels' must be an object keyed by kernel release")
    for k, mods in kernels.items():
        safejson.typed(mods, dict, f"{where}: kernels.{k}")
        for m, rec in mods.items():
            safejson.typed(rec, dict, f"{where}: kernels.{k}.{m}")
            for key in ("path", "version", "srcversion", "sha256"):
                safejson.typed(rec.get(key), (str, type(None)), f"{where}: kernels.{k}.{m}.{key}")
    for key, types in OPTIONAL.items():
        if doc.get(key) is not None:
            safejson.typed(doc[key], types, f"{where}: {key}")
    attempts = doc.get("boot_attempts") or 0
    if not 0 <= attempts <= MAX_BOOT_ATTEMPTS:
        raise BadInputError(f"{where}: boot_attempts: expected a count from 0 to "
                            f"{MAX_BOOT_ATTEMPTS}, got {attempts}")
    devs = doc.get("devices", [])
    if not isinstance(devs, list) or not all(
            isinstance(d, dict) and isinstance(d.get("address"), str) for d in devs):
        raise BadInputError(f"{where}: 'devices' must be a list of objects with an 'address'")
    for i, d in enumerate(devs):
        ifs = d.get("interfaces", [])
        if not isinstance(ifs, list) or not all(isinstance(x, str) for x in ifs):
            raise BadInputError(f"{where}: devices[{i}].interfaces must be a list of names")
        links = d.get("links") or {}
        if not isinstance(links, dict) or not all(isinstance(v, dict) for v in links.values()):
            raise BadInputError(f"{where}: devices[{i}].links must be an object of objects "
                                "keyed by interface")
    return cast(Expectation, doc)


def parse_expectation(raw: bytes, where: str) -> Expectation:
    """Decode and validate one expectation file."""
    return validate(safejson.load(raw, where), where)


def load_expectations(host: Host, expect_dir: str, driver: str | None = None
                      ) -> list[tuple[str, Expectation]]:
    """(logical path, expectation) for every armed `*.json` (or just `driver`'s), sorted."""
    names = [n for n in host.listdir(expect_dir) if n.endswith(".json")]
    if driver is not None:
        names = [n for n in names if n == f"{driver}.json"]
    out = []
    for n in names:
        path = f"{expect_dir}/{n}"
        raw = host.read_bytes(path)
        if raw is None:
            raise BadInputError(f"{path}: expectation file is not readable")
        out.append((path, parse_expectation(raw, path)))
    return out
