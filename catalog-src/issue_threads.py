#!/usr/bin/env python3
"""Propose known issues from reviewed vendor issue-thread facts (a maintainer names the fix).

Input: one or more hand-reviewed facts files (catalog-src/manual/vendor_issue_threads.json by
default), each `{"about": ..., "issues": [{driver, slug, severity, symptom, introduced?,
fixed, only_when?, source{title, url, kind: "issue-thread", observed}, checked}]}`: one known
issue per GitHub issue or pull-request thread of a vendor's own out-of-tree driver where a
maintainer (a vendor employee or the repository's maintainer) states the release with the
fix, in our own words. `introduced` only where the thread (or a checked release note) names
the first affected release; the reporter's own version is not one. `checked` says what else
was read (a release tag, release notes) and is not copied into the catalog.

Output: catalog-src/proposed/issue-threads.json, ids `<driver>-<fixed>-<slug>` (the rule of
`vendor_notes_common.make_issue`, shared with every vendor-notes miner). Run by hand from the
checkout, then merge for vendor builds only (a vendor tracker speaks of its own driver):

    .venv/bin/python catalog-src/issue_threads.py
    .venv/bin/python catalog-src/merge.py --build vendor catalog-src/proposed/issue-threads.json

`thread_issues` is also what catalog-src/intel_release_notes.py uses for its own thread file
(catalog-src/manual/intel_issue_threads.json, merged through proposed/intel.json).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vendor_notes_common import (  # noqa: E402  (the helper sits next to this script)
    Issue,
    MiningError,
    load_json,
    make_issue,
    severity_counts,
    write_proposal,
)

HERE = Path(__file__).resolve().parent
DEFAULT_FACTS = HERE / "manual" / "vendor_issue_threads.json"
DEFAULT_OUTPUT = HERE / "proposed" / "issue-threads.json"
REQUIRED = ("driver", "slug", "severity", "symptom", "fixed", "source", "checked")


def thread_issues(facts: Mapping[str, Any]) -> Dict[str, List[Issue]]:
    """Known issues from one reviewed issue-thread facts file, by driver."""
    out: Dict[str, List[Issue]] = {}
    for fact in facts.get("issues", []):
        missing = [k for k in REQUIRED if not fact.get(k)]
        if missing:
            raise MiningError(f"{fact.get('slug')}: thread fact without {missing}")
        src = fact["source"]
        if src.get("kind") != "issue-thread":
            raise MiningError(f"{fact['slug']}: thread facts need kind issue-thread")
        issue = make_issue(fact["driver"], fact["fixed"], fact["slug"], fact["severity"],
                           fact["symptom"], [src], fact.get("introduced"))
        if fact.get("only_when"):
            issue["only_when"] = fact["only_when"]
        out.setdefault(fact["driver"], []).append(issue)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("facts", nargs="*", type=Path, default=[DEFAULT_FACTS],
                    help="reviewed facts files (default: manual/vendor_issue_threads.json)")
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = ap.parse_args(argv)
    try:
        drivers: Dict[str, List[Issue]] = {}
        for path in args.facts:
            for driver, issues in thread_issues(load_json(path)).items():
                drivers.setdefault(driver, []).extend(issues)
        names = ", ".join(f"catalog-src/manual/{p.name}" for p in args.facts)
        write_proposal(args.output, f"reviewed issue-thread facts in {names}", drivers)
    except (MiningError, OSError, KeyError, TypeError) as exc:
        print(f"issue_threads: {exc}", file=sys.stderr)
        return 1
    print(f"{sum(len(v) for v in drivers.values())} proposed -> {args.output}")
    print(severity_counts(drivers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
