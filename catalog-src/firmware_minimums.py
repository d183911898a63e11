#!/usr/bin/env python3
"""Propose driver-to-firmware floors (firmware_requirements) from reviewed facts and tables.

Input: catalog-src/manual/firmware.json, hand-reviewed facts, each citing a GitHub file at a
commit with the lines that state it, plus tables the script parses from the fetched files
themselves (the ice README's VF LAG minimal-NVM grid table, the DPDK mlx5 guide's list of
minimal firmware). Output: catalog-src/proposed/firmware.json for `catalog-src/merge.py`
(format: docs/known-issues.md, "A firmware requirement"). Run from the checkout's top:

    .venv/bin/python catalog-src/firmware_minimums.py --mirrors $MIRRORS \
        --output catalog-src/proposed/firmware.json

where $MIRRORS/<owner>+<name>/repo are git directories (bare clones) of the cited
repositories, fetched by hand
(intel/ethernet-linux-ice, intel/ethernet-linux-i40e, weka/netxtreme-bnxt_en, DPDK/dpdk,
knneth/mlnx-ofa_kernel), e.g. as the search tool's `fetch` brings them. Files are read with
`git show <commit>:<path>`, so the checkouts' current branches do not matter. `--check`
rebuilds and compares with the existing output instead of writing it (exit 1 when stale).

Every cited line span is checked for the version strings the fact expects (`expect`), every
table is re-parsed, and the result is validated against the catalog: the driver exists, each
applies_to ref is one of its devices, driver_versions parse in its version_scheme, min parses
in its firmware_scheme, ids are unique and read <driver>-<driver version>-fw-<min>. Intel NVM
versions a source writes with one minor digit ("2.4") become the two-hex-digit form ice and
i40e print in ethtool -i ("2.40"); nothing else is rewritten.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

TOP = Path(__file__).resolve().parent.parent
if str(TOP) not in sys.path:
    sys.path.insert(0, str(TOP))

from hwmgr.catalog import versions  # noqa: E402  (the checkout's own package)
from hwmgr.errors import VersionError  # noqa: E402

DEFAULT_MANUAL = TOP / "catalog-src" / "manual" / "firmware.json"
DEFAULT_OUTPUT = TOP / "catalog-src" / "proposed" / "firmware.json"
DEFAULT_CATALOG = TOP / "catalogs" / "drivers"
FIRMWARE_SCHEME = "firmware"  # an entry's firmware_scheme when it names none

GITHUB_BLOB = re.compile(
    r"^https://github\.com/(?P<owner>[A-Za-z0-9_.-]+)/(?P<name>[A-Za-z0-9_.-]+)"
    r"/blob/(?P<commit>[0-9a-f]{40})/(?P<path>[^#?\s]+)$")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
BOLD_BULLET = re.compile(
    r"^\s*-\s+(?P<row>[^:]+?):\s+\*\*(?P<value>[0-9][0-9.]*)\*\*\s+and above\.?\s*$")
SHORT_NVM = re.compile(r"^(?P<major>[0-9]+)\.(?P<minor>[0-9])$")

Json = Dict[str, Any]


class Failure(Exception):
    """A fact, table or catalog check that does not hold; the message says which."""


# ------------------------------------------------------------------ reading sources
class Mirrors:
    """Files of the cited repositories, read from local git directories at a commit."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: Dict[Tuple[str, str, str], List[str]] = {}
        self.read_files: List[str] = []

    def lines(self, url: str) -> List[str]:
        m = GITHUB_BLOB.match(url)
        if not m:
            raise Failure(f"{url}: not a GitHub file at a 40-hex commit")
        repo = f"{m['owner']}/{m['name']}"
        key = (repo, m["commit"], m["path"])
        if key not in self._cache:
            gitdir = self.root / f"{m['owner']}+{m['name']}" / "repo"
            if not gitdir.is_dir():
                raise Failure(f"{url}: no git directory {gitdir} (fetch github:{repo} first)")
            proc = subprocess.run(
                ["git", "--git-dir", str(gitdir), "show", f"{m['commit']}:{m['path']}"],
                capture_output=True, text=True, errors="replace", check=False)
            if proc.returncode != 0:
                raise Failure(f"{url}: git show failed: {proc.stderr.strip()}")
            self._cache[key] = proc.stdout.splitlines()
            self.read_files.append(f"{repo}@{m['commit'][:12]}:{m['path']}")
        return self._cache[key]


