"""Shared helpers for the known-issue miners in catalog-src/ (see docs/known-issues.md).

Not a script of its own: mlnx_bugfixes.py, megaraid_changelog.py and smartpqi_notes.py import
it (their directory is first on sys.path when they run). It builds known-issue entries, checks
them against the format (id, severity, source kinds, https URLs, versions that parse in the
driver's own version_scheme with introduced < fixed) and writes a proposal file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hwmgr.catalog import versions
from hwmgr.catalog.model import SEVERITIES, SOURCE_KINDS  # one owner: the catalog model

REPO = Path(__file__).resolve().parent.parent
CATALOG_DRIVERS = REPO / "catalogs" / "drivers"

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

Entry = Dict[str, Any]


class ProposalError(ValueError):
    """A reviewed fact or a parsed row that does not make a valid known issue."""


def version_scheme(driver: str) -> str:
    """The version_scheme of `driver` in the shipped catalog (catalogs/drivers/<driver>.json)."""
    path = CATALOG_DRIVERS / f"{driver}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    scheme = data["drivers"][driver]["version_scheme"]
    if not isinstance(scheme, str):
        raise ProposalError(f"{path}: version_scheme of {driver} is not a string")
    return scheme


def check_interval(driver: str, scheme: str, interval: Dict[str, str]) -> None:
    """Both ends parse as vendor versions of `scheme` and introduced < fixed."""
    for key, value in interval.items():
        if key not in ("introduced", "fixed"):
            raise ProposalError(f"{driver}: unknown interval key {key!r}")
        parsed = versions.parse(value, scheme)
        if getattr(parsed, "kernel_release", False):
            raise ProposalError(f"{driver}: {value!r} reads as a kernel release, not a "
                                "driver version")
    if "introduced" in interval and "fixed" in interval:
        order = versions.compare(interval["introduced"], interval["fixed"], scheme)
        if order >= 0:
            raise ProposalError(f"{driver}: introduced {interval['introduced']!r} is not "
                                f"before fixed {interval['fixed']!r}")


def make_source(title: str, url: str, kind: str, observed: str) -> Dict[str, str]:
    """One `sources` item, checked."""
    if not url.startswith("https://"):
        raise ProposalError(f"source URL is not https: {url!r}")
    if kind not in SOURCE_KINDS:
        raise ProposalError(f"unknown source kind {kind!r}")
    if not title.strip() or not observed.strip():
        raise ProposalError(f"source {url} needs a title and an observation")
    return {"title": title, "url": url, "kind": kind, "observed": observed}


def make_entry(driver: str, issue_id: str, severity: str, symptom: str,
               intervals: Sequence[Dict[str, str]], sources: Sequence[Dict[str, str]],
               applies_to: Optional[Sequence[str]] = None) -> Entry:
    """A known-issue entry for `driver`, checked against docs/known-issues.md."""
    if not ID_RE.match(issue_id) or len(issue_id) > 80:
        raise ProposalError(f"{driver}: bad id {issue_id!r}")
    if severity not in SEVERITIES:
        raise ProposalError(f"{issue_id}: unknown severity {severity!r}")
    if not symptom.strip() or "\n" in symptom:
        raise ProposalError(f"{issue_id}: symptom must be one non-empty line")
    if not intervals or not sources:
        raise ProposalError(f"{issue_id}: needs at least one interval and one source")
    scheme = version_scheme(driver)
    for interval in intervals:
        if "fixed" not in interval:
            raise ProposalError(f"{issue_id}: every mined interval states its fix")
        check_interval(driver, scheme, interval)
    entry: Entry = {
        "id": issue_id,
        "severity": severity,
        "symptom": symptom,
        "affected": {"driver_versions": [dict(i) for i in intervals]},
        "sources": list(sources),
    }
    if applies_to:
        entry["applies_to"] = list(applies_to)
    return entry


def check_unique(entries: Sequence[Entry]) -> None:
    """Ids are unique within one driver."""
    seen: Dict[str, int] = {}
    for e in entries:
        seen[e["id"]] = seen.get(e["id"], 0) + 1
    dup = sorted(k for k, n in seen.items() if n > 1)
    if dup:
        raise ProposalError(f"duplicate ids: {', '.join(dup)}")


def write_proposal(out: Path, source: str, by_driver: Dict[str, List[Entry]],
                   update: bool = False) -> Dict[str, Any]:
    """Write {"source", "drivers": {d: {"known_issues": [...]}}} to `out`.

    With `update`, an existing file keeps the drivers this run does not produce, and its
    "source" keeps the other sources (joined with " | ", sorted): several miners can then
    fill one proposal (catalog-src/proposed/storage.json) one after another."""
    drivers: Dict[str, Any] = {}
    sources = [source]
    if update and out.exists():
        old = json.loads(out.read_text(encoding="utf-8"))
        drivers.update(old.get("drivers", {}))
        sources.extend(s for s in str(old.get("source", "")).split(" | ") if s)
    for driver, entries in by_driver.items():
        check_unique(entries)
        drivers[driver] = {"known_issues": sorted(entries, key=lambda e: e["id"])}
    doc = {"source": " | ".join(sorted(set(sources))),
           "drivers": {d: drivers[d] for d in sorted(drivers)}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return doc


def load_manual(path: Path) -> Dict[str, Any]:
    """A reviewed-facts file of catalog-src/manual/."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ProposalError(f"{path}: expected a JSON object")
    return data
