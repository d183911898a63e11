#!/usr/bin/env python3
"""Propose ena known issues from Amazon's out-of-tree driver release notes.

Parses kernel/linux/ena/RELEASENOTES.md of github.com/amzn/amzn-drivers (one `## rX.Y.Z
release notes` section per release, with `**Bug Fixes**`-like sub-lists) and turns the
bug-fix items that a reviewed mapping (catalog-src/manual/ena_release_notes.json) selects
into known issues: fixed in that release, every earlier release affected unless the mapping
names the release whose notes first list the feature the bug sits in (then that release is
`introduced`, checked against the notes too). The mapping gives severity, slug and an
own-words symptom, and names each item by `item_key` (a hash of its text), never by its text.

Versions are the strings the driver reports (ethtool -i, modinfo): DRV_MODULE_GENERATION
(DRV_MODULE_VERSION before r2.2.4) is "X.Y.Z" plus a "g" for GitHub builds from r1.2.0 on,
bare "X.Y.Z" for r1.1.x and earlier (see REPORTED_SUFFIX_FROM).

Exact commands used (from the checkout's top, mirror fetched with the `fetch` tool):

    git -C $MIRRORS/amzn+amzn-drivers/repo show \
        64788ef7c182a9383445942b5f5f77fe1d25a290:kernel/linux/ena/RELEASENOTES.md \
        > /tmp/ena-RELEASENOTES.md
    .venv/bin/python catalog-src/ena_release_notes.py /tmp/ena-RELEASENOTES.md \
        --commit 64788ef7c182a9383445942b5f5f77fe1d25a290 \
        --output catalog-src/proposed/ena.json

`--list` prints every bug-fix item with its key instead (to review and extend the mapping).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vendor_notes_common import (  # noqa: E402  (the helper sits next to this script)
    Issue,
    MiningError,
    github_anchor,
    item_key,
    load_json,
    make_issue,
    severity_counts,
    write_proposal,
)

REPO = "amzn/amzn-drivers"
PATH = "kernel/linux/ena/RELEASENOTES.md"
HERE = Path(__file__).resolve().parent
DEFAULT_MAPPING = HERE / "manual" / "ena_release_notes.json"
DEFAULT_OUTPUT = HERE / "proposed" / "ena.json"
# From tag ena_linux_1.2.0 on the version macro ends in "g"; 1.1.x tags have no suffix.
REPORTED_SUFFIX_FROM = (1, 2, 0)
BUG_FIXES = "bug fixes"

RELEASE_RE = re.compile(r"^##\s+(r(\d+\.\d+\.\d+)\s+release notes)\s*$", re.IGNORECASE)
SECTION_RE = re.compile(r"^\*\*\s*([A-Za-z][A-Za-z ]*?)\s*:?\s*\*\*\s*:?\s*$")
BULLET_RE = re.compile(r"^\*\s+(.*\S)\s*$")
# Section names as the notes spell them, folded to one name each (r2.8.2 says "Buf Fixes").
SECTION_ALIASES = {"buf fixes": BUG_FIXES, "bug fixes": BUG_FIXES, "changes": "minor changes"}


@dataclass
class Release:
    """One `## rX.Y.Z release notes` section: items per (folded) sub-list name."""

    version: str
    heading: str
    sections: Dict[str, List[str]] = field(default_factory=dict)

    def items(self, section: str) -> List[str]:
        """The items of one sub-list ([] when the release has none)."""
        return self.sections.get(section, [])


def version_tuple(version: str) -> Tuple[int, ...]:
    """`2.13.1` -> (2, 13, 1)."""
    return tuple(int(p) for p in version.split("."))


def reported_version(release: str) -> str:
    """The version string a build of release `release` reports (ethtool -i, modinfo)."""
    if version_tuple(release) < REPORTED_SUFFIX_FROM:
        return release
    return release + "g"


def _fold(name: str) -> str:
    low = " ".join(name.lower().split())
    return SECTION_ALIASES.get(low, low)


def parse_release_notes(text: str) -> List[Release]:
    """The releases of RELEASENOTES.md, newest first as the file has them.

    Items are `* ` bullets; indented lines below a bullet continue it. Bullets before any
    `**...**` heading of a release land in section "unsectioned"."""
    releases: List[Release] = []
    current: Optional[Release] = None
    section = "unsectioned"
    item: Optional[List[str]] = None
    for raw in text.splitlines():
        line = raw.rstrip()
        m = RELEASE_RE.match(line)
        if m:
            current = Release(version=m.group(2), heading=m.group(1))
            releases.append(current)
            section, item = "unsectioned", None
            continue
        if current is None:
            continue
        if line.startswith("## "):  # another top-level part: stop collecting
            current, item = None, None
            continue
        m = SECTION_RE.match(line.strip())
        if m:
            section, item = _fold(m.group(1)), None
            continue
        m = BULLET_RE.match(line)
        if m:
            item = [m.group(1)]
            current.sections.setdefault(section, []).append(m.group(1))
            continue
        if item is not None and line[:1] in (" ", "\t") and line.strip():
            item.append(line.strip())
            current.sections[section][-1] = " ".join(item)
            continue
        if not line.strip():
            item = None
    return releases


def find_release(releases: List[Release], version: str) -> Release:
    """The release section of `version` (MiningError when the notes have none)."""
    for rel in releases:
        if rel.version == version:
            return rel
    raise MiningError(f"the notes have no r{version} section")


def find_item(release: Release, section: str, key: str) -> str:
    """The item of `release`'s `section` whose `item_key` is `key`."""
    for text in release.items(section):
        if item_key(text) == key:
            return text
    raise MiningError(f"r{release.version} has no {section!r} item with key {key}")


