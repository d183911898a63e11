#!/usr/bin/env python3
"""Propose the `ubuntu-6.8` kernel line for the catalog's CVE known issues from Ubuntu's own
kernel changelogs (noble's `linux`, also 22.04's HWE 6.8, which builds the same uploads).

Why a line of its own: noble took whole upstream stable releases up to 6.8.12 (ABI 6.8.0-40,
placed on `upstream` by catalogs/kernel-builds.json); from 6.8.0-41 on it backports picks from
newer stable series into that frozen base, so no upstream release is its base and upstream
ranges say nothing of it. What Ubuntu does state, upload by upload, is which CVEs each one
fixes: a bullet `* CVE-2024-1234`, or a bug bullet tagged `... (LP: #N) // CVE-2024-1234`.
A mention in prose ("Incorrect backport for CVE-X causes hangs") is not a fix and is not read.

What an upload contains: its own entry and those of its ancestors. A changelog lists an
upload's ancestors below it (newest first); security respins branch off, so 6.8.0-136 is built
on 6.8.0-130, not on 6.8.0-134: each upload's ancestry is read from the changelogs, never from
the ABI order, and two sources that disagree about an upload's parent are an error (exit 1).
The binary packages carry only the last ten entries; the union of several packages' changelogs
gives every upload a complete ancestry back to the first noble upload, or it is left out.

22.04's HWE kernel (`linux-hwe-6.8 (6.8.0-N.M~22.04.k)`) builds noble's uploads, each entry
repeating the noble sections it takes (`[ Ubuntu: 6.8.0-N.M ]`); some of those noble
uploads are respins noble's own changelog never shows (6.8.0-47.47). An HWE upload holds its
own entry and the noble upload it builds where that was read, else the HWE upload before it.

A CVE gets a range on the line, `fixed: [6.8.0-X]`, where X is the lowest ABI from which
every upload read contains the fix (so a respin that lacks it is not called fixed), and only
when the catalog's upstream range says upstream 6.8.12 carries the bug (merge.py checks it
again with `bases`). A CVE the changelogs never name is not judged on the line at all.

Exact command (packages as fetched on 2026-11-29 from archive.ubuntu.com; every
linux-headers-6.8.0-N package the noble, noble-updates and noble-security indexes list, and
every linux-hwe-6.8-headers-6.8.0-N of jammy-updates and jammy-security):

    W=/tmp/ubu; mkdir -p $W; cd $W
    U=http://archive.ubuntu.com/ubuntu
    for p in noble noble-updates noble-security jammy-updates jammy-security; do
        curl -s $U/dists/$p/main/binary-amd64/Packages.gz | zcat |
            awk '/^Package: linux(-hwe-6\\.8)?-headers-6\\.8\\.0-[0-9]+$/{p=1}
                 p&&/^Filename:/{print $2; p=0}'
    done | sort -u > files
    while read f; do
        curl -s -o $(basename $f) $U/$f
        dpkg-deb --fsys-tarfile $(basename $f) | tar -xO --wildcards \\
            './usr/share/doc/*/changelog.Debian.gz' > $(basename $f .deb).changelog.gz
        printf '%s\\n' --changelog $W/$(basename $f .deb).changelog.gz $U/$f
    done < files > args
    cd /path/to/hwmgr
    .venv/bin/python catalog-src/ubuntu_kernels.py @$W/args --builds catalogs/kernel-builds.json
    .venv/bin/python catalog-src/merge.py --kernel-lines catalog-src/proposed/ubuntu-kernels.json
    .venv/bin/python catalog-src/conditions.py --write

`--builds FILE` rewrites only `kernel_builds.ubuntu_lines` there (the uploads read past the
file's Ubuntu ABI table). The output is deterministic (keys sorted, indent 1).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hwmgr.catalog import kbuild  # noqa: E402  (run from the checkout, not installed)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO / "catalog-src" / "proposed" / "ubuntu-kernels.json"
LINE = "ubuntu-6.8"
SERIES = "noble"
BASE = "6.8.12"  # the last whole upstream stable release noble took (ABI 6.8.0-40)
ABI_BASE = kbuild.UBUNTU_LINES[LINE]  # 6.8.0

_HEADER = re.compile(r"^(linux|linux-hwe-\d+\.\d+) \((\d+\.\d+\.\d+-\d+\.\d+(?:~[\d.]+)?)\) "
                     r"(\w[\w-]*);")
TWIN = re.compile(r"^\s+\[ Ubuntu: (\d+\.\d+\.\d+-\d+\.\d+) \]")
_ALONE = re.compile(r"\s*\*\s*(CVE-\d{4}-\d{4,7})\s*")
_TAGGED = re.compile(r"\s*(CVE-\d{4}-\d{4,7})\b")

Upload = str  # "6.8.0-98.98"


class SourceError(ValueError):
    """Changelogs that contradict each other or themselves."""


def read_text(path: Path) -> str:
    """A changelog, plain or gzip-compressed."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", "replace")


