#!/usr/bin/env python3
"""Propose ice/i40e/ixgbe/igb/iavf known issues from Intel's out-of-tree driver releases.

Two inputs, one proposal (catalog-src/proposed/intel.json):

* The release commits of github.com/intel/ethernet-linux-<driver>: each official release is
  one commit "Intel official release X.Y.Z" whose message, for the recent ones, lists the
  changes ("The following changes were made in this release:" and bullets). The script
  parses a `git log` dump of each repository and turns the items that a reviewed mapping
  (catalog-src/manual/intel_release_notes.json) selects into known issues fixed in that
  release, every earlier release affected (the notes never name a first affected release).
  The mapping names items by `item_key` (a hash of their text) and gives severity, slug and
  an own-words symptom. The version is the release number, which is what DRV_VERSION holds
  at each release tag (ethtool -i, modinfo).
* Reviewed facts from prose sources (GitHub issue and pull-request threads where Intel
  states the fixing release): catalog-src/manual/intel_issue_threads.json, one entry per
  issue with its URL and what the thread says, in our words, read by
  `issue_threads.thread_issues` (catalog-src/issue_threads.py owns thread facts).

Exact commands used (from the checkout's top, mirrors fetched with the `fetch` tool; the
commits are the mirrors' HEADs at the time):

    for d in ice i40e ixgbe igb iavf; do
        git -C $MIRRORS/intel+ethernet-linux-$d/repo log --no-merges \
            --format='@@@commit %H%n%B' HEAD > /tmp/intel-$d.log
    done
    .venv/bin/python catalog-src/intel_release_notes.py \
        --log ice=/tmp/intel-ice.log@6dcd4c62d519ab0244544f4959ba699e86efe87c \
        --log i40e=/tmp/intel-i40e.log@b439573f442c82b7d553484883ac9a51b107a0f7 \
        --log ixgbe=/tmp/intel-ixgbe.log@52e3c494825deb2fc3ae3735623969bc99152af9 \
        --log igb=/tmp/intel-igb.log@afaa45314a703fa34e2c4f9d98b6d354cf4c450e \
        --log iavf=/tmp/intel-iavf.log@1a6b7a67eea503074472f8893c15969c2da434dc \
        --output catalog-src/proposed/intel.json

`--list` prints every item of every release commit with its key instead.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from issue_threads import thread_issues  # noqa: E402  (one owner of the thread facts)
from vendor_notes_common import (  # noqa: E402  (the helper sits next to this script)
    Issue,
    MiningError,
    item_key,
    load_json,
    make_issue,
    severity_counts,
    write_proposal,
)

HERE = Path(__file__).resolve().parent
DEFAULT_MAPPING = HERE / "manual" / "intel_release_notes.json"
DEFAULT_THREADS = HERE / "manual" / "intel_issue_threads.json"
DEFAULT_OUTPUT = HERE / "proposed" / "intel.json"
DRIVERS = ("ice", "i40e", "ixgbe", "igb", "iavf")
COMMIT_MARK = "@@@commit "
SUBJECT_RE = re.compile(r"^I?ntel official release (\d+(?:\.\d+)+)\s*$")
BULLET_RE = re.compile(r"^\s*(?:[-*+]\s+)?(.*\S)\s*$")
# Lines of a release message that are not change items.
NOT_ITEM_RE = re.compile(
    r"^(?:=+|-+|Signed-off-by:.*|Co-developed-by:.*|The following changes were made in this"
    r" release:?|Notable changes:?|Add support for new devices:?)\s*$", re.IGNORECASE)


@dataclass
class Release:
    """The items of one release as its release commit(s) list them."""

    version: str
    items: List[Tuple[str, str]] = field(default_factory=list)  # (commit, text)


def repo_of(driver: str) -> str:
    """`intel/ethernet-linux-<driver>`."""
    return f"intel/ethernet-linux-{driver}"


def parse_release_log(text: str) -> Dict[str, Release]:
    """Releases by version from a `git log --format='@@@commit %H%n%B'` dump.

    A version released by several commits (re-imports) gets the items of all of them, each
    with the newest commit that lists it (the log is newest first)."""
    releases: Dict[str, Release] = {}
    for block in text.split("\n" + COMMIT_MARK):
        block = block[len(COMMIT_MARK):] if block.startswith(COMMIT_MARK) else block
        lines = block.splitlines()
        if len(lines) < 2:
            continue
        sha = lines[0].strip()
        m = SUBJECT_RE.match(lines[1].strip())
        if not re.fullmatch(r"[0-9a-f]{40}", sha) or not m:
            continue
        rel = releases.setdefault(m.group(1), Release(m.group(1)))
        known = {t for _, t in rel.items}
        for line in lines[2:]:
            if not line.strip() or NOT_ITEM_RE.match(line.strip()):
                continue
            bm = BULLET_RE.match(line)
            if bm and bm.group(1) not in known:
                rel.items.append((sha, bm.group(1)))
                known.add(bm.group(1))
    return releases


def find_item(rel: Release, key: str) -> Tuple[str, str]:
    """(commit, text) of the item of `rel` whose `item_key` is `key`."""
    for sha, text in rel.items:
        if item_key(text) == key:
            return sha, text
    raise MiningError(f"release {rel.version} has no item with key {key}")


def release_issues(driver: str, releases: Mapping[str, Release],
                   entries: List[Mapping[str, Any]]) -> List[Issue]:
    """The known issues the mapping selects from one driver's release commits."""
    issues: List[Issue] = []
    for entry in entries:
        rel = releases.get(entry["release"])
        if rel is None:
            raise MiningError(f"{driver}: no release commit for {entry['release']}")
        sha, _ = find_item(rel, entry["item"])
        sources = [{
            "title": f"{repo_of(driver)} commit 'Intel official release {rel.version}' "
                     f"(release notes in the commit message)",
            "url": f"https://github.com/{repo_of(driver)}/commit/{sha}",
            "kind": "release-notes",
            "observed": (f"The {driver} {rel.version} release commit lists this among the "
                         f"changes of the release: {rel.version} is the first release "
                         f"with the fix. No first affected release is named, so every "
                         f"earlier release counts as affected."),
        }]
        issue = make_issue(driver, rel.version, entry["slug"], entry["severity"],
                           entry["symptom"], sources)
        if entry.get("kernel_releases"):  # the item names the kernels it strikes on
            issue["kernel_releases"] = list(entry["kernel_releases"])
        issues.append(issue)
    return issues


