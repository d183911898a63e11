"""The shape of a driver entry once the catalog is loaded: TypedDicts of what the JSON Schema
(`hwmgr/schemas/catalog.schema.json`) and `validate` have checked, so code that reads an entry
names its fields instead of digging through `dict[str, Any]`.

The JSON stays as read (the entries are the merged documents, not copies): these types only
say what a validated document holds. Values whose shape differs by schema version or by rule
(a setting's level or bound, firmware floors of schema 1-2, the vendor recipe tables) stay
loosely typed here; the modules that read them narrow them.
"""

from __future__ import annotations

from typing import Any, Dict, List, TypedDict, Union

# schema 1-2 evidence is one text; schema 3 a list of sources ({title, url, kind, observed})
Evidence = Union[str, List[Dict[str, Any]]]


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
    firmware: Dict[str, Any]
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
    settings: Dict[str, Any]  # per item a level, bound or on/off map (compliance.rules reads)
    throughput: Throughput
    notes: List[str]
    version_formats: List[Dict[str, Any]]
    vendor_releases: List[Dict[str, Any]]
    advice: List[Dict[str, Any]]
    known_issues: List[Dict[str, Any]]  # typed by model.Knowledge.from_entry
    firmware_requirements: List[Dict[str, Any]]  # likewise
