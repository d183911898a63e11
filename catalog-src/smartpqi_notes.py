#!/usr/bin/env python3
"""Mine the Microchip smartpqi driver changelog into proposed smartpqi known issues.

Input: README.md of Microchip's out-of-tree smartpqi driver (github.com/Smart-Storage/smartpqi),
whose "## Changelog" section lists, per driver version ("Version 2.1.36-026 (August 2025)"),
top-level bullets; a fix bullet is followed by indented Root Cause / Fix / Risk lines.

The changelog is parsed mechanically into (version, bullet number, bullet). The reviewed facts
(which bullets are defects, their severity and the symptom in own words) are in
catalog-src/manual/smartpqi_notes.json, keyed by version and bullet number; the script checks
that each reviewed bullet exists and reads as a fix, and emits an entry with "fixed" = the
version the bullet is listed under (a fix the changelog words as added support is accepted
when the reviewed fact says "framed_as_feature"). The changelog never names the version that
introduced a defect, so no "introduced" is set. smartpqi reports DRIVER_VERSION
("2.1.36-026") in modinfo, /sys/module/smartpqi/version and the host's driver_version
attribute; the in-tree module carries the same numbering.

Commands used (from the repository root, with the project's virtualenv):

    git --git-dir $MIRRORS/Smart-Storage+smartpqi/repo \
        show 2f251c573cd8136780569644b4c8333817a2659f:README.md > /tmp/smartpqi-README.md
    .venv/bin/python catalog-src/smartpqi_notes.py /tmp/smartpqi-README.md \
        -o catalog-src/proposed/storage.json --update
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import kiproposal as kp

HERE = Path(__file__).resolve().parent
MANUAL = HERE / "manual" / "smartpqi_notes.json"
DRIVER = "smartpqi"

VERSION_LINE = re.compile(r"^Version (\S+)(?:\s+\(([^)]*)\))?\s*$")
BULLET = re.compile(r"^( {0,2})- {1,2}(\S.*)$")
SUB_WORDS = re.compile(r"^(?:Fix|Root [Cc]ause|Risk)\b")
FIX_WORDS = re.compile(r"^(?:Fixed|Corrected|Added a timeout|In some situations|Due to a)\b")
FEATURE_WORDS = re.compile(r"^Added support\b")


@dataclass
class Bullet:
    """One top-level changelog bullet."""

    version: str
    date: str
    number: int
    text: str


def parse_changelog(text: str) -> List[Bullet]:
    """Top-level bullets of the '## Changelog' section, numbered from 1 per version."""
    _, found, section = text.partition("## Changelog")
    if not found:
        raise kp.ProposalError("no '## Changelog' section")
    section = section.split("\n## ", 1)[0]
    bullets: List[Bullet] = []
    version: Optional[Tuple[str, str]] = None
    number = 0
    for line in section.splitlines():
        v = VERSION_LINE.match(line)
        if v:
            version, number = (v.group(1), v.group(2) or ""), 0
            continue
        b = BULLET.match(line)
        if version is None or not b or SUB_WORDS.match(b.group(2)):
            continue
        number += 1
        bullets.append(Bullet(version[0], version[1], number, b.group(2)))
    return bullets


def build(text: str, manual: Dict[str, Any]) -> List[kp.Entry]:
    """The reviewed bullets as known issues."""
    bullets = {(b.version, b.number): b for b in parse_changelog(text)}
    url: str = manual["url"]
    title: str = manual["title"]
    entries: List[kp.Entry] = []
    for fact in manual["entries"]:
        key = (fact["version"], int(fact["item"]))
        b = bullets.get(key)
        if b is None:
            raise kp.ProposalError(f"no bullet {key[1]} under version {key[0]}")
        framed = bool(fact.get("framed_as_feature")) and FEATURE_WORDS.match(b.text)
        if not (FIX_WORDS.match(b.text) or framed):
            raise kp.ProposalError(f"bullet {key[1]} of {key[0]} does not read as a fix")
        when = f" ({b.date})" if b.date else ""
        source = kp.make_source(
            title=title, url=url, kind="changelog",
            observed=(f"the changelog lists this fix as item {b.number} of version "
                      f"{b.version}{when}; it names no version that introduced the defect, "
                      f"so versions before {b.version} are taken as affected"))
        entries.append(kp.make_entry(
            DRIVER, f"{DRIVER}-{b.version}-{fact['slug']}", fact["severity"],
            fact["symptom"], [{"fixed": b.version}], [source], fact.get("applies_to")))
    return entries


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("readme", type=Path, help="smartpqi README.md with its Changelog")
    ap.add_argument("-o", "--output", type=Path, default=HERE / "proposed" / "storage.json")
    ap.add_argument("--manual", type=Path, default=MANUAL)
    ap.add_argument("--update", action="store_true",
                    help="keep the other drivers of an existing output file")
    args = ap.parse_args(argv)
    manual = kp.load_manual(args.manual)
    entries = build(args.readme.read_text(encoding="utf-8"), manual)
    kp.write_proposal(args.output, f"smartpqi changelog: {manual['url']}", {DRIVER: entries},
                      update=args.update)
    print(f"{args.output}: {DRIVER}: {len(entries)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