def entries(text: str) -> List[Tuple[Upload, List[str]]]:
    """(upload, body lines) of each entry on this line's ABI base, newest first: noble's
    `linux (6.8.0-N.M)` and 22.04's HWE `linux-hwe-6.8 (6.8.0-N.M~22.04.k)` uploads."""
    out: List[Tuple[Upload, List[str]]] = []
    body: Optional[List[str]] = None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            body = [] if m.group(2).startswith(ABI_BASE + "-") else None
            if body is not None:
                out.append((m.group(2), body))
        elif body is not None:
            body.append(line)
    return out


def fixed_cves(body: Iterable[str]) -> Set[str]:
    """The CVEs an entry says it fixes: a bullet that is a CVE id, or one tagged `// CVE-..`
    (the bullet's header may wrap onto indented lines before its first `- commit`)."""
    found: Set[str] = set()
    header: Optional[str] = None

    def close(text: Optional[str]) -> None:
        if text is None:
            return
        first, *tags = text.split("//")
        alone = _ALONE.fullmatch(first)
        if alone:
            found.add(alone.group(1))
        for tag in tags:
            m = _TAGGED.match(tag)
            if m:
                found.add(m.group(1))

    for line in body:
        if line.startswith("  * "):
            close(header)
            header = line
        elif header is not None and line.startswith("    ") and not line.startswith(
                ("    - ", "      ")):
            header += " " + line.strip()
        else:
            close(header)
            header = None
    close(header)
    return found


def abi_of(upload: Upload) -> str:
    """6.8.0-98 of 6.8.0-98.98 (and of the HWE upload 6.8.0-98.98~22.04.1)."""
    return upload.split("~", 1)[0].rsplit(".", 1)[0]


def _abi_number(name: str) -> int:
    """98 of the ABI 6.8.0-98 or of an upload of it (6.8.0-98.98, 6.8.0-98.98~22.04.1)."""
    m = re.match(r"\d+\.\d+\.\d+-(\d+)", name)
    if not m:
        raise SourceError(f"not an Ubuntu ABI or upload: {name}")
    return int(m.group(1))