def anchored(url: str, first: int, last: int) -> str:
    return f"{url}#L{first}" if first == last else f"{url}#L{first}-L{last}"


def check_span(mirrors: Mirrors, ref: Json) -> str:
    """The cited lines hold every expected string; returns the URL with its line anchor."""
    lines = mirrors.lines(ref["url"])
    first, last = ref["lines"]
    if not 1 <= first <= last <= len(lines):
        raise Failure(f"{ref['url']}: lines {first}-{last} outside the file ({len(lines)})")
    text = "\n".join(lines[first - 1:last])
    for token in ref.get("expect", []):
        if token not in text:
            raise Failure(f"{ref['url']}#L{first}-L{last}: {token!r} not on the cited lines")
    return anchored(ref["url"], first, last)


def find_anchor(lines: Sequence[str], anchor: str, url: str) -> int:
    hits = [i for i, line in enumerate(lines) if anchor in line]
    if len(hits) != 1:
        raise Failure(f"{url}: anchor {anchor!r} found {len(hits)} times, expected once")
    return hits[0]


def parse_rst_grid(lines: Sequence[str], anchor: str,
                   url: str) -> Tuple[List[str], Dict[str, List[str]], int, int]:
    """The reStructuredText grid table after the anchor: header cells, rows by first cell,
    and the 1-based line span from the anchor to the table's last border."""
    start = find_anchor(lines, anchor, url)
    i = start + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or not lines[i].startswith("+"):
        raise Failure(f"{url}: no grid table after {anchor!r}")
    header: List[str] = []
    rows: Dict[str, List[str]] = {}
    while i < len(lines) and lines[i].startswith(("+", "|")):
        line = lines[i]
        if line.startswith("|") and not line.startswith("|="):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not header:
                header = cells
            else:
                if len(cells) != len(header):
                    raise Failure(f"{url}#L{i + 1}: {len(cells)} cells, header has "
                                  f"{len(header)}")
                rows[cells[0]] = cells[1:]
        i += 1
    if not header or not rows:
        raise Failure(f"{url}: empty grid table after {anchor!r}")
    return header[1:], rows, start + 1, i


def parse_rst_bold_bullets(lines: Sequence[str], anchor: str,
                           url: str) -> Tuple[Dict[str, str], int, int]:
    """'- Product: **version** and above.' items after the anchor, up to the list's end."""
    start = find_anchor(lines, anchor, url)
    items: Dict[str, str] = {}
    i, last = start + 1, start + 1
    while i < len(lines):
        m = BOLD_BULLET.match(lines[i])
        if m:
            if m["row"] in items:
                raise Failure(f"{url}#L{i + 1}: {m['row']!r} listed twice")
            items[m["row"]] = m["value"]
            last = i + 1
        elif lines[i].strip() and items:
            break
        i += 1
    if not items:
        raise Failure(f"{url}: no '- X: **version** and above.' items after {anchor!r}")
    return items, start + 1, last


