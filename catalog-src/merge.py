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

An item is replaced whole, so an `only_when` that `conditions.py --write` added is dropped
with it: run `.venv/bin/python catalog-src/conditions.py --write` after every merge (it
gives each issue its condition again, from the same patterns and reviewed overrides).

A proposal of kernel lines (catalog-src/proposed/rhel-kernels.json: {"lines": {"el9":
{CVE: {"fixed", "urls", "evidence"}}}, "streams": {"el9": {stream: last build read}}})
adds an `elN` line to the known issue with that id, with the changelog as a source:

    .venv/bin/python catalog-src/merge.py --kernel-lines catalog-src/proposed/rhel-kernels.json

Only where the upstream record says the bug is older than the kernel the EL release is built
on (3.10 for el7, 4.18 for el8, 5.14 for el9): every build of that line before the fix carried
it. A bug that came later upstream reached RHEL by a backport at a build no source names, so
that issue gets no line. An Ubuntu line's proposal (catalog-src/ubuntu_kernels.py) names its
base, the last whole upstream release the line took: only an issue whose upstream range
holds that release gets the line.
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


EL_BASE = {"el7": "3.10", "el8": "4.18", "el9": "5.14", "el10": "6.12"}


def _before(a: str, b: str) -> bool:
    """Upstream version a <= b (X.Y or X.Y.Z)."""
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split(".")[:3])
    return key(a) <= key(b)


def _line_carries(line: str, up: dict[str, Any], bases: dict[str, str]) -> bool:
    """Whether the upstream range says the line's base carries the bug: on EL, introduced
    before the kernel RHEL builds on; on an Ubuntu line, its last whole stable release
    (`bases`, from the proposal) is inside the range (ubuntu_kernels.upstream_carries)."""
    if line in EL_BASE:
        return bool(up.get("introduced")) and _before(up["introduced"], EL_BASE[line])
    base = bases.get(line)
    if not base or not up:
        return False
    from ubuntu_kernels import upstream_carries  # its directory is first on sys.path
    return upstream_carries(up, base)


def merge_kernel_lines(proposal: Path, drivers_dir: Path = DRIVERS) -> list[str]:
    """Add each proposed EL line to the catalog's known issue of the same id (see above)."""
    doc = json.loads(proposal.read_text(encoding="utf-8"))
    out = []
    for path in sorted(drivers_dir.glob("*.json")):
        cat = json.loads(path.read_text(encoding="utf-8"))
        changed = 0
        for name, entry in cat["drivers"].items():
            for issue in entry.get("known_issues", []):
                for line, found in doc.get("lines", {}).items():
                    got = found.get(issue["id"])
                    up = issue["affected"].get("kernels", {}).get("upstream", {})
                    if not got or not _line_carries(line, up, doc.get("bases", {})):
                        continue
                    rng = {"fixed": got["fixed"]}
                    if doc.get("streams", {}).get(line):
                        rng["read_to"] = doc["streams"][line]
                    issue["affected"]["kernels"][line] = rng
                    issue["sources"] = [s for s in issue["sources"]
                                        if not str(s.get("title", "")).startswith(
                                            f"{line} kernel changelog")]
                    since = (f"upstream has it since {up['introduced']}"
                             if up.get("introduced") else "upstream names no first release")
                    issue["sources"] += [{"title": f"{line} kernel changelog: {fix}",
                                          "url": url, "kind": "changelog",
                                          "observed": f"{ev}; the builds of {line} before it "
                                                      f"carried the bug ({since})"}
                                         for fix, url, ev in zip(got["fixed"], got["urls"],
                                                                 got["evidence"])]
                    changed += 1
                    out.append(f"{proposal.name}: {name} {issue['id']}: {line} "
                               f"{', '.join(got['fixed'])}")
        if changed:
            path.write_text(json.dumps(cat, indent=1, ensure_ascii=False) + "\n",
                            encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    """Merge every proposal named, in order."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", choices=("vendor", "in-tree"),
                    help="the builds these proposals' version ranges judge")
    ap.add_argument("--kernel-lines", action="store_true",
                    help="the proposals add EL kernel lines to known issues by id")
    ap.add_argument("proposals", nargs="+", type=Path)
    args = ap.parse_args(argv)
    for proposal in args.proposals:
        merged = merge_kernel_lines(proposal) if args.kernel_lines else merge_file(
            proposal, build=args.build)
        for line in merged:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
