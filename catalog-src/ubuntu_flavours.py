#!/usr/bin/env python3
"""Map Ubuntu's cloud kernels (`-aws`, `-azure`, `-gcp`) to the master upload each is built on,
as their own changelogs state it, so hwmgr places them like that master upload.

A cloud kernel has ABIs of its own (`5.15.0-1121-aws`, `6.8.0-1074-azure`), so neither the
ABI table nor the `ubuntu-6.8` line knows them. Each upload's changelog entry says which
master upload it rebases on: `linux-aws (5.15.0-1121.128) jammy` holds the section
`[ Ubuntu: 5.15.0-204.214 ]`, followed by that master upload's own entries. hwmgr then
places `5.15.0-1121-aws` where it places `5.15.0-204-generic`: on upstream 5.15.224 through
the table, or on the `ubuntu-6.8` line at that ABI.

A cloud upload is mapped only when its own entry names the master upload it builds and lists
no CVE of its own before that section (a flavour-only fix would make it differ from the
master upload). Anything else stays unplaced. Two sources that disagree about one cloud ABI
are an error (exit 1).

Exact command (packages as fetched on 2026-11-29; every linux-{aws,azure,gcp}-headers-X-N the
jammy-updates, jammy-security, noble-updates and noble-security indexes of archive.ubuntu.com
list, 267 packages, each with its last ten uploads):

    W=/tmp/ubu/cloud; mkdir -p $W; cd $W
    U=http://archive.ubuntu.com/ubuntu
    for p in jammy-updates jammy-security noble-updates noble-security; do
        curl -s $U/dists/$p/main/binary-amd64/Packages.gz | zcat |
            awk '$1=="Package:" && $2 ~ /^linux-(aws|azure|gcp)-headers-[0-9.]+-[0-9]+$/{p=1}
                 p&&/^Filename:/{print $2; p=0}'
    done | sort -u | while read f; do
        b=$(basename $f .deb); curl -s -o $b.deb $U/$f
        dpkg-deb --fsys-tarfile $b.deb | tar -xO --wildcards \\
            './usr/share/doc/*/changelog.Debian.gz' > $b.changelog.gz
        printf '%s\\n' --changelog $W/$b.changelog.gz $U/$f
    done > args
    .venv/bin/python catalog-src/ubuntu_flavours.py @$W/args --builds catalogs/kernel-builds.json

It rewrites `kernel_builds.ubuntu_flavours` (cloud ABI -> master ABI) there, keeping only
cloud ABIs whose master ABI the file places (the Ubuntu ABI table or an Ubuntu line).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ubuntu_kernels as uk  # noqa: E402  (the Ubuntu reader beside it)
from kernel_builds import natural_key  # noqa: E402  (one natural order for ABIs)

FLAVOURS = ("aws", "azure", "gcp")
_HEADER = re.compile(r"^linux-(aws|azure|gcp) \((\d+\.\d+\.\d+)-(\d+)\.(\d+)\) \w[\w-]*;")
_ANY_HEADER = re.compile(r"^\S+ \([^()\s]+\) ")


def uploads(text: str) -> List[Tuple[str, str, List[str]]]:
    """(cloud ABI `5.15.0-1121-aws`, upload `5.15.0-1121.128-aws`, entry body lines) of each
    cloud entry, newest first."""
    out: List[Tuple[str, str, List[str]]] = []
    body: Optional[List[str]] = None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            body = []
            abi = f"{m.group(2)}-{m.group(3)}"
            out.append((f"{abi}-{m.group(1)}", f"{abi}.{m.group(4)}-{m.group(1)}", body))
        elif _ANY_HEADER.match(line):
            body = None
        elif body is not None:
            body.append(line)
    return out


def master_of(body: Sequence[str]) -> Tuple[Optional[str], bool]:
    """(the master ABI the entry rebases on, whether it lists CVEs of its own before it)."""
    for i, line in enumerate(body):
        twin = uk.TWIN.match(line)
        if twin:
            return uk.abi_of(twin.group(1)), bool(uk.fixed_cves(body[:i]))
    return None, bool(uk.fixed_cves(body))


def mapping(texts: Sequence[Tuple[str, str]]) -> Tuple[Dict[str, str], List[str]]:
    """Cloud ABI -> master ABI over all sources, and the cloud ABIs left unmapped. An upload
    whose entry names no master (a respin, 5.15.0-1038.43 on 1038.42) keeps the one of the
    upload below it, unless it lists CVEs of its own; the uploads of one ABI must agree."""
    by_upload: Dict[str, Tuple[str, Optional[str]]] = {}
    for text, url in texts:
        below: Optional[str] = None
        for cloud, upload, body in reversed(uploads(text)):  # oldest first
            master, own = master_of(body)
            value = None if own else (master or below)
            below = value
            if upload in by_upload and by_upload[upload][1] != value:
                if value is None or by_upload[upload][1] is None:  # read without its base
                    value = value or by_upload[upload][1]
                else:
                    raise uk.SourceError(f"{url}: {upload} is built on {value}, another "
                                         f"source says {by_upload[upload][1]}")
            by_upload[upload] = (cloud, value)
    per_abi: Dict[str, set] = {}
    for cloud, value in by_upload.values():
        per_abi.setdefault(cloud, set()).add(value)
    found = {k: next(iter(v)) for k, v in per_abi.items() if len(v) == 1 and None not in v}
    return found, sorted(k for k in per_abi if k not in found)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 fromfile_prefix_chars="@")
    ap.add_argument("--changelog", nargs=2, action="append", metavar=("PATH", "URL"),
                    required=True, help="a cloud kernel's changelog (plain or .gz) and its URL")
    ap.add_argument("--builds", type=Path, required=True,
                    help="catalog file whose kernel_builds.ubuntu_flavours to rewrite")
    args = ap.parse_args(argv)
    try:
        found, left = mapping([(uk.read_text(Path(p)), url) for p, url in args.changelog])
        doc = json.loads(args.builds.read_text(encoding="utf-8"))
        builds = doc["kernel_builds"]
    except (uk.SourceError, OSError, ValueError, KeyError) as exc:
        print(f"ubuntu_flavours: {exc}", file=sys.stderr)
        return 1
    placed = set(builds.get("ubuntu", {}).get("abi", {}))
    for line in builds.get("ubuntu_lines", {}).values():
        placed |= set(line.get("abis", []))
    kept = {k: v for k, v in found.items() if v in placed}
    order = sorted(kept, key=natural_key)
    builds["ubuntu_flavours"] = {
        "map": {k: kept[k] for k in order},
        "evidence": [{
            "title": "Ubuntu cloud kernels (linux-aws, linux-azure, linux-gcp): changelogs of "
                     "their headers packages in archive.ubuntu.com",
            "url": "http://archive.ubuntu.com/ubuntu/pool/main/l/linux-aws/",
            "observed": f"each upload's entry names the master upload it rebases on ('[ Ubuntu: "
                        f"5.15.0-204.214 ]'); {len(found)} cloud ABIs read, {len(kept)} on a "
                        f"master ABI this catalog places, {len(left)} with fixes of their own "
                        "or no master named"}]}
    args.builds.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
    print(f"cloud ABIs: {len(found) + len(left)} read, {len(kept)} mapped onto a placed "
          f"master ABI, {len(found) - len(kept)} onto one not placed, {len(left)} left")
    return 0


if __name__ == "__main__":
    sys.exit(main())
