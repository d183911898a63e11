#!/usr/bin/env python3
"""Place Proxmox VE's 6.8.12-N kernels on the `ubuntu-6.8` line by the Ubuntu upload each is
built on, as Proxmox's own changelog states it.

Why: Proxmox VE 8 builds its 6.8 kernel from Ubuntu noble's sources. Its release names the
upstream base (`6.8.12-30-pve`), but upstream 6.8 ended at 6.8.12 and every later `6.8.12-N`
rebases onto a later noble upload ("update submodule to Ubuntu-6.8.0-130.130 and refresh
patches"), so it carries noble's backports: upstream 6.8.12 ranges misjudge it exactly as
they would misjudge noble's 6.8.0-130 itself (catalog-src/ubuntu_kernels.py).

A Proxmox release N is placed at Ubuntu ABI X only when (1) the last entry at or before N
that moves the sources to an Ubuntu tag names `Ubuntu-6.8.0-X.Y`, (2) that tag is an upload
the Ubuntu changelogs show (an unpublished tag, `6.8.0-53.54` beside the published
`6.8.0-53.55`, or an internal respin `…i1`, is not), and (3) no entry from that rebase up to
N names a CVE or picks commits of its own (Proxmox's own fixes would make it differ from the
upload). Anything else stays unplaced: "uncatalogued kernel build", never upstream 6.8.12.

Exact command (the pve-kernel changelog of branch bookworm-6.8, github.com/proxmox/pve-kernel
as mirrored on 2026-11-29; the Ubuntu changelogs as for ubuntu_kernels.py):

    R=$MIRRORS/proxmox+pve-kernel/repo C=$(git -C $R rev-parse bookworm-6.8)
    git -C $R show $C:debian/changelog > /tmp/pve-6.8.changelog
    .venv/bin/python catalog-src/proxmox_kernels.py @/tmp/ubu/args \\
        --pve /tmp/pve-6.8.changelog \\
        https://github.com/proxmox/pve-kernel/blob/$C/debian/changelog \\
        --builds catalogs/kernel-builds.json

It rewrites `kernel_builds.ubuntu_lines["ubuntu-6.8"].proxmox` (release -> ABI) there.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ubuntu_kernels as uk  # noqa: E402  (the Ubuntu reader beside it)

PACKAGE = re.compile(r"^(?:proxmox|pve)-kernel-6\.8 \((6\.8\.\d+-\d+)\) \w+;")
REBASE = re.compile(r"(?:update|rebase)\b[^*]*?\bUbuntu-(6\.8\.0-\d+\.\d+[A-Za-z0-9]*)\b")
OWN = re.compile(r"\bCVE-\d{4}-\d{4,7}\b|\bpick relevant commits\b|\bcherry-pick\b|\bbackport",
                 re.IGNORECASE)


def entries(text: str) -> List[Tuple[str, str]]:
    """(release, entry text) of proxmox-kernel-6.8 / pve-kernel-6.8 entries, oldest first.
    An entry's lines may wrap, so its bullets are read joined."""
    out: List[Tuple[str, List[str]]] = []
    for line in text.splitlines():
        m = PACKAGE.match(line)
        if m:
            out.append((m.group(1), []))
        elif line[:1].isalpha():  # another package's entry
            out.append(("", []))
        elif out:
            out[-1][1].append(line.strip())
    return [(rel, " ".join(body)) for rel, body in reversed(out) if rel]


def placements(text: str, uploads: Set[str]) -> Tuple[Dict[str, str], List[str]]:
    """Proxmox release -> Ubuntu ABI, and why each other 6.8.12 release is not placed."""
    placed: Dict[str, str] = {}
    left: List[str] = []
    base: Optional[str] = None
    own = False
    for release, body in entries(text):
        tag = REBASE.search(body)
        if tag:
            base, own = tag.group(1), False
        if OWN.search(body.split(tag.group(0), 1)[-1] if tag else body):
            own = True
        if not release.startswith("6.8.12-"):
            continue  # before 6.8.12 the release names a whole stable release
        if base is None or base not in uploads:
            left.append(f"{release}: built on Ubuntu-{base}, an upload the Ubuntu changelogs "
                        "do not show")
        elif own:
            left.append(f"{release}: fixes of its own since Ubuntu-{base}")
        else:
            placed[release] = uk.abi_of(base)
    return placed, left


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 fromfile_prefix_chars="@")
    ap.add_argument("--changelog", nargs=2, action="append", metavar=("PATH", "URL"),
                    required=True, help="an Ubuntu noble changelog (as for ubuntu_kernels.py)")
    ap.add_argument("--pve", nargs=2, metavar=("PATH", "URL"), required=True,
                    help="pve-kernel's debian/changelog of the 6.8 branch and its URL")
    ap.add_argument("--builds", type=Path, required=True,
                    help="catalog file whose ubuntu_lines['ubuntu-6.8'].proxmox to rewrite")
    args = ap.parse_args(argv)
    read = uk.Read()
    try:
        for path, url in args.changelog:
            read.add(uk.read_text(Path(path)), url)
        placed, left = placements(Path(args.pve[0]).read_text(encoding="utf-8"),
                                  set(read.fixes))
        doc = json.loads(args.builds.read_text(encoding="utf-8"))
        line = doc["kernel_builds"]["ubuntu_lines"][uk.LINE]
    except (uk.SourceError, OSError, ValueError, KeyError) as exc:
        print(f"proxmox_kernels: {exc}", file=sys.stderr)
        return 1
    on_line = {rel: abi for rel, abi in placed.items() if abi in set(line["abis"])}
    line["proxmox"] = dict(sorted(on_line.items(), key=lambda kv: int(kv[0].split("-")[1])))
    line["evidence"] = [e for e in line["evidence"] if "pve-kernel" not in e["url"]] + [{
        "title": "Proxmox VE: pve-kernel debian/changelog, branch bookworm-6.8",
        "url": args.pve[1],
        "observed": "each proxmox-kernel-6.8 release names the Ubuntu tag its sources were "
                    f"moved to; {len(on_line)} 6.8.12 releases sit on a read noble upload "
                    f"with no fix of their own since; {len(left)} do not"}]
    args.builds.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
    print(f"proxmox 6.8.12: {len(on_line)} placed; not placed: {'; '.join(left) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
