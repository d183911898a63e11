#!/usr/bin/env python3
"""Fold reviewed proposals (catalog-src/proposed/*.json) into catalogs/drivers/<driver>.json.

Each proposal is {"source": ..., "drivers": {"<driver>": {"known_issues": [...],
"firmware_requirements": [...]}}}. An item replaces the driver's item with the same id, or is
appended; items the proposal does not name are kept. The driver files are rewritten in their
own format (indent 1, a final newline), so a review sees only what the proposal changed; then
`hwmgr catalog validate catalogs` judges the result. Run by hand from the checkout:

    .venv/bin/python catalog-src/merge.py catalog-src/proposed/kernel-cves.json \
        catalog-src/proposed/storage.json catalog-src/proposed/firmware.json
    .venv/bin/python catalog-src/merge.py --build vendor catalog-src/proposed/ena.json \
        catalog-src/proposed/bnxt.json catalog-src/proposed/intel.json \
        catalog-src/proposed/mlnx.json

`--build vendor` marks the known issues of a vendor's own release notes as judging vendor
builds only: the kernel's in-tree driver of the same name is another code line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DRIVERS = REPO / "catalogs" / "drivers"
KEYS = ("known_issues", "firmware_requirements")


def merge_items(have: list[dict[str, Any]], new: list[dict[str, Any]]) -> tuple[int, int]:
    """Replace by id or append, in place; (replaced, added)."""
    index = {item["id"]: i for i, item in enumerate(have)}
    replaced = added = 0
    for item in new:
        if item["id"] in index:
            have[index[item["id"]]] = item
            replaced += 1
        else:
            index[item["id"]] = len(have)
            have.append(item)
            added += 1
    return replaced, added


def merge_file(proposal: Path, drivers_dir: Path = DRIVERS,
               build: str | None = None) -> list[str]:
    """Merge one proposal; a line per driver and key saying what changed. `build` stamps
    the known issues that name no build of their own."""
    doc = json.loads(proposal.read_text(encoding="utf-8"))
    if build:
        for parts in doc.get("drivers", {}).values():
            for issue in parts.get("known_issues", []):
                issue.setdefault("build", build)
    out = []
    for name, parts in sorted(doc.get("drivers", {}).items()):
        path = drivers_dir / f"{name}.json"
        if not path.is_file():
            out.append(f"{proposal.name}: {name}: no catalogs/drivers/{name}.json, skipped")
            continue
        cat = json.loads(path.read_text(encoding="utf-8"))
        entry = cat["drivers"][name]
        for key in KEYS:
            if parts.get(key):
                replaced, added = merge_items(entry.setdefault(key, []), parts[key])
                out.append(f"{proposal.name}: {name}.{key}: {added} added, "
                           f"{replaced} replaced")
        path.write_text(json.dumps(cat, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    """Merge every proposal named, in order."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", choices=("vendor", "in-tree"),
                    help="the builds these proposals' version ranges judge")
    ap.add_argument("proposals", nargs="+", type=Path)
    args = ap.parse_args(argv)
    for proposal in args.proposals:
        for line in merge_file(proposal, build=args.build):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
