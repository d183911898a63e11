#!/usr/bin/env python3
"""Propose bnxt_en known issues from Broadcom's out-of-tree driver release notes.

Parses the RELEASE.TXT of a Broadcom netxtreme-bnxt_en package (one `vX.Y.Z (Mon D, YYYY)`
block per release, with numbered items under `Fixes:` / `Enhancements:` / `Known Issues:`)
and turns the `Fixes:` items that a reviewed mapping (catalog-src/manual/bnxt_release_txt.json)
selects into known issues: fixed in that release, every earlier release affected unless the
mapping points at the release whose own item says it brought the bug (then `introduced`). The
mapping gives severity, slug and an own-words symptom and names each item by `item_key`.

Broadcom kept maintenance branches (1.2.8 came out after 1.2.20; 1.3.0-1.3.2 after 1.3.20-
1.3.23), so a version number alone does not tell whether a release has a fix. A fix is only
proposed when its release is in order with every other release of the file: all lower
versions dated no later, all higher versions no earlier (`in_order`); others are refused.

The driver reports DRV_MODULE_VERSION (bnxt.h), "1.7.23" in the 1.7.23 package, in
ethtool -i and modinfo: the bare release number, as the ranges use it.

Exact commands used (from the checkout's top, mirror fetched with the `fetch` tool):

    C=fcc253f6b7c09653ea9210c1596f3ac60b1aaf6f
    git -C $MIRRORS/Broadcom+linux_nxt_cert_ofed4.8/repo show \
        $C:netxtreme-bnxt_en-1.7.23/bnxt_en-1.7.23/RELEASE.TXT > /tmp/bnxt_en-1.7.23-RELEASE.TXT
    .venv/bin/python catalog-src/bnxt_changelog.py /tmp/bnxt_en-1.7.23-RELEASE.TXT \
        --commit $C \
        --output catalog-src/proposed/bnxt.json

`--list` prints every Fixes item with its key and whether its release is in order.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vendor_notes_common import (  # noqa: E402  (the helper sits next to this script)
    Issue,
    MiningError,
    item_key,
    load_json,
    make_issue,
    severity_counts,
    write_proposal,
)

REPO = "Broadcom/linux_nxt_cert_ofed4.8"
PATH = "netxtreme-bnxt_en-1.7.23/bnxt_en-1.7.23/RELEASE.TXT"
HERE = Path(__file__).resolve().parent
DEFAULT_MAPPING = HERE / "manual" / "bnxt_release_txt.json"
DEFAULT_OUTPUT = HERE / "proposed" / "bnxt.json"
FIXES = "fixes"

RELEASE_RE = re.compile(r"^v(\d+\.\d+(?:\.\d+)?)\s*\(([A-Za-z]+)\.?\s+(\d{1,2}),\s*(\d{4})\)\s*$")
SECTION_RE = re.compile(r"^([A-Z][A-Za-z ]+):\s*$")
ITEM_RE = re.compile(r"^\s+(\d+)\.\s+(.*\S)\s*$")
MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}


@dataclass
class Release:
    """One `vX.Y.Z (date)` block of RELEASE.TXT: numbered items per section name."""

    version: str
    date: datetime.date
    sections: Dict[str, List[str]] = field(default_factory=dict)

    def items(self, section: str) -> List[str]:
        """The items of one section ([] when the release has none)."""
        return self.sections.get(section, [])


def version_tuple(version: str) -> Tuple[int, ...]:
    """`1.7.23` -> (1, 7, 23)."""
    return tuple(int(p) for p in version.split("."))


def parse_release_txt(text: str) -> List[Release]:
    """The releases of RELEASE.TXT in file order (newest first).

    Items are `N.` / `0N.` numbered lines; deeper-indented lines below continue them; a
    blank line or a `Word:` heading ends an item. Text outside a section is ignored."""
    releases: List[Release] = []
    current: Optional[Release] = None
    section: Optional[str] = None
    item: Optional[List[str]] = None
    for raw in text.expandtabs(8).splitlines():
        line = raw.rstrip()
        m = RELEASE_RE.match(line)
        if m:
            month = MONTHS.get(m.group(2)[:3].lower())
            if month is None:
                raise MiningError(f"unknown month in {line!r}")
            day = datetime.date(int(m.group(4)), month, int(m.group(3)))
            current = Release(version=m.group(1), date=day)
            releases.append(current)
            section, item = None, None
            continue
        if current is None:
            continue
        if line.startswith("====="):
            item = None
            continue
        m = SECTION_RE.match(line.strip()) if not line[:1].isspace() or line.strip() else None
        if m and not ITEM_RE.match(line):
            section, item = m.group(1).strip().lower(), None
            continue
        m = ITEM_RE.match(line)
        if m and section is not None:
            item = [m.group(2)]
            current.sections.setdefault(section, []).append(m.group(2))
            continue
        if item is not None and line.strip() and section is not None:
            item.append(line.strip())
            current.sections[section][-1] = " ".join(item)
            continue
        item = None
    return releases


def in_order(releases: List[Release], release: Release) -> bool:
    """True when no lower version is dated after `release` and no higher one before it."""
    key = version_tuple(release.version)
    for other in releases:
        okey = version_tuple(other.version)
        if okey < key and other.date > release.date:
            return False
        if okey > key and other.date < release.date:
            return False
    return True


def find_release(releases: List[Release], version: str) -> Release:
    """The block of `version` (MiningError when the file has none)."""
    for rel in releases:
        if rel.version == version:
            return rel
    raise MiningError(f"RELEASE.TXT has no v{version} block")


def find_item(release: Release, section: str, key: str) -> str:
    """The item of `release`'s `section` whose `item_key` is `key`."""
    for text in release.items(section):
        if item_key(text) == key:
            return text
    raise MiningError(f"v{release.version} has no {section!r} item with key {key}")