# ------------------------------------------------------------------ catalog checks
class Entry:
    """What the proposal is validated against: one driver entry of catalogs/drivers/."""

    def __init__(self, catalog: Path, driver: str) -> None:
        path = catalog / f"{driver}.json"
        if not path.is_file():
            raise Failure(f"{driver}: no catalog entry {path}")
        data = json.loads(path.read_text(encoding="utf-8"))
        drv = data["drivers"][driver]
        self.name = driver
        self.version_scheme: str = drv["version_scheme"]
        self.firmware_scheme: str = drv.get("firmware_scheme", FIRMWARE_SCHEME)
        self.devices = {f"{d['vendor']}:{d['device']}".lower() for d in drv["devices"]}

    def ethtool_min(self, value: str) -> str:
        """The firmware floor as ethtool -i prints it (Intel NVM minors have two digits)."""
        m = SHORT_NVM.match(value)
        if self.firmware_scheme == "intel-firmware" and m:
            return f"{m['major']}.{m['minor']}0"
        return value

    def validate(self, req: Json) -> None:
        rid = req["id"]
        if not ID_PATTERN.match(rid):
            raise Failure(f"{rid}: not a valid id")
        ranges = req.get("driver_versions", [])
        intro = ranges[0].get("introduced") if ranges else None
        expected = f"{self.name}-{intro}-fw-{req['min']}"
        if rid != expected:
            raise Failure(f"{rid}: expected the id {expected}")
        for rng in ranges:
            for key in ("introduced", "fixed"):
                if key in rng:
                    try:
                        versions.parse(rng[key], self.version_scheme)
                    except VersionError as exc:
                        raise Failure(f"{rid}: {key} {rng[key]!r} does not parse under "
                                      f"{self.version_scheme}: {exc}") from exc
            if "introduced" in rng and "fixed" in rng and versions.compare(
                    rng["introduced"], rng["fixed"], self.version_scheme) >= 0:
                raise Failure(f"{rid}: empty range {rng}")
        try:
            versions.parse(req["min"], self.firmware_scheme)
        except VersionError as exc:
            raise Failure(f"{rid}: min {req['min']!r} does not parse under "
                          f"{self.firmware_scheme}: {exc}") from exc
        for ref in req.get("applies_to", []):
            if ref not in self.devices:
                raise Failure(f"{rid}: {ref} is not one of the devices of {self.name}")
        for src in req["sources"]:
            if not src.get("url", "").startswith("https://"):
                raise Failure(f"{rid}: source without an https url")


# ------------------------------------------------------------------ building
def published(mirrors: Mirrors, src: Json) -> Json:
    """A manual source as the catalog cites it: checked, anchored, without review fields."""
    return {"title": src["title"], "url": check_span(mirrors, src), "kind": src["kind"],
            "observed": src["observed"]}


def format_note(mirrors: Mirrors, formats: Json, driver: str) -> List[str]:
    fmt = formats.get(driver)
    if not fmt:
        return []
    return [f"min is the first token of ethtool -i firmware-version: {fmt['observed']} "
            f"({check_span(mirrors, fmt)})."]


def from_fact(mirrors: Mirrors, entry: Entry, fact: Json, fmt_notes: List[str]) -> Json:
    stated = fact.get("stated", fact["min"])
    if entry.ethtool_min(stated) != fact["min"]:
        raise Failure(f"{fact['id']}: stated {stated!r} prints as "
                      f"{entry.ethtool_min(stated)!r}, not min {fact['min']!r}")
    req: Json = {"id": fact["id"], "driver_versions": fact["driver_versions"],
                 "min": fact["min"]}
    if fact.get("applies_to"):
        req["applies_to"] = fact["applies_to"]
    if fact.get("feature"):
        req["feature"] = fact["feature"]
    req["sources"] = [published(mirrors, s) for s in fact["sources"]]
    req["notes"] = list(fact.get("notes", [])) + fmt_notes
    return req


def from_grid(mirrors: Mirrors, entry: Entry, table: Json, fmt_notes: List[str]) -> List[Json]:
    lines = mirrors.lines(table["url"])
    columns, rows, first, last = parse_rst_grid(lines, table["anchor"], table["url"])
    if set(rows) != set(table["rows"]):
        raise Failure(f"{table['url']}: table rows {sorted(rows)} differ from the reviewed "
                      f"{sorted(table['rows'])}")
    also = [published(mirrors, s) for s in table.get("also", [])]
    out = []
    for cell in table["cells"]:
        if cell["column"] not in columns:
            raise Failure(f"{table['url']}: no column {cell['column']!r} in {columns}")
        value = rows[cell["row"]][columns.index(cell["column"])]
        minimum = entry.ethtool_min(value)
        intro = cell["introduced"]
        observed = table["observed"].format(row=cell["row"], column=cell["column"], value=value)
        sources = [published(mirrors, s) for s in cell.get("sources", [])]
        sources.append({"title": table["title"], "url": anchored(table["url"], first, last),
                        "kind": table["kind"], "observed": observed})
        out.append({"id": f"{entry.name}-{intro}-fw-{minimum}",
                    "driver_versions": [{"introduced": intro}], "min": minimum,
                    "applies_to": table["rows"][cell["row"]],
                    **({"feature": table["feature"]} if table.get("feature") else {}),
                    "sources": sources + also,
                    "notes": list(cell.get("notes", [])) + fmt_notes})
    return out


