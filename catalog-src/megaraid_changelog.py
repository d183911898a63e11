#!/usr/bin/env python3
"""Mine the kernel's Documentation/scsi/ChangeLog.megaraid_sas into proposed known issues.

Input: one or more copies of the ChangeLog, each named NAME=PATH, where NAME is a key of
"sources" in catalog-src/manual/megaraid_changelog.json (that entry gives the copy's URL and
title). A ChangeLog release block has a "Release Date" line, "Current Version : X" and
"Old(er) Version : Y" (some blocks number these lines "1", "2", "3") and numbered items
"1. ...", "2. ...". Blocks and items are parsed mechanically; the reviewed facts (which item
is a defect, its severity, the symptom in own words) are keyed by current version and item
number in the manual file. Each entry is fixed in the block's current version; the previous
version the block names is recorded in the source's observation. The ChangeLog states no
version that introduced a defect, so no "introduced" is set. megaraid_sas reports
MEGASAS_VERSION (e.g. "06.803.02.00-rc1") through modinfo and /sys/module/megaraid_sas/version.

Commands used (from the repository root, with the project's virtualenv; the two inputs are
the texts read from torvalds/linux at bf550fc93d98 and from a current mainline copy,
Kingxukai/linux at 0291023e7330, for the three newest blocks):

    .venv/bin/python catalog-src/megaraid_changelog.py \
        torvalds=/tmp/megaraid/ChangeLog.megaraid_sas.torvalds-bf550fc9 \
        kingxukai=/tmp/megaraid/ChangeLog.megaraid_sas.kingxukai-0291023e \
        -o catalog-src/proposed/storage.json --update
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import kiproposal as kp

HERE = Path(__file__).resolve().parent
MANUAL = HERE / "manual" / "megaraid_changelog.json"
DRIVER = "megaraid_sas"

CURRENT = re.compile(r"^\s*(?:\d\s+)?Current Version\s*:\s*(\S+)")
OLDER = re.compile(r"^\s*(?:\d\s+)?Old(?:er)? Version\s*:\s*(\S+)")
ITEM = re.compile(r"^\s*(\d+)\.\s*(\S.*)$")


@dataclass
class Release:
    """One release block of the ChangeLog."""

    current: str
    older: str
    items: Dict[int, str] = field(default_factory=dict)


def parse_changelog(text: str) -> List[Release]:
    """Release blocks in file order, with their numbered items (1, 2, ... in sequence)."""
    releases: List[Release] = []
    cur: Optional[Release] = None
    last = 0
    for line in text.splitlines():
        if "Release Date" in line:
            cur, last = None, 0
            continue
        m = CURRENT.match(line)
        if m:
            cur = Release(current=m.group(1), older="")
            releases.append(cur)
            continue
        m = OLDER.match(line)
        if m and cur is not None:
            cur.older = m.group(1)
            continue
        m = ITEM.match(line)
        if m and cur is not None and int(m.group(1)) == last + 1:
            last = int(m.group(1))
            cur.items[last] = m.group(2).strip()
    return releases


def build(inputs: Sequence[Tuple[str, str]], manual: Dict[str, Any]) -> List[kp.Entry]:
    """Known issues from the reviewed items; `inputs` are (source name, text) pairs."""
    found: Dict[str, Tuple[str, Release]] = {}
    for name, text in inputs:
        if name not in manual["sources"]:
            raise kp.ProposalError(f"unknown source name {name!r}")
        for rel in parse_changelog(text):
            found.setdefault(rel.current, (name, rel))
    entries: List[kp.Entry] = []
    for fact in manual["entries"]:
        version, item = fact["version"], int(fact["item"])
        if version not in found:
            raise kp.ProposalError(f"release {version} is in none of the inputs")
        name, rel = found[version]
        if item not in rel.items:
            raise kp.ProposalError(f"release {version} has no item {item}")
        src = manual["sources"][name]
        source = kp.make_source(
            title=src["title"], url=src["url"], kind="changelog",
            observed=(f"the ChangeLog block for release {rel.current} (previous release "
                      f"{rel.older or 'not named'}) lists this as item {item}: present up to "
                      f"{rel.older or 'the previous release'}, fixed in {rel.current}"))
        entries.append(kp.make_entry(
            DRIVER, f"{DRIVER}-{rel.current}-{fact['slug']}", fact["severity"],
            fact["symptom"], [{"fixed": rel.current}], [source], fact.get("applies_to")))
    return entries


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", metavar="NAME=PATH",
                    help="ChangeLog copies, NAME a key of the manual file's sources")
    ap.add_argument("-o", "--output", type=Path, default=HERE / "proposed" / "storage.json")
    ap.add_argument("--manual", type=Path, default=MANUAL)
    ap.add_argument("--update", action="store_true",
                    help="keep the other drivers of an existing output file")
    args = ap.parse_args(argv)
    manual = kp.load_manual(args.manual)
    pairs: List[Tuple[str, str]] = []
    for spec in args.inputs:
        name, sep, path = spec.partition("=")
        if not sep:
            ap.error(f"{spec!r} is not NAME=PATH")
        pairs.append((name, Path(path).read_text(encoding="utf-8")))
    entries = build(pairs, manual)
    urls = ", ".join(manual["sources"][n]["url"] for n, _ in pairs)
    kp.write_proposal(args.output, f"megaraid_sas ChangeLog: {urls}", {DRIVER: entries},
                      update=args.update)
    print(f"{args.output}: {DRIVER}: {len(entries)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