def observed(fixed: Release, intro: Optional[Release]) -> str:
    """What RELEASE.TXT states about the affected and fixed releases, in our own words."""
    text = (f"The v{fixed.version} block ({fixed.date.isoformat()}) lists this under Fixes, "
            f"so {fixed.version} is the first release with the fix; its releases before and "
            f"after are dated in version order")
    if intro is None:
        return text + ", and no first affected release is named, so every earlier one counts."
    return (text + f"; the fix item itself names v{intro.version} as the release that "
            f"brought the bug, so the range starts there.")


def build_issues(releases: List[Release], mapping: Mapping[str, Any],
                 commit: str) -> List[Issue]:
    """The known issues the mapping selects from the parsed file."""
    issues: List[Issue] = []
    for entry in mapping.get("issues", []):
        fixed = find_release(releases, entry["release"])
        find_item(fixed, FIXES, entry["item"])
        if not in_order(releases, fixed):
            raise MiningError(f"v{fixed.version} is out of version/date order (a branch "
                              f"release): its fix cannot be placed by version")
        intro: Optional[Release] = None
        if entry.get("introduced"):
            intro = find_release(releases, entry["introduced"])
        sources = [{
            "title": f"Broadcom bnxt_en 1.7.23 release notes (RELEASE.TXT), v{fixed.version}",
            "url": f"https://github.com/{REPO}/blob/{commit}/{PATH}",
            "kind": "release-notes",
            "observed": observed(fixed, intro),
        }]
        issues.append(make_issue("bnxt_en", fixed.version, entry["slug"], entry["severity"],
                                 entry["symptom"], sources,
                                 intro.version if intro else None))
    return issues


def list_items(releases: List[Release]) -> str:
    """Every Fixes item as `release order key text`, for reviewing the mapping."""
    out = []
    for rel in releases:
        flag = "ok " if in_order(releases, rel) else "OOO"
        for text in rel.items(FIXES):
            out.append(f"{rel.version:8} {flag} {item_key(text)}  {text}")
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("release_txt", type=Path, help="RELEASE.TXT as fetched")
    ap.add_argument("--commit", help="commit of the repository the file was read at")
    ap.add_argument("--mapping", type=Path, default=DEFAULT_MAPPING)
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    ap.add_argument("--list", action="store_true", help="print the Fixes items and keys")
    args = ap.parse_args(argv)
    try:
        releases = parse_release_txt(args.release_txt.read_text(encoding="utf-8"))
        if args.list:
            print(list_items(releases))
            return 0
        if not args.commit or not re.fullmatch(r"[0-9a-f]{40}", args.commit):
            raise MiningError("--commit must be the 40-hex commit the file was read at")
        issues = build_issues(releases, load_json(args.mapping), args.commit)
        source = f"https://github.com/{REPO}/blob/{args.commit}/{PATH} ({REPO}@{args.commit})"
        write_proposal(args.output, source, {"bnxt_en": issues})
    except (MiningError, OSError, KeyError) as exc:
        print(f"bnxt_changelog: {exc}", file=sys.stderr)
        return 1
    total = sum(len(r.items(FIXES)) for r in releases)
    print(f"{len(releases)} releases, {total} Fixes items, {len(issues)} proposed "
          f"-> {args.output}")
    print(severity_counts({"bnxt_en": issues}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
