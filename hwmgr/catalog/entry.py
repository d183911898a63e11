"""The shape of a driver entry once the catalog is loaded: TypedDicts of what the JSON Schema
(`hwmgr/schemas/catalog.schema.json`) and `validate` have checked, so code that reads an entry
names its fields instead of digging through `dict[str, Any]`.

The JSON stays as read (the entries are the merged documents, not copies): these types only
say what a validated document holds. Values whose shape differs by rule (a setting's level,
bound or on/off map, the `kernel_builds` tables) are `object` here; the modules that read
them narrow them.
"""

from __future__ import annotations

from typing import Dict, List, TypedDict, Union, cast


class _SourceRequired(TypedDict):
    title: str
    observed: str


class SourceRef(_SourceRequired, total=False):
    """One cited source of schema 3 evidence (model.Source is its typed view)."""

    url: str
    kind: str  # model.SOURCE_KINDS


# schema 1-2 evidence is one text; schema 3 a list of sources
Evidence = Union[str, List[SourceRef]]


class Firmware(TypedDict, total=False):
    """A version's firmware floor (schema 1-2; schema 3 has firmware_requirements)."""

    min: str
    evidence: Evidence


class Source(TypedDict, total=False):
    """Where a version's vendor package comes from (`fetch`, `mirror`, `trust`)."""

    type: str  # srpm | tarball
    url: str
    sha256: str
    size: int
    filename: str
    allow_http: bool
    verified: bool
    signing_key: str
    mirrors: List[str]
    notes: List[str]


class _VersionRequired(TypedDict):
    status: str  # one of the catalog statuses (recommended, known-good, known-bad, ...)
    reason: str
    evidence: Evidence


class VersionEntry(_VersionRequired, total=False):
    """One driver version's verdict and, for a vendor release, its source."""

    applies_to: List[str]  # device refs 'v:d[:sv:sd]'
    kernels: List[str]  # globs
    firmware: Firmware
    source: Source
    released: str
    notes: List[str]
    distributions: List[str]
    modinfo_only: List[str]
    upstream: List[str]


class InboxPolicy(_VersionRequired, total=False):
    """An in-tree build's verdict (schema 3: one per kernel family)."""

    kernels: List[str]
    notes: List[str]
    distributions: List[str]


class Throughput(TypedDict, total=False):
    """The throughput floor verify uses when no --floor is given."""

    min_fraction_of_link: float
    evidence: Evidence
    notes: List[str]


# a device rule: IDs (4 hex digits each) or a PCI class; "class" is a Python keyword
DeviceRule = TypedDict("DeviceRule", {
    "vendor": str, "device": str, "subvendor": str, "subdevice": str, "class": str,
    "name": str, "notes": List[str], "remove": bool,
}, total=False)


class VersionFormat(TypedDict):
    """How a driver's version strings look in the field (documentation)."""

    example: str
    note: str


class _VendorReleaseRequired(TypedDict):
    package: str
    release: str
    status: str
    reason: str
    evidence: Evidence


class VendorRelease(_VendorReleaseRequired, total=False):
    """A vendor package known from a support list, shown and never matched."""

    distributions: List[str]
    kernels: List[str]
    notes: List[str]


class Advice(TypedDict):
    """Tuning advice from a vendor guide, shown and never enforced."""

    setting: str
    value: Union[str, int, Dict[str, Union[str, int]]]
    when: str
    evidence: Evidence


class VersionRange(TypedDict, total=False):
    """Driver versions `introduced` (inclusive) to `fixed` (exclusive)."""

    introduced: str
    fixed: str


class _KernelRangeRequired(TypedDict):
    fixed: List[str]


class KernelRange(_KernelRangeRequired, total=False):
    """Kernel builds of one line affected from `introduced` on, except where fixed."""

    introduced: str
    read_to: Dict[str, str]


class Affected(TypedDict, total=False):
    """What a known issue affects: driver versions and/or kernel builds per line."""

    driver_versions: List[VersionRange]
    kernels: Dict[str, KernelRange]


class _ItemRequired(TypedDict):
    id: str


class KnownIssueItem(_ItemRequired, total=False):
    """A `known_issues` item as read (model.KnownIssue is its typed view); all but `id`
    are required unless it is a layer's `remove`."""

    remove: bool
    severity: str
    symptom: str
    affected: Affected
    applies_to: List[str]
    sources: List[SourceRef]
    notes: List[str]
    build: str  # vendor | in-tree
    only_when: str  # a model.CONDITIONS name
    kernel_releases: List[str]  # uname -r globs the defect strikes on


class FirmwareRequirementItem(_ItemRequired, total=False):
    """A `firmware_requirements` item as read (model.FirmwareRequirement is its view)."""

    remove: bool
    min: str
    driver_versions: List[VersionRange]
    applies_to: List[str]
    sources: List[SourceRef]
    notes: List[str]
    feature: str


Bound = Dict[str, int]  # {"min": N} and/or {"max": N}
Level = Union[str, int, Bound]  # "max", an exact count, or a bound
OnOff = str  # "on" | "off"


