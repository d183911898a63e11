"""Fill each in-tree version entry's `upstream` list from its own evidence.

A version entry of catalogs/drivers/*.json that cites an upstream kernel source by title
("Linux 4.19.304 source (copy on GitHub)", "Linux 4.9 source ...") states that this series
prints the version string; this script writes those series, sorted, as `upstream`, so the
verdict's end-of-support rule (hwmgr/catalog/support.py) reads data, not prose. Run by hand
after adding evidence: `python catalog-src/upstream_series.py [--check]`; --check exits 1
when a file would change. Nothing else in the entry is touched; entries with no such title
are left as they are.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# an upstream tree named by its release; "Linux 4.3 source (..., Makefile EXTRAVERSION ...)"
TITLE = re.compile(r"^Linux (\d+)\.(\d+)(?:\.\d+)?(?:-rc\d+)? source\b")


def series_of(entry: dict) -> list[str]:
    """The upstream series the entry's evidence titles name, in version order."""
    found = set()
    for ev in entry.get("evidence") or ():
        m = TITLE.match(ev.get("title", "")) if isinstance(ev, dict) else None
        if m:
            found.add((int(m.group(1)), int(m.group(2))))
    return [f"{a}.{b}" for a, b in sorted(found)]


def fill(doc: dict) -> bool:
    """Set `upstream` on every version entry with upstream evidence; True if anything changed."""
    changed = False
    for drv in doc.get("drivers", {}).values():
        for entry in drv.get("versions", {}).values():
            want = series_of(entry)
            if want and entry.get("upstream") != want:
                entry["upstream"] = want
                changed = True
    return changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    args = ap.parse_args()
    stale = []
    for path in sorted((ROOT / "catalogs" / "drivers").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if fill(doc):
            stale.append(path.name)
            if not args.check:
                path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n",
                                encoding="utf-8")
    for name in stale:
        print(("stale: " if args.check else "updated: ") + name)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
