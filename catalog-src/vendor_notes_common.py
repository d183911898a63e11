"""Shared helpers of the vendor release-note miners (ena_release_notes.py,
intel_release_notes.py, bnxt_changelog.py).

Not a script: the miners import it from their own directory. It builds known issues in the
format of docs/known-issues.md, checks them (id, severity, symptom length, https URLs, source
kinds, and that every version parses in the driver's own `version_scheme` with `introduced`
before `fixed`, through hwmgr's version code) and writes a proposal file
(`{"source": ..., "drivers": {driver: {"known_issues": [...]}}}`).

A reviewed mapping names the note items it turns into issues by a short hash of the item's
text (`item_key`), so the mapping holds no copied text and fails loudly when the notes change.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from hwmgr.catalog.model import SEVERITIES  # noqa: E402,F401  (one owner: the catalog model)

SOURCE_KINDS = ("release-notes", "changelog", "readme", "issue-thread")  # what these notes are
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
MAX_ID = 80
MAX_SYMPTOM = 160
TOP = Path(__file__).resolve().parent.parent
CATALOG_DRIVERS = TOP / "catalogs" / "drivers"

Issue = Dict[str, Any]


class MiningError(Exception):
    """A mapping or a source does not fit: the proposal is not written."""


def item_key(text: str) -> str:
    """The reviewed mapping's handle on a note item: 10 hex digits of the SHA-1 of its text
    with runs of whitespace collapsed (so re-wrapping the notes does not change it)."""
    norm = " ".join(text.split())
    return hashlib.sha1(norm.encode("utf-8")).hexdigest()[:10]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces
    to hyphens (`r2.13.1 release notes` -> `r2131-release-notes`)."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def driver_scheme(driver: str, catalog_dir: Path = CATALOG_DRIVERS) -> str:
    """The `version_scheme` of `driver` in the catalog (catalogs/drivers/<driver>.json)."""
    path = catalog_dir / f"{driver}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        scheme = data["drivers"][driver]["version_scheme"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MiningError(f"no version_scheme for {driver} in {path}: {exc}") from exc
    return str(scheme)


def compare_versions(a: str, b: str, scheme: str) -> int:
    """-1, 0 or 1 as `a` is older than, equal to or newer than `b` under `scheme` (hwmgr's
    own comparison, the one `hwmgr vercmp --scheme` prints)."""
    from hwmgr.catalog.versions import compare  # the checkout's package, in its venv

    return compare(a, b, scheme)


def check_issue(issue: Mapping[str, Any], scheme: str) -> List[str]:
    """Problems of one proposed known issue (empty when it fits docs/known-issues.md)."""
    problems: List[str] = []
    iid = str(issue.get("id", ""))
    if not ID_RE.match(iid) or len(iid) > MAX_ID:
        problems.append(f"bad id {iid!r}")
    if issue.get("severity") not in SEVERITIES:
        problems.append(f"{iid}: bad severity {issue.get('severity')!r}")
    symptom = issue.get("symptom")
    if not isinstance(symptom, str) or not symptom or len(symptom) > MAX_SYMPTOM:
        problems.append(f"{iid}: symptom must be 1..{MAX_SYMPTOM} characters")
    ranges = (issue.get("affected") or {}).get("driver_versions")
    if not isinstance(ranges, list) or not ranges:
        problems.append(f"{iid}: no affected.driver_versions")
        ranges = []
    for rng in ranges:
        problems.extend(_range_problems(iid, rng, scheme))
    sources = issue.get("sources")
    if not isinstance(sources, list) or not sources:
        problems.append(f"{iid}: no sources")
        sources = []
    for src in sources:
        for key in ("title", "url", "kind", "observed"):
            if not isinstance(src.get(key), str) or not src.get(key):
                problems.append(f"{iid}: source without {key}")
        if not str(src.get("url", "")).startswith("https://"):
            problems.append(f"{iid}: source URL is not https")
        if src.get("kind") not in SOURCE_KINDS:
            problems.append(f"{iid}: source kind {src.get('kind')!r}")
    return problems


def _range_problems(iid: str, rng: Mapping[str, Any], scheme: str) -> List[str]:
    from hwmgr.errors import VersionError

    problems: List[str] = []
    if set(rng) - {"introduced", "fixed"} or "fixed" not in rng:
        return [f"{iid}: a range needs 'fixed' (and at most 'introduced'): {dict(rng)}"]
    try:
        compare_versions(str(rng["fixed"]), str(rng["fixed"]), scheme)
        if "introduced" in rng and compare_versions(
                str(rng["introduced"]), str(rng["fixed"]), scheme) >= 0:
            problems.append(f"{iid}: introduced {rng['introduced']} is not before "
                            f"fixed {rng['fixed']}")
    except VersionError as exc:
        problems.append(f"{iid}: {exc}")
    return problems


def make_issue(driver: str, fixed: str, slug: str, severity: str, symptom: str,
               sources: Sequence[Mapping[str, str]],
               introduced: Optional[str] = None) -> Issue:
    """One known issue, id `<driver>-<fixed>-<slug>`, one driver-version range."""
    if not SLUG_RE.match(slug):
        raise MiningError(f"bad slug {slug!r}")
    rng: Dict[str, str] = {}
    if introduced:
        rng["introduced"] = introduced
    rng["fixed"] = fixed
    return {
        "id": f"{driver}-{fixed}-{slug}",
        "severity": severity,
        "symptom": symptom,
        "affected": {"driver_versions": [rng]},
        "sources": [dict(s) for s in sources],
    }


def check_all(drivers: Mapping[str, Iterable[Issue]],
              catalog_dir: Path = CATALOG_DRIVERS) -> None:
    """Raise `MiningError` listing every problem of the proposal (and duplicate ids)."""
    problems: List[str] = []
    for driver, issues in drivers.items():
        scheme = driver_scheme(driver, catalog_dir)
        seen: Dict[str, int] = {}
        for issue in issues:
            problems.extend(check_issue(issue, scheme))
            seen[issue["id"]] = seen.get(issue["id"], 0) + 1
        problems.extend(f"duplicate id {i}" for i, n in seen.items() if n > 1)
    if problems:
        raise MiningError("proposal does not fit the format:\n  " + "\n  ".join(problems))


def write_proposal(path: Path, source: str, drivers: Mapping[str, List[Issue]],
                   catalog_dir: Path = CATALOG_DRIVERS) -> None:
    """Check, then write the proposal file (2-space JSON, trailing newline)."""
    check_all(drivers, catalog_dir)
    doc = {"source": source,
           "drivers": {d: {"known_issues": list(v)} for d, v in sorted(drivers.items())}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_json(path: Path) -> Any:
    """A hand-written input file (mapping, reviewed facts)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MiningError(f"cannot read {path}: {exc}") from exc


def severity_counts(drivers: Mapping[str, Iterable[Issue]]) -> str:
    """`driver: n (severity n, ...)` lines for the summary the miners print."""
    lines = []
    for driver, issues in sorted(drivers.items()):
        counts: Dict[str, int] = {}
        total = 0
        for issue in issues:
            counts[issue["severity"]] = counts.get(issue["severity"], 0) + 1
            total += 1
        detail = ", ".join(f"{s} {counts[s]}" for s in SEVERITIES if s in counts)
        lines.append(f"{driver}: {total} ({detail})")
    return "\n".join(lines)
