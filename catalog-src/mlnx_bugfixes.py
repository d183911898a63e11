#!/usr/bin/env python3
"""Mine NVIDIA MLNX_OFED / MLNX_EN "Bug Fixes" tables into proposed mlx5/mlx4 known issues.

Input: bug-fix pages of docs.nvidia.com saved as text, one file per page, whose first line is
``URL: <page address>`` followed by the page text as fetched (either layout NVIDIA uses: one
field per line, or ``|``-separated table rows). Each row of a table carries an internal
reference number, a description, keywords, "Discovered in Release" and "Fixed in Release".

The rows are parsed mechanically (reference number, discovered and fixed releases). The
symptom, severity and driver of a row are reviewed facts in catalog-src/manual/mlnx_bugfixes.json
(own words; nothing of the description is copied). A row becomes a known issue only when it
is reviewed there, is complete (a fixed release), and names a "Discovered in Release": that
release is the interval's "introduced". Rows without one are left out, because an open lower
bound would also match the in-tree mlx5/mlx4 builds that report "3.0-1", "5.0-0" or "4.0-0".

Releases are turned into the string the driver reports: the mlx5_core/mlx4 modules of an
MLNX_OFED/MLNX_EN release report DRIVER_VERSION/DRV_VERSION of mlnx-ofa_kernel, which is the
release without its fourth number (release 5.8-2.0.3.0 reports "5.8-2.0.3"; ethtool -i shows
the same string). catalog-src/manual/mlnx_driver_versions.json maps every release read in a
source tree (made with --dump-versions); an unmapped four-number release drops its last number.
Its "mlx4" table gives mlx4_core's and mlx4_en's own DRV_VERSION per release (4.0 to 5.0: equal
to mlx5's in every tree read; mlx4_en's ethtool -i appends " (DRV_RELDATE)" in 4.0 and 4.1, as
MLNX_OFED 3.4's did, which the driver version scheme compares past). 3.4-1.0.0.0 is the one
3.x release whose tree was read (gpudirect/mlnx-ofa_kernel): its mlx4_en reports
"3.4-1.0.0 (25 Sep 2016)".

Commands used (from the repository root, with the project's virtualenv):

    .venv/bin/python catalog-src/mlnx_bugfixes.py --dump-versions \
        $MIRRORS/knneth+mlnx-ofa_kernel/repo $MIRRORS/gpudirect+mlnx-ofa_kernel/repo \
        > catalog-src/manual/mlnx_driver_versions.json
    .venv/bin/python catalog-src/mlnx_bugfixes.py /tmp/mlnx-fetch/*.txt \
        -o catalog-src/proposed/mlnx.json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import kiproposal as kp

HERE = Path(__file__).resolve().parent
MANUAL = HERE / "manual" / "mlnx_bugfixes.json"
VERSIONS = HERE / "manual" / "mlnx_driver_versions.json"

REF_LINE = re.compile(r"^(\d{6,8})(?:\s+\1)?$")
# a complete MLNX release: <major>.<minor>-<a>.<b>.<c>.<d>[.<e>...]; NVIDIA sometimes puts a
# space after the dash ("5.8- 1.0.1.1"). A release cut short by the page excerpt does not match.
RELEASE = r"(\d+\.\d+)\s*-\s*(\d+(?:\.\d+){3,})(?![\d.])"
DISCOVERED = re.compile(r"Discovered in Release:\s*" + RELEASE)
FIXED = re.compile(r"Fixed in Release:\s*" + RELEASE)


@dataclass
class Row:
    """One parsed row of a bug-fix table."""

    ref: str
    url: str
    fixed: Optional[str] = None
    discovered: Optional[str] = None
    lines: List[str] = field(default_factory=list)


def _release(m: re.Match[str]) -> str:
    return f"{m.group(1)}-{m.group(2)}"


def read_page(path: Path) -> Tuple[str, List[str]]:
    """(url, text lines) of a saved page: first line 'URL: ...', '|' cells split into lines."""
    text = path.read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    if not first.startswith("URL:"):
        raise kp.ProposalError(f"{path}: first line must be 'URL: <address>'")
    url = first[4:].strip()
    lines = [c.strip() for line in rest.splitlines() for c in line.split("|")]
    return url, [c for c in lines if c]


def parse_page(path: Path) -> List[Row]:
    """Every row of the page's bug-fix tables, complete or not."""
    url, lines = read_page(path)
    rows: List[Row] = []
    cur: Optional[Row] = None
    for line in lines:
        m = REF_LINE.match(line)
        if m:
            cur = Row(ref=m.group(1), url=url)
            rows.append(cur)
            continue
        if cur is None:
            continue
        cur.lines.append(line)
        d = DISCOVERED.search(line)
        if d:
            cur.discovered = _release(d)
        f = FIXED.search(line)
        if f:
            cur.fixed = _release(f)
    return rows