def from_bullets(mirrors: Mirrors, entry: Entry, table: Json, fmt_notes: List[str]) -> List[Json]:
    lines = mirrors.lines(table["url"])
    items, first, last = parse_rst_bold_bullets(lines, table["anchor"], table["url"])
    if set(items) != set(table["rows"]):
        raise Failure(f"{table['url']}: listed products {sorted(items)} differ from the "
                      f"reviewed {sorted(table['rows'])}")
    also = [published(mirrors, s) for s in table.get("also", [])]
    by_value: Dict[str, List[str]] = {}
    for row, value in items.items():  # file order; equal floors share one requirement
        by_value.setdefault(entry.ethtool_min(value), []).append(row)
    out = []
    intro = table["introduced"]
    for minimum, products in by_value.items():
        refs: List[str] = []
        for product in products:
            refs += table["rows"][product]
        observed = table["observed"].format(rows=" and ".join(products), value=minimum)
        source = {"title": table["title"], "url": anchored(table["url"], first, last),
                  "kind": table["kind"], "observed": observed}
        out.append({"id": f"{entry.name}-{intro}-fw-{minimum}",
                    "driver_versions": [{"introduced": intro}], "min": minimum,
                    "applies_to": refs,
                    **({"feature": table["feature"]} if table.get("feature") else {}),
                    "sources": [source] + also,
                    "notes": list(table.get("notes", [])) + fmt_notes})
    return out


TABLE_FORMATS = {"rst-grid": from_grid, "rst-bold-bullets": from_bullets}


def build(manual: Json, mirrors: Mirrors, catalog: Path) -> Json:
    drivers: Json = {}
    for driver in sorted(manual["drivers"]):
        spec = manual["drivers"][driver]
        entry = Entry(catalog, driver)
        fmt_notes = format_note(mirrors, manual.get("ethtool_formats", {}), driver)
        reqs = [from_fact(mirrors, entry, f, fmt_notes) for f in spec.get("facts", [])]
        for table in spec.get("tables", []):
            maker = TABLE_FORMATS.get(table["format"])
            if maker is None:
                raise Failure(f"{driver}: unknown table format {table['format']!r}")
            reqs += maker(mirrors, entry, table, fmt_notes)
        seen = set()
        for req in reqs:
            if req["id"] in seen:
                raise Failure(f"{req['id']}: listed twice")
            seen.add(req["id"])
            entry.validate(req)
        if reqs:
            drivers[driver] = {"firmware_requirements": reqs}
    source = ("catalog-src/manual/firmware.json (hand-reviewed) with the cited files read at "
              "their commits: " + ", ".join(sorted(set(mirrors.read_files))))
    return {"source": source, "drivers": drivers}


def render(proposal: Json) -> str:
    return json.dumps(proposal, indent=2, ensure_ascii=False) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manual", type=Path, default=DEFAULT_MANUAL)
    ap.add_argument("--mirrors", type=Path, required=True,
                    help="directory of <owner>+<name>/repo git directories")
    ap.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG,
                    help="catalogs/drivers directory to validate against")
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    ap.add_argument("--check", action="store_true",
                    help="compare with --output instead of writing it (exit 1 when stale)")
    args = ap.parse_args(argv)
    manual = json.loads(args.manual.read_text(encoding="utf-8"))
    try:
        text = render(build(manual, Mirrors(args.mirrors), args.catalog))
    except Failure as exc:
        print(f"firmware_minimums: {exc}", file=sys.stderr)
        return 2
    counts = {d: len(v["firmware_requirements"])
              for d, v in json.loads(text)["drivers"].items()}
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.is_file() else ""
        if current != text:
            print(f"firmware_minimums: {args.output} is stale", file=sys.stderr)
            return 1
        print(f"{args.output} is current: {counts}")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
