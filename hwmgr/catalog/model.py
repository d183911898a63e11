"""Typed, frozen views of catalog knowledge: sources, known issues and firmware requirements.

JSON stays the file format; the loaded (validated) catalog builds these once per driver at
its edge (`Catalog.knowledge`), so matching and the verbs read attributes, not nested dicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

SEVERITIES = ("data-loss", "crash", "link-down", "security", "performance", "cosmetic")
BAD_SEVERITIES = frozenset(SEVERITIES[:4])  # these make a device known-bad; the rest outdated
# What a defect may need to strike, as its source states it (`only_when`): on a host not seen to
# meet it, a known-bad severity gives `outdated` (docs/known-issues.md). name -> the words shown.
CONDITIONS: Mapping[str, str] = {
    "xdp": "an XDP program or AF_XDP socket is in use",
    "sriov": "SR-IOV virtual functions are enabled",
    "ptp": "PTP or hardware timestamping is in use",
    "nvm": "the NVM or flash is read or updated (ethtool -e/-E, devlink flash, nvmupdate)",
    "crypto-offload": "IPsec, MACsec or TLS offload is in use",
    "switching-offload": "switchdev, e-switch, OVS or tc flow offload is configured",
    "rfs": "receive flow steering (RPS, RFS, aRFS) or n-tuple filters are configured",
    "bond": "the port is in a bond or team (LAG)",
    "rdma": "an RDMA (RoCE/iWARP) driver uses the port",
    "debug": "debugfs, blktrace, lockdep or a kdump kernel is in use",
    "removal": "the device is removed or unbound, or the driver unloaded",
    "multipath": "a multipath layer fails a path over",
    "module-parameter": "a non-default module parameter is set",
    "error-path": "something else has already failed (an error path)",
}
SOURCE_KINDS = ("cve", "bug-fix-table", "release-notes", "changelog", "readme",
                "issue-thread", "errata", "field-note", "lab")


@dataclass(frozen=True)
class Source:
    """One cited source: where to read it and what it states, in the catalog's words."""

    title: str
    observed: str
    url: Optional[str] = None
    kind: Optional[str] = None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Source:
        """A source object of the catalog (schema 3 evidence)."""
        return cls(str(raw.get("title", "")), str(raw.get("observed", "")),
                   raw.get("url"), raw.get("kind"))


@dataclass(frozen=True)
class VersionRange:
    """Driver versions `introduced` (inclusive; None: every earlier one) to `fixed`
    (exclusive; None: no fix known), in the driver's own scheme."""

    introduced: Optional[str] = None
    fixed: Optional[str] = None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> VersionRange:
        """A range object of `affected.driver_versions`."""
        return cls(raw.get("introduced"), raw.get("fixed"))


@dataclass(frozen=True)
class KernelRange:
    """Kernel builds of one line affected from `introduced` on, except where a fix covers
    them (kbuild.fix_for: each fix its stream, the highest every later stream)."""

    line: str
    introduced: Optional[str]
    fixed: Tuple[str, ...]
    read_to: Tuple[Tuple[str, str], ...] = ()  # (stream, last build the source covers)

    @classmethod
    def from_json(cls, line: str, raw: Mapping[str, Any]) -> KernelRange:
        """One line of `affected.kernels`."""
        return cls(line, raw.get("introduced"), tuple(raw.get("fixed") or ()),
                   tuple(sorted((raw.get("read_to") or {}).items())))


@dataclass(frozen=True)
class KnownIssue:
    """A defect a public source ties to driver versions and/or kernel builds, with its fix."""

    id: str
    driver: str
    severity: str
    symptom: str
    driver_versions: Tuple[VersionRange, ...]
    kernels: Tuple[KernelRange, ...]
    applies_to: Tuple[str, ...]
    sources: Tuple[Source, ...]
    build: Optional[str] = None  # vendor / in-tree: whose builds the version ranges judge
    only_when: Optional[str] = None  # a CONDITIONS name: the defect needs it to strike
    kernel_releases: Tuple[str, ...] = ()  # uname -r globs it strikes on (none: any)

    @property
    def bad(self) -> bool:
        """Known-bad (data loss, crash, link down, security) rather than outdated."""
        return self.severity in BAD_SEVERITIES

    @property
    def url(self) -> Optional[str]:
        """The first source's address (what a compact finding carries)."""
        return next((s.url for s in self.sources if s.url), None)

    @classmethod
    def from_json(cls, driver: str, raw: Mapping[str, Any]) -> KnownIssue:
        """A validated `known_issues` item of driver `driver`."""
        affected = raw.get("affected") or {}
        return cls(
            str(raw["id"]), driver, str(raw["severity"]), str(raw["symptom"]),
            tuple(VersionRange.from_json(r) for r in affected.get("driver_versions", ())),
            tuple(KernelRange.from_json(line, r)
                  for line, r in sorted((affected.get("kernels") or {}).items())),
            tuple(raw.get("applies_to", ())),
            tuple(Source.from_json(s) for s in raw.get("sources", ())),
            raw.get("build"), raw.get("only_when"), tuple(raw.get("kernel_releases", ())))


@dataclass(frozen=True)
class FirmwareRequirement:
    """A firmware floor for the driver versions in `driver_versions` (all, when empty)."""

    id: str
    driver: str
    minimum: str
    driver_versions: Tuple[VersionRange, ...]
    applies_to: Tuple[str, ...]
    sources: Tuple[Source, ...]
    feature: Optional[str] = None  # stated for one feature only: below it, unavailable

    @property
    def url(self) -> Optional[str]:
        """The first source's address."""
        return next((s.url for s in self.sources if s.url), None)

    @classmethod
    def from_json(cls, driver: str, raw: Mapping[str, Any]) -> FirmwareRequirement:
        """A validated `firmware_requirements` item of driver `driver`."""
        return cls(str(raw["id"]), driver, str(raw["min"]),
                   tuple(VersionRange.from_json(r) for r in raw.get("driver_versions", ())),
                   tuple(raw.get("applies_to", ())),
                   tuple(Source.from_json(s) for s in raw.get("sources", ())),
                   raw.get("feature"))


@dataclass(frozen=True)
class Knowledge:
    """What the catalog knows of one driver beyond its version entries."""

    driver: str
    issues: Tuple[KnownIssue, ...]
    firmware: Tuple[FirmwareRequirement, ...]

    @property
    def kernel_lines(self) -> frozenset[str]:
        """The kernel lines on which this driver's in-tree builds are judged."""
        return frozenset(k.line for i in self.issues for k in i.kernels)

    def issue(self, ident: str) -> Optional[KnownIssue]:
        """The known issue with this id, if any."""
        return next((i for i in self.issues if i.id == ident), None)

    @classmethod
    def from_entry(cls, driver: str, entry: Mapping[str, Any]) -> Knowledge:
        """The typed knowledge of a validated driver entry."""
        return cls(driver,
                   tuple(KnownIssue.from_json(driver, r) for r in entry.get("known_issues", ())),
                   tuple(FirmwareRequirement.from_json(driver, r)
                         for r in entry.get("firmware_requirements", ())))