def reported_version(release: str, table: Dict[str, str], driver: str = "mlx5_core",
                     mlx4: Optional[Dict[str, Dict[str, str]]] = None) -> str:
    """The version string `driver` of an MLNX_OFED/MLNX_EN `release` reports: mlx4_core's and
    mlx4_en's DRV_VERSION where the release's tree was read, else mlx5's DRIVER_VERSION."""
    if driver.startswith("mlx4_") and mlx4 and driver in mlx4.get(release, {}):
        return mlx4[release][driver]
    if release in table:
        return table[release]
    head, _, tail = release.partition("-")
    parts = tail.split(".")
    return f"{head}-{'.'.join(parts[:3])}" if len(parts) == 4 else release


def page_title(url: str) -> str:
    """'NVIDIA <doc space>: <page>' from a docs.nvidia.com/networking/display/... address."""
    m = re.search(r"/display/([^/]+)/([^/?#]+)", url)
    if not m:
        return f"NVIDIA documentation page {url}"
    return f"NVIDIA {m.group(1)}: {m.group(2).replace('+', ' ')}"


def _define(text: str, name: str) -> Optional[str]:
    """The string a C header #defines `name` to, if any."""
    m = re.search(r'#define\s+' + name + r'\s+"([^"]+)"', text)
    return m.group(1) if m else None


def _mlx4_strings(show: Callable[[str], str]) -> Dict[str, str]:
    """What mlx4_core and mlx4_en of one mlnx-ofa_kernel tree report: DRV_VERSION of mlx4.h
    and mlx4_en.h, and mlx4_en's ethtool -i version (en_ethtool.c appends " (DRV_RELDATE)"
    in some releases). Empty when the tree has no mlx4 (5.1 on)."""
    base = "drivers/net/ethernet/mellanox/mlx4/"
    try:
        core, en = show(base + "mlx4.h"), show(base + "mlx4_en.h")
        ethtool = show(base + "en_ethtool.c")
    except subprocess.CalledProcessError:
        return {}
    out = {k: v for k, v in (("mlx4_core", _define(core, "DRV_VERSION")),
                             ("mlx4_en", _define(en, "DRV_VERSION"))) if v}
    date = _define(en, "DRV_RELDATE")
    if "mlx4_en" in out and date and re.search(r'DRV_VERSION\s*" \("\s*DRV_RELDATE', ethtool):
        out["mlx4_en_ethtool"] = f"{out['mlx4_en']} ({date})"
    elif "mlx4_en" in out:
        out["mlx4_en_ethtool"] = out["mlx4_en"]
    return out


def _repo_name(gitdir: Path) -> str:
    """owner/name of a fetched mirror (<dir>/owner+name/repo), for the source line."""
    parent = gitdir.resolve().parent.name
    return parent.replace("+", "/", 1) if "+" in parent else parent


def _put(table: Dict[str, Any], release: str, value: Any, repo: str) -> None:
    """Record one release's strings; two trees of one release must agree."""
    if release in table and table[release] != value:
        raise kp.ProposalError(f"{release}: {repo} reports {value}, another tree "
                               f"{table[release]}")
    table[release] = value


def dump_versions(gitdirs: Sequence[Path]) -> Dict[str, Any]:
    """Release -> DRIVER_VERSION read from every commit of mlnx-ofa_kernel histories whose
    subject names an MLNX_OFED release (one commit per release: knneth/mlnx-ofa_kernel,
    gpudirect/mlnx-ofa_kernel), and release -> what the mlx4 modules report where the tree
    carries mlx4 (up to 5.0)."""
    out: Dict[str, str] = {}
    mlx4: Dict[str, Dict[str, str]] = {}
    read: List[str] = []
    for gitdir in gitdirs:
        def git(*args: str, d: Path = gitdir) -> str:
            return subprocess.run(["git", "--git-dir", str(d), *args], check=True,
                                  capture_output=True, text=True).stdout

        repo = _repo_name(gitdir)
        for line in git("log", "--format=%H %s").splitlines():
            commit, _, subject = line.partition(" ")
            m = re.search(r"OFED (\d+\.\d+-\d+(?:\.\d+){3,})(?![\d.])", subject)
            if not m:
                continue
            header = git("show",
                         f"{commit}:drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.h")
            v = _define(header, "DRIVER_VERSION")
            if v:
                _put(out, m.group(1), v, repo)
            strings = _mlx4_strings(lambda path, c=commit: git("show", f"{c}:{path}"))
            if strings:
                _put(mlx4, m.group(1), strings, repo)
        read.append(f"https://github.com/{repo} (history up to "
                    f"{git('rev-parse', 'HEAD').strip()})")
    return {
        "source": "DRIVER_VERSION in drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.h of "
                  "each release commit of " + ", ".join(read) + " (imports of the MLNX_OFED "
                  "mlnx-ofa_kernel sources, one commit per release named in its subject)",
        "reported": dict(sorted(out.items())),
        "mlx4_source": "DRV_VERSION in drivers/net/ethernet/mellanox/mlx4/mlx4.h (mlx4_core) "
                       "and mlx4_en.h (mlx4_en) of the same commits; mlx4_en_ethtool is what "
                       "en_ethtool.c puts in ethtool -i's version (DRV_VERSION, followed by "
                       "\" (\" DRV_RELDATE \")\" where it appends the date)",
        "mlx4": dict(sorted(mlx4.items())),
    }