def source_url(commit: str, release: Release) -> str:
    """The release's section of RELEASENOTES.md at `commit` on GitHub."""
    return (f"https://github.com/{REPO}/blob/{commit}/{PATH}"
            f"#{github_anchor(release.heading)}")


def observed(fixed: Release, intro: Optional[Release], intro_section: str) -> str:
    """What the notes state about the affected and fixed releases, in our own words."""
    fixed_rep = reported_version(fixed.version)
    text = (f"The r{fixed.version} notes list this among their bug fixes: {fixed_rep} "
            f"(r{fixed.version}) is the first release with the fix. They name no first "
            f"affected release")
    if intro is None:
        return text + ", so every earlier release counts as affected."
    return (text + f"; the r{intro.version} notes list the feature it sits in among their "
            f"{intro_section}, so releases from {reported_version(intro.version)} up to the "
            f"fix count as affected.")


def build_issues(releases: List[Release], mapping: Mapping[str, Any],
                 commit: str) -> List[Issue]:
    """The known issues the mapping selects from the parsed notes."""
    issues: List[Issue] = []
    for entry in mapping.get("issues", []):
        fixed = find_release(releases, entry["release"])
        find_item(fixed, BUG_FIXES, entry["item"])
        intro: Optional[Release] = None
        intro_section = ""
        introduced: Optional[str] = None
        spec = entry.get("introduced")
        if spec:
            intro = find_release(releases, spec["release"])
            intro_section = _fold(spec["section"])
            find_item(intro, intro_section, spec["item"])
            introduced = reported_version(intro.version)
        sources = [{
            "title": f"{REPO} {PATH}, r{fixed.version} release notes",
            "url": source_url(commit, fixed),
            "kind": "release-notes",
            "observed": observed(fixed, intro, intro_section),
        }]
        issues.append(make_issue("ena", reported_version(fixed.version), entry["slug"],
                                 entry["severity"], entry["symptom"], sources, introduced))
    return issues


def list_items(releases: List[Release]) -> str:
    """Every bug-fix item as `release  key  text`, for reviewing the mapping."""
    out = []
    for rel in releases:
        for text in rel.items(BUG_FIXES):
            out.append(f"{rel.version:8} {item_key(text)}  {text}")
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notes", type=Path, help="RELEASENOTES.md as fetched")
    ap.add_argument("--commit", help="amzn-drivers commit the file was read at (for URLs)")
    ap.add_argument("--mapping", type=Path, default=DEFAULT_MAPPING)
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    ap.add_argument("--list", action="store_true", help="print the bug-fix items and keys")
    args = ap.parse_args(argv)
    try:
        releases = parse_release_notes(args.notes.read_text(encoding="utf-8"))
        if args.list:
            print(list_items(releases))
            return 0
        if not args.commit or not re.fullmatch(r"[0-9a-f]{40}", args.commit):
            raise MiningError("--commit must be the 40-hex commit the notes were read at")
        issues = build_issues(releases, load_json(args.mapping), args.commit)
        source = f"https://github.com/{REPO}/blob/{args.commit}/{PATH} ({REPO}@{args.commit})"
        write_proposal(args.output, source, {"ena": issues})
    except (MiningError, OSError, KeyError) as exc:
        print(f"ena_release_notes: {exc}", file=sys.stderr)
        return 1
    total = sum(len(r.items(BUG_FIXES)) for r in releases)
    print(f"{len(releases)} releases, {total} bug-fix items, {len(issues)} proposed "
          f"-> {args.output}")
    print(severity_counts({"ena": issues}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