def parse_log_arg(arg: str) -> Tuple[str, Path, str]:
    """`ice=/tmp/intel-ice.log@<40-hex>` -> ("ice", path, commit)."""
    m = re.fullmatch(r"([a-z0-9]+)=(.+)@([0-9a-f]{40})", arg)
    if not m or m.group(1) not in DRIVERS:
        raise MiningError(f"--log wants DRIVER=PATH@COMMIT with DRIVER in {DRIVERS}: {arg}")
    return m.group(1), Path(m.group(2)), m.group(3)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", action="append", default=[], metavar="DRIVER=PATH@COMMIT",
                    help="git log dump of intel/ethernet-linux-DRIVER at COMMIT")
    ap.add_argument("--mapping", type=Path, default=DEFAULT_MAPPING)
    ap.add_argument("--threads", type=Path, default=DEFAULT_THREADS)
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    ap.add_argument("--list", action="store_true", help="print the release items and keys")
    args = ap.parse_args(argv)
    try:
        logs = [parse_log_arg(a) for a in args.log]
        parsed = {d: parse_release_log(p.read_text(encoding="utf-8")) for d, p, _ in logs}
        if args.list:
            for driver, releases in parsed.items():
                for rel in releases.values():
                    for sha, text in rel.items:
                        print(f"{driver:6} {rel.version:10} {sha[:7]} {item_key(text)}  {text}")
            return 0
        mapping = load_json(args.mapping)
        drivers: Dict[str, List[Issue]] = {}
        for driver, releases in parsed.items():
            entries = [e for e in mapping.get("issues", []) if e["driver"] == driver]
            drivers[driver] = release_issues(driver, releases, entries)
        missing = {e["driver"] for e in mapping.get("issues", [])} - set(parsed)
        if missing:
            raise MiningError(f"the mapping has items of {sorted(missing)} but no --log")
        for driver, issues in thread_issues(load_json(args.threads)).items():
            drivers.setdefault(driver, []).extend(issues)
        drivers = {d: v for d, v in drivers.items() if v}
        source = "; ".join(f"{repo_of(d)}@{c} (release commit messages)" for d, _, c in logs)
        source += f"; reviewed issue-thread facts in catalog-src/manual/{args.threads.name}"
        write_proposal(args.output, source, drivers)
    except (MiningError, OSError, KeyError) as exc:
        print(f"intel_release_notes: {exc}", file=sys.stderr)
        return 1
    total = sum(len(v) for v in drivers.values())
    print(f"{total} proposed -> {args.output}")
    print(severity_counts(drivers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