class Read:
    """What the changelogs say: each upload's own fixes, its parent, where it was read."""

    def __init__(self) -> None:
        self.fixes: Dict[Upload, Set[str]] = {}
        self.parent: Dict[Upload, Upload] = {}
        self.twin: Dict[Upload, Upload] = {}  # an HWE upload -> the noble upload it builds
        self.url: Dict[Upload, str] = {}

    def add(self, text: str, url: str) -> None:
        """Fold one changelog in; SourceError when it contradicts what was read."""
        listed = entries(text)
        for i, (upload, body) in enumerate(listed):
            own = fixed_cves(body)
            if self.fixes.setdefault(upload, own) != own:
                raise SourceError(f"{url}: upload {upload} lists other CVEs than before")
            self.url.setdefault(upload, url)
            twin = next((m.group(1) for m in map(TWIN.match, body) if m), None)
            if "~" in upload and twin:
                self.twin[upload] = twin
            if i + 1 < len(listed):
                parent = listed[i + 1][0]
                if self.parent.setdefault(upload, parent) != parent:
                    raise SourceError(f"{url}: upload {upload} is built on {parent}, another "
                                      f"source says {self.parent[upload]}")

    def first(self) -> Upload:
        """The line's first upload: the one no source gives a parent, lowest ABI."""
        roots = sorted((u for u in self.fixes if u not in self.parent and "~" not in u),
                       key=_abi_number)
        return roots[0]

    def ancestry(self, upload: Upload) -> Optional[List[Upload]]:
        """The upload and its ancestors, or None when the chain breaks before the first."""
        chain, seen, root = [upload], {upload}, self.first()
        while chain[-1] in self.parent:
            nxt = self.parent[chain[-1]]
            if nxt in seen:
                raise SourceError(f"upload {nxt} is its own ancestor")
            chain.append(nxt)
            seen.add(nxt)
        return chain if chain[-1] == root else None

    def contents(self, upload: Upload, seen: Optional[Set[Upload]] = None) -> Optional[Set[str]]:
        """The CVEs an upload contains, or None when what it is built on was not all read.
        A noble upload: its ancestry. An HWE upload: its own entry (which repeats the noble
        sections it takes), with the noble upload it builds where that was read, else the
        HWE upload before it."""
        if "~" not in upload:
            chain = self.ancestry(upload)
            return None if chain is None else set().union(*(self.fixes[u] for u in chain))
        seen = seen or set()
        if upload in seen:
            raise SourceError(f"upload {upload} is its own ancestor")
        twin = self.twin.get(upload)
        base = self.contents(twin) if twin in self.fixes else None
        if base is None and upload in self.parent:
            base = self.contents(self.parent[upload], seen | {upload})
        return None if base is None else base | self.fixes[upload]


def contained(read: Read, skip: Iterable[str]) -> Dict[str, Set[str]]:
    """Per ABI on the line (past the last of `skip`, the ABIs the table places on upstream;
    before them are the development uploads on release candidates): the CVEs every upload of
    that ABI contains; ABIs with an upload of broken ancestry are left out."""
    by_abi: Dict[str, List[Optional[Set[str]]]] = {}
    for upload in read.fixes:
        by_abi.setdefault(abi_of(upload), []).append(read.contents(upload))
    last = max((_abi_number(a) for a in skip if a.startswith(ABI_BASE + "-")), default=0)
    return {abi: set.intersection(*sets) for abi, sets in by_abi.items()  # type: ignore[misc]
            if _abi_number(abi) > last and all(s is not None for s in sets)}


def threshold(cve: str, line: Dict[str, Set[str]]) -> Optional[str]:
    """The lowest ABI from which every ABI read contains the fix, or None."""
    order = sorted(line, key=_abi_number)
    found = None
    for abi in reversed(order):
        if cve not in line[abi]:
            break
        found = abi
    return found


def upstream_carries(rng: Dict[str, object], base: str = BASE) -> bool:
    """Whether an upstream range says `base` carries the bug (introduced at or before it,
    and no fix covers it)."""
    fixed = tuple(str(f) for f in rng.get("fixed", []) or [])  # type: ignore[union-attr]
    intro = rng.get("introduced")
    try:
        if isinstance(intro, str) and kbuild.compare(kbuild.UPSTREAM, base, intro) < 0:
            return False
        return not kbuild.fix_for(kbuild.UPSTREAM, base, fixed)[0]
    except ValueError:
        return False


def catalog_cves(drivers: Path) -> Set[str]:
    """The catalog's known issues with an upstream range that reaches the line's base."""
    ids = set()
    for path in sorted(drivers.glob("*.json")):
        for entry in json.loads(path.read_text(encoding="utf-8"))["drivers"].values():
            for issue in entry.get("known_issues", []):
                up = issue.get("affected", {}).get("kernels", {}).get(kbuild.UPSTREAM)
                if up and upstream_carries(up):
                    ids.add(issue["id"])
    return ids