def _merge_rows(rows: Sequence[Row]) -> Dict[str, List[Row]]:
    """Rows by reference; one bug listed on several pages must agree on its releases."""
    by_ref: Dict[str, List[Row]] = {}
    for r in rows:
        by_ref.setdefault(r.ref, []).append(r)
    for ref, group in by_ref.items():
        fixes = {r.fixed for r in group if r.fixed}
        found = {r.discovered for r in group if r.discovered}
        if len(fixes) > 1 or len(found) > 1:
            raise kp.ProposalError(f"{ref}: pages disagree: fixed {fixes}, discovered {found}")
    return by_ref


def build(pages: Sequence[Path], manual: Dict[str, Any], table: Dict[str, str],
          mlx4: Optional[Dict[str, Dict[str, str]]] = None
          ) -> Tuple[Dict[str, List[kp.Entry]], List[str]]:
    """(known issues by driver, notes on the rows left out); `mlx4` maps a release to what
    its mlx4 modules report (the mapping file's "mlx4" table)."""
    rows = [r for p in pages for r in parse_page(p)]
    by_ref = _merge_rows(rows)
    reviewed: Dict[str, Any] = manual["rows"]
    out: Dict[str, List[kp.Entry]] = {}
    notes: List[str] = []
    for ref in sorted(by_ref):
        group = by_ref[ref]
        fixed = next((r.fixed for r in group if r.fixed), None)
        found = next((r.discovered for r in group if r.discovered), None)
        fact = reviewed.get(ref)
        if fixed is None:
            notes.append(f"{ref}: no complete 'Fixed in Release' in the text read")
            continue
        if fact is None:
            notes.append(f"{ref}: not reviewed (outside mlx5/mlx4 driver behaviour, or no "
                         "stated consequence)")
            continue
        if found is None:
            notes.append(f"{ref}: no 'Discovered in Release'; an open lower bound would hit "
                         "in-tree builds")
            continue
        urls = sorted({r.url for r in group})
        for driver in fact["drivers"]:
            fixed_v = reported_version(fixed, table, driver, mlx4)
            found_v = reported_version(found, table, driver, mlx4)
            sources = [kp.make_source(
                title=page_title(u), url=u, kind="bug-fix-table",
                observed=(f"bug-fix table row {ref}: discovered in release {found}, fixed in "
                          f"release {fixed}; that release's driver reports {fixed_v} and the "
                          f"discovered one {found_v}, so the range is [{found_v}, {fixed_v})"))
                for u in urls]
            entry = kp.make_entry(
                driver, f"{driver}-{ref}", fact["severity"], fact["symptom"],
                [{"introduced": found_v, "fixed": fixed_v}], sources,
                fact.get("applies_to"))
            out.setdefault(driver, []).append(entry)
    missing = sorted(set(reviewed) - set(by_ref))
    if missing:
        raise kp.ProposalError(f"reviewed rows not found in the pages: {', '.join(missing)}")
    return out, notes


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", type=Path, help="saved bug-fix pages")
    ap.add_argument("-o", "--output", type=Path, default=HERE / "proposed" / "mlnx.json")
    ap.add_argument("--manual", type=Path, default=MANUAL)
    ap.add_argument("--versions", type=Path, default=VERSIONS)
    ap.add_argument("--dump-versions", type=Path, nargs="+", metavar="GITDIR",
                    help="print the release -> DRIVER_VERSION table of an mlnx-ofa_kernel "
                         "git directory and exit")
    args = ap.parse_args(argv)
    if args.dump_versions:
        json.dump(dump_versions(args.dump_versions), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if not args.pages:
        ap.error("no pages given")
    versions = kp.load_manual(args.versions)
    by_driver, notes = build(args.pages, kp.load_manual(args.manual), versions["reported"],
                             versions.get("mlx4"))
    source = ("NVIDIA MLNX_OFED/MLNX_EN bug-fix tables: "
              + ", ".join(sorted({read_page(p)[0] for p in args.pages}))
              + "; release -> reported version: DRIVER_VERSION of mlnx-ofa_kernel "
              "(https://github.com/knneth/mlnx-ofa_kernel)")
    kp.write_proposal(args.output, source, by_driver)
    for note in notes:
        print(f"left out: {note}", file=sys.stderr)
    counts = ", ".join(f"{d}: {len(e)}" for d, e in sorted(by_driver.items()))
    print(f"{args.output}: {counts}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
