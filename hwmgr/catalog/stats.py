"""What a catalog knows, counted: drivers, device rules, versions by status, the
distributions its verdicts cover and the sources its evidence cites (`hwmgr catalog stats`)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Dict, List, Mapping, TypedDict

from hwmgr import urls
from hwmgr.catalog import issues as issue_match
from hwmgr.catalog.entry import DriverEntry
from hwmgr.catalog.model import Knowledge
from hwmgr.catalog.refs import inbox_policies
from hwmgr.errors import VersionError

# distribution names as the catalog writes them: rhel-7.7, centos-7.9, debian-12, ubuntu-22.04
_FAMILY = re.compile(r"^(?P<name>[a-z]+)-(?P<major>[0-9]+)")
# rebuilds are counted with the distribution they rebuild
_REBUILDS = {"centos": "rhel", "rocky": "rhel", "alma": "rhel", "oracle": "rhel", "ol": "rhel"}


def family(dist: str) -> str:
    """'centos-7.7' -> 'rhel-7', 'ubuntu-22.04' -> 'ubuntu-22.04', 'debian-12' -> 'debian-12'."""
    m = _FAMILY.match(dist)
    if not m:
        return dist
    name = _REBUILDS.get(m["name"], m["name"])
    return dist if name == "ubuntu" else f"{name}-{m['major']}"


class DriverStats(TypedDict):
    """One driver's counts (`per_driver`)."""

    devices: int
    versions: int
    in_tree_policies: int
    distributions: List[str]
    sources: int


class KnowledgeStats(TypedDict):
    """Known issues and firmware requirements counted (`knowledge_stats`)."""

    known_issues: int
    known_issues_by_driver: Dict[str, int]
    known_issues_by_severity: Dict[str, int]
    known_issues_by_source_kind: Dict[str, int]
    known_issues_by_condition: Dict[str, int]  # only_when name -> issues that need it
    known_issues_by_ceiling: Dict[str, int]  # the strongest verdict each can give (issues.ceiling)
    firmware_requirements: int
    firmware_requirements_by_driver: Dict[str, int]
    versions_beyond_baseline: int
    versions_beyond_baseline_share: float


class CatalogStats(KnowledgeStats):
    """What `hwmgr catalog stats` reports of the merged entries (its JSON keys, in order:
    these, then KnowledgeStats')."""

    drivers: int
    devices: int
    versions: int
    versions_by_status: Dict[str, int]
    distributions: List[str]
    evidence_by_kind: Dict[str, int]
    distinct_urls: int
    per_driver: Dict[str, DriverStats]


def source_kind(src: Mapping[str, object]) -> str:
    """A cited source's kind, from its marker or where it lives."""
    if src.get("kind"):
        return str(src["kind"])
    parts = urls.split(str(src.get("url", "")))
    host = parts.host.lower() if parts else ""
    title = str(src.get("title", "")).lower()
    if any(w in title for w in ("release notes", "readme", "support", "matrix", "errata",
                                "changelog")):
        return "vendor or distribution documentation"
    if "kernel" in title or title.startswith("linux") or "linux-" in host:
        return "kernel source"
    if host.endswith(("github.com", "gitlab.com")):
        return "vendor source"
    return "other"


def _evidence(node: object) -> list[Mapping[str, object]]:
    """Every cited source below `node` (schema 3 evidence lists)."""
    out: list[Mapping[str, object]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "evidence" and isinstance(v, list):
                out += [s for s in v if isinstance(s, dict)]
            else:
                out += _evidence(v)
    elif isinstance(node, list):
        for v in node:
            out += _evidence(v)
    return out


def catalog_stats(drivers: Mapping[str, DriverEntry]) -> CatalogStats:
    """Coverage of merged driver entries: totals, per driver, and driver x distribution."""
    per_driver: dict[str, DriverStats] = {}
    statuses: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    urls: set[str] = set()
    families: set[str] = set()
    for name, entry in sorted(drivers.items()):
        vers = entry.get("versions") or {}
        dists: set[str] = set()
        for ve in list(vers.values()) + inbox_policies(entry):
            dists.update(family(d) for d in ve.get("distributions", []))
        for ve in vers.values():
            statuses[ve["status"]] += 1
        cited = _evidence(entry)
        for src in cited:
            sources[source_kind(src)] += 1
            if src.get("url"):
                urls.add(str(src["url"]))
        families |= dists
        per_driver[name] = {"devices": len(entry.get("devices") or []), "versions": len(vers),
                            "in_tree_policies": len(inbox_policies(entry)),
                            "distributions": sorted(dists), "sources": len(cited)}
    return {"drivers": len(per_driver),
            "devices": sum(d["devices"] for d in per_driver.values()),
            "versions": sum(d["versions"] for d in per_driver.values()),
            "versions_by_status": dict(sorted(statuses.items())),
            "distributions": sorted(families, key=_dist_order),
            "evidence_by_kind": dict(sorted(sources.items())),
            "distinct_urls": len(urls),
            "per_driver": per_driver,
            **knowledge_stats(drivers)}


def knowledge_stats(drivers: Mapping[str, DriverEntry]) -> KnowledgeStats:
    """Known issues by driver, severity and source kind; firmware requirements; and the
    share of catalogued versions the catalog knows more of than "baseline" (a status of its
    own, or a known issue whose driver-version range holds it)."""
    by_driver: Counter[str] = Counter()
    by_severity: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    by_condition: Counter[str] = Counter()
    by_ceiling: Counter[str] = Counter()
    firmware: Counter[str] = Counter()
    versions_known = versions_total = 0
    for name, entry in sorted(drivers.items()):
        know = Knowledge.from_entry(name, entry)
        for issue in know.issues:
            by_driver[name] += 1
            by_severity[issue.severity] += 1
            if issue.only_when:
                by_condition[issue.only_when] += 1
            by_ceiling[issue_match.ceiling(issue)] += 1
            for kind in {s.kind or "other" for s in issue.sources}:
                by_kind[kind] += 1
        if know.firmware:
            firmware[name] = len(know.firmware)
        scheme = entry.get("version_scheme", "driver")
        for ver, ve in (entry.get("versions") or {}).items():
            versions_total += 1
            if ve.get("status") != "baseline" or _in_any_range(know, ver, scheme):
                versions_known += 1
    return {"known_issues": sum(by_driver.values()),
            "known_issues_by_driver": dict(sorted(by_driver.items())),
            "known_issues_by_severity": dict(sorted(by_severity.items())),
            "known_issues_by_source_kind": dict(sorted(by_kind.items())),
            "known_issues_by_condition": dict(sorted(by_condition.items())),
            "known_issues_by_ceiling": dict(sorted(by_ceiling.items())),
            "firmware_requirements": sum(firmware.values()),
            "firmware_requirements_by_driver": dict(sorted(firmware.items())),
            "versions_beyond_baseline": versions_known,
            "versions_beyond_baseline_share": round(versions_known / versions_total, 4)
            if versions_total else 0.0}


def _in_any_range(know: Knowledge, version: str, scheme: str) -> bool:
    """Whether a known issue's driver-version range holds this version."""
    for issue in know.issues:
        for rng in issue.driver_versions:
            try:
                if issue_match.in_range(version, rng, scheme, None):
                    return True
            except VersionError:
                continue
    return False


def _dist_order(fam: str) -> tuple[str, float]:
    name, _, ver = fam.partition("-")
    try:
        return name, float(ver)
    except ValueError:
        return name, 0.0