def propose(read: Read, table: Iterable[str], wanted: Set[str]) -> Dict[str, object]:
    """The proposal merge.py --kernel-lines reads, and the line's uploads read."""
    line = contained(read, table)
    found: Dict[str, Dict[str, List[str]]] = {}
    for cve in sorted(wanted):
        abi = threshold(cve, line)
        if abi is None:
            continue
        upload = min((u for u in read.fixes if cve in read.fixes[u]), key=_abi_number)
        found[cve] = {"fixed": [abi], "urls": [read.url[upload]], "evidence": [
            f"{SERIES} upload linux {upload} names {cve} among its fixes; every upload read "
            f"from ABI {abi} on descends from one that does"]}
    abis = sorted(line, key=_abi_number)
    return {"lines": {LINE: found}, "bases": {LINE: BASE}, "abis": {LINE: abis}}


def write_builds(path: Path, proposal: Dict[str, object], read: Read) -> None:
    """Rewrite `kernel_builds.ubuntu_lines` of a catalog file, keeping everything else."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    abis: List[str] = proposal["abis"][LINE]  # type: ignore[index]
    urls = sorted({read.url[u] for u in read.fixes if abi_of(u) in set(abis)})
    lines = doc["kernel_builds"].setdefault("ubuntu_lines", {})
    kept = lines.get(LINE, {})  # proxmox_kernels.py's part, rewritten only by it
    lines[LINE] = {"series": SERIES, "abis": abis, "evidence": [
        {"title": f"Ubuntu {SERIES}: changelog of {url.rsplit('/', 1)[-1]}",
         "url": url,
         "observed": "each entry 'linux (6.8.0-N.M) noble' is an upload of ABI 6.8.0-N; the "
                     "entries below it are the uploads it is built on; bullets '* CVE-...' "
                     "and '// CVE-...' tags name the CVEs it fixes"} for url in urls],
        "notes": [f"uploads past the Ubuntu ABI table (its last whole upstream stable "
                  f"release, {BASE}); {len(abis)} ABIs {abis[0]} .. {abis[-1]}"
                  if abis else "no uploads read"]}
    if kept.get("proxmox"):
        lines[LINE]["proxmox"] = kept["proxmox"]
        lines[LINE]["evidence"] += [e for e in kept.get("evidence", [])
                                    if "pve-kernel" in e.get("url", "")]
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 fromfile_prefix_chars="@")
    ap.add_argument("--changelog", nargs=2, action="append", metavar=("PATH", "URL"),
                    required=True, help="a changelog (plain or .gz) and where it came from")
    ap.add_argument("--drivers", type=Path, default=REPO / "catalogs" / "drivers")
    ap.add_argument("--builds", type=Path, help="catalog file whose ubuntu_lines to rewrite")
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    args = ap.parse_args(argv)
    read = Read()
    try:
        for path, url in args.changelog:
            read.add(read_text(Path(path)), url)
        table: List[str] = []
        if args.builds:
            doc = json.loads(args.builds.read_text(encoding="utf-8"))
            table = list(doc["kernel_builds"].get("ubuntu", {}).get("abi", {}))
        proposal = propose(read, table, catalog_cves(args.drivers))
    except (SourceError, OSError, ValueError, KeyError) as exc:
        print(f"ubuntu_kernels: {exc}", file=sys.stderr)
        return 1
    args.output.write_text(json.dumps(proposal, indent=1, sort_keys=True) + "\n",
                           encoding="utf-8")
    if args.builds:
        write_builds(args.builds, proposal, read)
    found = proposal["lines"][LINE]  # type: ignore[index]
    print(f"{LINE}: {len(proposal['abis'][LINE])} ABIs read, "  # type: ignore[index]
          f"{len(found)} catalog CVEs with a fix on the line")
    return 0


if __name__ == "__main__":
    sys.exit(main())