class Settings(TypedDict, total=False):
    """Wanted NIC settings (compliance.rules turns them into wants by item)."""

    pause: Dict[str, OnOff]  # autoneg, rx, tx
    ring: Union[Level, Dict[str, Level]]  # one level, or per rx/tx/rx_mini/rx_jumbo
    channels: Union[Level, Dict[str, Level]]  # one level, or per combined/rx/tx/other
    features: Dict[str, OnOff]
    txqueuelen: Union[int, Bound]
    mtu: Union[int, Bound]
    evidence: Evidence
    notes: List[str]


class _DriverRequired(TypedDict):
    version_scheme: str
    description: str
    devices: List[DeviceRule]
    versions: Dict[str, VersionEntry]


class DriverEntry(_DriverRequired, total=False):
    """One driver's entry (`drivers.<name>`): its devices, versions and rules."""

    firmware_scheme: str
    pci_drivers: List[str]
    netdev_drivers: List[str]
    inbox: Union[InboxPolicy, List[InboxPolicy]]
    settings: Settings
    throughput: Throughput
    notes: List[str]
    version_formats: List[VersionFormat]
    vendor_releases: List[VendorRelease]
    advice: List[Advice]
    known_issues: List[KnownIssueItem]  # typed by model.Knowledge.from_entry
    firmware_requirements: List[FirmwareRequirementItem]  # likewise


class When(TypedDict, total=False):
    """A condition: the interface's root qdisc is one of these, host sysctls have these
    values (each an integer, a string or a list of integers)."""

    qdisc: List[str]
    sysctl: Dict[str, Union[int, str, List[int]]]


class _SysctlRequired(TypedDict):
    name: str


class SysctlRule(_SysctlRequired, total=False):
    """A host-wide kernel network setting (schema 2): one of value, min, max or fields."""

    value: Union[int, str, List[int]]
    min: int
    max: int
    fields: List[Union[Dict[str, int], None]]  # per field: {value|min|max: N} or any
    when: When
    evidence: Evidence
    notes: List[str]
    remove: bool


class ConditionalSetting(_ItemRequired, total=False):
    """Interface settings that apply while a condition holds (schema 2)."""

    enabled: bool
    drivers: List[str]
    when: When
    settings: Settings
    evidence: Evidence
    notes: List[str]
    remove: bool


class Lifecycle(TypedDict, total=False):
    """When kernel lines stopped getting free fixes: line -> YYYY-MM or 'supported'."""

    as_of: str  # YYYY-MM
    longterm: Dict[str, str]
    releases: Dict[str, str]
    evidence: Evidence
    notes: List[str]


class DistroKernels(TypedDict, total=False):
    """Debian's or Ubuntu's kernels: ABI -> upstream release, X.Y -> distribution release."""

    abi: Dict[str, str]
    releases: Dict[str, str]
    evidence: Evidence
    notes: List[str]


class ElKernels(TypedDict, total=False):
    """RHEL's kernels: per line (el7, el8, ...) build number -> minor release."""

    streams: Dict[str, Dict[str, str]]
    evidence: Evidence
    notes: List[str]


class UbuntuLine(TypedDict, total=False):
    """One Ubuntu line's uploads read (`6.8.0-41` ...) and where they were read."""

    series: str
    abis: List[str]
    proxmox: Dict[str, str]  # Proxmox VE release (6.8.12-30) -> the ABI it is built on
    evidence: Evidence
    notes: List[str]


class UbuntuFlavours(TypedDict, total=False):
    """Ubuntu's cloud kernel ABIs (5.15.0-1121-aws) -> the master ABI each is built on."""

    map: Dict[str, str]
    evidence: Evidence


class KernelBuilds(TypedDict, total=False):
    """The `kernel_builds` tables (docs/known-issues.md)."""

    lifecycle: Lifecycle
    debian: DistroKernels
    ubuntu: DistroKernels
    ubuntu_lines: Dict[str, UbuntuLine]
    ubuntu_flavours: UbuntuFlavours
    el: ElKernels


class CatalogDoc(TypedDict, total=False):
    """A whole catalog document once the JSON Schema passed it (a complete file, or the
    merged layers): schema_version, catalog_version, released and drivers are there."""

    schema_version: int
    catalog_version: str
    released: str
    description: str
    notes: List[str]
    drivers: Dict[str, DriverEntry]
    sysctl: List[SysctlRule]
    conditional_settings: List[ConditionalSetting]
    kernel_builds: KernelBuilds


def as_catalog(doc: object) -> CatalogDoc:
    """The typed view of a document the JSON Schema passed (the same object, not a copy):
    the one place a catalog's JSON becomes `CatalogDoc`. Only for checked documents: the
    schema refuses anything but an object, so a TypeError here is a bug, not bad input."""
    if not isinstance(doc, dict):
        raise TypeError(f"a checked catalog is a JSON object, not {type(doc).__name__}")
    return cast(CatalogDoc, doc)
