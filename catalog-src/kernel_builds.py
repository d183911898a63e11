"""Distribution kernel ABIs -> the upstream stable release each build is based on.

hwmgr places a Debian or Ubuntu host that only says `uname -r` (`6.1.0-18-amd64`,
`5.15.0-91-generic`) through `kernel_builds.{debian,ubuntu}.abi` in
catalogs/kernel-builds.json. This script makes that file from the distributions' own
kernel changelogs, and nothing else:

Debian (debian/changelog of the `linux` source package, as shipped in the packages):
- bullseye `5.10.0-N`, bookworm `6.1.0-N`: the ABI is set by the changelog lines
  "Set ABI to N" / "Bump ABI to N" and holds for every later upload until the next bump.
  From the upload whose changelog says "Generate kernel ABI name suffix automatically if not
  configured" on (5.10.244-1, 6.1.148-1), debian/bin/gencontrol.py derives it instead: the
  last manually set ABI plus one for each later non-backport changelog entry, counted from
  the anchor it names (5.10.237-1 = 35, 6.1.147-1 = 38; read from the gencontrol.py sources
  given, checked against the Bump lines; without one those ABIs are left out). The value is
  the upstream part of the package version; an ABI several uploads share gets the lowest.
- trixie `6.12.N+deb13`: from 6.12.33-1 ("Include target Debian release number in ABI name")
  the ABI is the upstream version plus `+deb13` (`+deb12` for bookworm's linux-6.12 and
  bookworm-backports), and a further upload of one upstream version to the same suite gets
  a serial suffix (debian/bin/gencontrol.py, debian/config/defines.toml): `+1` in the
  gencontrol.py of 6.12.74-2 (`6.12.74+deb13+1`), `.1` in that of 6.12.90-2 (`6.12.90+deb13.1`).
  The separator is read from the gencontrol.py sources given; an upload it cannot be
  settled for is left out. These names carry their upstream version, which hwmgr reads from
  `uname -r`; the catalog schema keeps only `X.Y.0-N` rows, so they are evidence only.

Ubuntu (debian.master/changelog of the `linux` source package): each upload
`linux (5.15.0-91.101) jammy` is ABI `5.15.0-91`. A stable update is stated as
"* Jammy update: v5.15.131 upstream stable release" and carries the release commit
"- Linux 5.15.131" (the Makefile's SUBLEVEL). An upload's base is the highest release whose
section holds that commit, in its own entry or any older one (updates accumulate); a section
without the release commit (5.15.0-75.82 takes one revert from v5.15.102) does not count.
Security respins are absent from later master changelogs (5.15.0-82.91 is built on
5.15.0-79.86, not on 5.15.0-81.90): each upload's own changelog is read.

Inputs (`--source KIND PATH URL`, URL being where PATH came from): KIND `debian` or `ubuntu`
for a changelog (plain, .gz, or debian/changelog inside a Debian *.debian.tar.xz),
`gencontrol` for a Debian linux *.debian.tar.xz whose debian/bin/gencontrol.py states the
naming rules, `packages` for a Debian Packages index whose linux-headers-<ABI>-common
versions must agree (cross-check; a disagreement is an error). The output is deterministic:
keys in natural order, indent=1. Exit 1 when a source contradicts itself or another.

Exact command (sources as fetched on 2026-11-28; the URLs are those in the evidence):

    W=/tmp/kb; mkdir -p $W; cd $W
    M=http://deb.debian.org/debian/pool/main/l
    S=http://deb.debian.org/debian-security/pool/updates/main/l
    a() { printf '%s\n' --source "$@"; }
    # Debian: an apt with bullseye, bookworm, trixie and their -security suites (deb, deb-src)
    apt-get download hyperv-daemons=6.1.192-3 hyperv-daemons=6.12.118-1 \
        linux-kbuild-6.12.117+deb12=6.12.117-1~deb12u1
    apt-get source --download-only --diff-only linux=5.10.262-1 linux=6.1.176-1 \
        linux=6.12.38-1 linux=6.12.74-2 linux=6.12.90-2 linux-6.12=6.12.107-1~deb12u1
    for d in hyperv-daemons_6.1.192-3 hyperv-daemons_6.12.118-1 \
             linux-kbuild-6.12.117+deb12_6.12.117-1~deb12u1; do
        dpkg-deb --fsys-tarfile ${d}_amd64.deb | tar -xO --wildcards \
            './usr/share/doc/*/changelog.Debian.gz' > $d.changelog.gz
    done
    L=/var/lib/apt/lists
    for f in $L/*_dists_{bullseye,bookworm,trixie}*_main_binary-amd64_Packages.lz4; do
        /usr/lib/apt/apt-helper cat-file $f > $(basename $f .lz4)
    done
    K=linux-kbuild-6.12.117+deb12_6.12.117-1~deb12u1
    {
    a debian $W/linux_5.10.262-1.debian.tar.xz $S/linux/linux_5.10.262-1.debian.tar.xz
    for v in 6.1.192-3 6.12.118-1; do
        a debian $W/hyperv-daemons_$v.changelog.gz $S/linux/hyperv-daemons_${v}_amd64.deb
    done
    a debian $W/$K.changelog.gz $S/linux-6.12/$(echo ${K}_amd64.deb | sed 's/+/%2b/; s/~/%7e/')
    for v in 5.10.262-1:$S 6.1.176-1:$M 6.12.38-1:$M 6.12.74-2:$S 6.12.90-2:$S; do
        t=linux_${v%%:*}.debian.tar.xz; a gencontrol $W/$t ${v#*:}/linux/$t
    done
    t=linux-6.12_6.12.107-1~deb12u1.debian.tar.xz
    a gencontrol $W/$t $S/linux-6.12/linux-6.12_6.12.107-1%7edeb12u1.debian.tar.xz
    for f in *_Packages; do a packages $W/$f http://$(echo $f | tr _ /); done
    # Ubuntu: debian.master/changelog of every "Import Debian changes <version>" commit of
    # github.com/balabit-deps/balabit-os-9-linux (jammy) and balabit-os-8-linux (focal),
    # cloned into $B
    for r in 9:jammy 8:focal; do
        G=balabit-os-${r%:*}-linux
        git -C $B/$G log --format='%H %s' | grep 'Import Debian changes' |
        while read h _ _ _ v; do
            c=$W/${r#*:}-$v-${h:0:12}.changelog
            git -C $B/$G show $h:debian.master/changelog > $c
            a ubuntu $c https://github.com/balabit-deps/$G/blob/$h/debian.master/changelog
        done
    done
    # noble: the debian.master/changelog of linux 6.8.0-49.49, as imported in
    # github.com/yukimaruyama2023/ubuntu-noble (its only commit that has that file)
    N=b6014e538651a3b2631bd04fcf6c1cfda39c2c4c
    git -C $B/ubuntu-noble show $N:debian.master/changelog > $W/noble-6.8.0-49.49.changelog
    a ubuntu $W/noble-6.8.0-49.49.changelog \
        https://github.com/yukimaruyama2023/ubuntu-noble/blob/$N/debian.master/changelog
    # jammy past the balabit imports (fetched 2026-11-29): the changelog.Debian.gz of every
    # linux-headers-5.15.0-N (N > 170) package the jammy-updates and jammy-security indexes of
    # archive.ubuntu.com list (each holds its last ten uploads)
    U=http://archive.ubuntu.com/ubuntu
    for p in jammy-updates jammy-security; do
        curl -s $U/dists/$p/main/binary-amd64/Packages.gz | zcat
    done | awk '/^Package: linux-headers-5\\.15\\.0-[0-9]+$/{p=1} p&&/^Filename:/{print $2; p=0}' |
        sort -u | awk -F'5.15.0-' '{split($2, n, "_"); if (n[1] + 0 > 170) print}' |
        while read f; do
            b=$(basename $f .deb); curl -s -o $W/$b.deb $U/$f
            dpkg-deb --fsys-tarfile $W/$b.deb | tar -xO --wildcards \
                './usr/share/doc/*/changelog.Debian.gz' > $W/$b.changelog.gz
            a ubuntu $W/$b.changelog.gz $U/$f
        done
    } > $W/kb.args
    python3 catalog-src/kernel_builds.py --update -o catalogs/kernel-builds.json @$W/kb.args

(`@FILE` reads one argument a line.) `--update` rewrites only the distributions it is given
sources for and keeps the file's other sections (`kernel_builds.lifecycle` is kept by hand).
To redo the Ubuntu table alone, give only the Ubuntu sources.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import lzma
import re
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

SCHEMA_VERSION = 3

AUTO_MARKER = "Generate kernel ABI name suffix automatically"
# 6.12.33-1: "Include target Debian release number in ABI name"
RELEASE_ABI_MARKER = "Include target Debian release number in ABI name"
# debian/config/defines.toml [[debianrelease]]: suite regex -> ABI suffix
RELEASE_SUFFIXES: Tuple[Tuple[str, str], ...] = (
    (r"unstable", "+deb13"),
    (r"trixie(-security)?", "+deb13"),
    (r"bookworm-backports", "+deb12"),
    (r"bookworm(-security)?", "+deb12"),
)
# series whose ABI is a number (X.Y.0-N); later ones carry the upstream version
NUMBERED_SERIES = ("5.10", "6.1")
# in debian/bin/gencontrol.py: the serial suffix of a further upload of one upstream
# version (`+1` in 6.12.74-2, `.1` from 6.12.90-2 on) and the automatic ABI's anchor
_SERIAL_CODE = re.compile(r"self\.abiname \+= f'([.+])\{n-1\}'")
_ANCHOR_CODE = re.compile(r"str\(entry\.version\) == '([^']+)':\s*\n\s*abiname_major \+= (\d+)")

# the table's keys (catalog schema): X.Y.0-N; trixie-style names carry the upstream version
# themselves (hwmgr reads it from `uname -r`), so they are evidence, not table rows
ABI_KEY = re.compile(r"^[0-9]+\.[0-9]+\.0-[0-9]+$")
_HEADER = re.compile(r"^([a-z0-9][a-z0-9.+-]*) \(([^()\s]+)\) ([^;]+);", re.M)
_BUMP = re.compile(r"^\s+\*\s+(?:Bump|Set) ABI to (\w+)\b", re.M)
_UBUNTU_VERSION = re.compile(r"^(\d+\.\d+\.\d+)-(\d+)\.(\d+)$")
_UPDATE = re.compile(r"^  \* \w+ update: v(\d+\.\d+\.\d+) upstream stable release")
_RELEASE_COMMIT = re.compile(r"^\s+- Linux (\d+\.\d+\.\d+)\s*$")
_BULLET = re.compile(r"^  \* ")
# from noble on, after its last whole release Ubuntu applies picks from newer stable series,
# named by date (focal's "upstream stable patchset v5.4.192" is its own series: not these)
_PATCHSET = re.compile(r"^  \* \w+ update: upstream stable patchset \d{4}-\d{2}-\d{2}\b")


class SourceError(ValueError):
    """A changelog that does not say what this script relies on."""


def vkey(version: str) -> Tuple[int, ...]:
    """(6, 1, 76) for 6.1.76."""
    return tuple(int(p) for p in version.split("."))


def natural_key(text: str) -> Tuple[Tuple[int, int, str], ...]:
    """Sort key: digit runs as numbers (5.10.0-9 before 5.10.0-10)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                 for p in re.findall(r"\d+|\D+", text))


@dataclass(frozen=True)
class Entry:
    """One changelog entry: `source (version) distribution;` and its text."""

    source: str
    version: str
    distribution: str
    body: str

    @property
    def upstream(self) -> str:
        """The upstream part of a Debian version: 6.1.76 of 6.1.76-1, 6.12.74 of
        6.12.74-2~bpo12+1 (an epoch never occurs in these packages)."""
        return self.version.rsplit("-", 1)[0]

    @property
    def revision(self) -> str:
        return self.version.rsplit("-", 1)[1] if "-" in self.version else ""


def parse_changelog(text: str) -> List[Entry]:
    """The entries, newest first, as in the file."""
    heads = list(_HEADER.finditer(text))
    out = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out.append(Entry(m.group(1), m.group(2), m.group(3).strip(), text[m.end():end]))
    if not out:
        raise SourceError("no changelog entries")
    return out


def read_text(path: Path) -> str:
    """A changelog file: plain, .gz, or debian/changelog inside a *.debian.tar.xz."""
    if path.name.endswith(".debian.tar.xz"):
        return debian_tar_member(path, "debian/changelog")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def debian_tar_member(path: Path, member: str) -> str:
    """A file of a Debian *.debian.tar.xz (debian/changelog, debian/bin/gencontrol.py)."""
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(path.read_bytes()))) as tar:
        try:
            got = tar.extractfile(member)
        except KeyError:
            got = None
        if got is None:
            raise SourceError(f"{path}: no {member}")
        return got.read().decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Gencontrol:
    """What one source version's debian/bin/gencontrol.py says about ABI names."""

    version: str  # the top entry of that source's debian/changelog
    serial: Optional[str]  # "+" or "." before a further upload's serial number
    anchor: Optional[Tuple[str, int]]  # (version, ABI) the automatic count starts from

    @classmethod
    def read(cls, path: Path) -> Gencontrol:
        """From a Debian linux *.debian.tar.xz."""
        version = parse_changelog(debian_tar_member(path, "debian/changelog"))[0].version
        return cls.from_code(version, debian_tar_member(path, "debian/bin/gencontrol.py"))

    @classmethod
    def from_code(cls, version: str, code: str) -> Gencontrol:
        """From the text of gencontrol.py of source `version`."""
        serial = _SERIAL_CODE.search(code)
        anchor = _ANCHOR_CODE.search(code)
        return cls(version, serial.group(1) if serial else None,
                   (anchor.group(1), int(anchor.group(2))) if anchor else None)


def debian_order(version: str) -> Tuple[Tuple[int, ...], Tuple[Tuple[int, int, str], ...]]:
    """Enough of Debian's version order for these packages: upstream, then revision."""
    up, _, rev = version.rpartition("-")
    return vkey(up), natural_key(rev)


def serial_separator(version: str, codes: Sequence[Gencontrol]) -> Optional[str]:
    """The serial separator gencontrol.py used for `version`: that of the source version
    itself, or of the sources around it when they agree, or of the newest one below it
    when it is newer than all; None when unknown."""
    known = sorted((c for c in codes if c.serial), key=lambda c: debian_order(c.version))
    at = debian_order(version)
    lower = [c for c in known if debian_order(c.version) <= at]
    upper = [c for c in known if debian_order(c.version) >= at]
    if lower and upper and lower[-1].serial == upper[0].serial:
        return lower[-1].serial
    if lower and not upper:
        return lower[-1].serial
    return None


@dataclass
class Found:
    """ABI -> the package versions built as it and their upstream bases."""

    builds: Dict[str, Dict[str, str]] = field(default_factory=dict)
    # Ubuntu uploads with picks from newer stable series since their base: not mapped
    picked: List[str] = field(default_factory=list)

    def add(self, abi: str, package: str, upstream: str) -> None:
        old = self.builds.setdefault(abi, {}).get(package)
        if old is not None and old != upstream:
            raise SourceError(f"{abi} {package}: {old} and {upstream}")
        self.builds[abi][package] = upstream

    def merge(self, other: Found) -> None:
        for abi, pkgs in other.builds.items():
            for pkg, up in pkgs.items():
                self.add(abi, pkg, up)

    def table(self) -> Dict[str, str]:
        """ABI -> the lowest upstream base of its builds (the safe side for 'fixed in')."""
        return {abi: min(pkgs.values(), key=vkey)
                for abi, pkgs in sorted(self.builds.items(), key=lambda kv: natural_key(kv[0]))}


# --- Debian ------------------------------------------------------------------------------


def _series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _release(distribution: str) -> str:
    """bookworm of bookworm-security / bookworm-backports."""
    return distribution.split("-")[0]


def debian_numbered(entries: Sequence[Entry], codes: Sequence[Gencontrol] = ()) -> Found:
    """bullseye/bookworm: `X.Y.0-N` from Set/Bump ABI lines, then gencontrol.py's count
    from its anchor (left out when no gencontrol.py of the series is given)."""
    series = _series(entries[0].upstream)
    found = Found()
    if series not in NUMBERED_SERIES:
        return found
    anchors = {c.anchor for c in codes if c.anchor and _series(c.anchor[0]) == series}
    if len(anchors) > 1:
        raise SourceError(f"gencontrol.py anchors disagree: {sorted(anchors)}")
    anchor = anchors.pop() if anchors else None
    abi: Optional[int] = None
    auto = False
    for e in reversed(entries):  # oldest first
        if (e.source != "linux" or _series(e.upstream) != series or "~" in e.version
                or e.distribution in ("experimental", "UNRELEASED")):
            continue
        stated = _BUMP.findall(e.body)
        if AUTO_MARKER in e.body:
            if anchor is None:
                break  # the count's rule is in gencontrol.py: not given, not guessed
            auto = True
        if auto:
            if abi is None:
                raise SourceError(f"{e.version}: automatic ABI without a previous one")
            abi += 1
            if stated and stated[-1] != str(abi):
                raise SourceError(f"{e.version}: states ABI {stated[-1]}, count gives {abi}")
        elif stated:
            abi = int(stated[-1]) if stated[-1].isdigit() else None  # "Set ABI to trunk"
        if anchor and e.version == anchor[0] and abi != anchor[1]:
            raise SourceError(f"{e.version}: ABI {abi}, gencontrol.py says {anchor[1]}")
        if abi is not None:
            found.add(f"{series}.0-{abi}", e.version, e.upstream)
    return found


def debian_release_named(entries: Sequence[Entry], codes: Sequence[Gencontrol] = (),
                         marked: bool = False) -> Found:
    """trixie era: `<upstream>+debNN[<sep>n]`, n counting earlier uploads of the same
    upstream version to the same suite group (gencontrol.py `process_changelog`); an upload
    that needs a serial whose separator no given gencontrol.py settles is left out. Only
    entries from the one saying RELEASE_ABI_MARKER on count (all when `marked`: a part of
    a changelog known to be newer than that)."""
    found = Found()
    start = next((i for i, e in enumerate(entries) if RELEASE_ABI_MARKER in e.body),
                 len(entries) - 1 if marked else None)
    if start is None:
        return found
    groups = [re.compile(rx) for rx, _ in RELEASE_SUFFIXES]
    for i in range(start, -1, -1):  # oldest first, from the marker on
        e = entries[i]
        g = next((j for j, rx in enumerate(groups) if rx.fullmatch(e.distribution)), None)
        if g is None:
            continue
        n = sum(1 for older in entries[i:]
                if older.upstream == e.upstream and groups[g].fullmatch(older.distribution))
        abi = e.upstream + RELEASE_SUFFIXES[g][1]
        if n > 1:
            sep = serial_separator(e.version, codes)
            if sep is None:
                continue
            abi += f"{sep}{n - 1}"
        found.add(abi, e.version, e.upstream)
    return found


def debian_found(entries: Sequence[Entry], codes: Sequence[Gencontrol] = ()) -> Found:
    found = debian_numbered(entries, codes)
    found.merge(debian_release_named(entries, codes))
    return found


# --- Ubuntu ------------------------------------------------------------------------------


def released_updates(body: str) -> List[str]:
    """Stable releases an entry applies whole: an "update: vX upstream stable release"
    section that holds the release commit "- Linux X"."""
    out: List[str] = []
    current: Optional[str] = None
    for line in body.splitlines():
        m = _UPDATE.match(line)
        if m:
            current = m.group(1)
            continue
        if _BULLET.match(line):
            current = None
            continue
        r = _RELEASE_COMMIT.match(line)
        if r and current is not None and r.group(1) == current:
            out.append(current)
    return out


def ubuntu_found(entries: Sequence[Entry]) -> Found:
    """`X.Y.Z-N` -> the highest stable release applied whole up to that upload; an upload
    that has also taken an "upstream stable patchset" since that release (picks from newer
    stable series, after its own series ended upstream: noble's 6.8 from 6.8.0-44 on) is
    left out, as no single upstream release is its base any more."""
    top = _UBUNTU_VERSION.match(entries[0].version)
    if not top or entries[0].source != "linux":
        raise SourceError(f"not an Ubuntu linux changelog: {entries[0].version}")
    series, dist = top.group(1), entries[0].distribution
    found = Found()
    base: Optional[str] = None
    picked = False  # a patchset applied since `base`
    for e in reversed(entries):
        if not e.version.startswith(series + "-"):
            continue
        for rel in released_updates(e.body):
            if base is None or vkey(rel) > vkey(base):
                base, picked = rel, False
        picked = picked or any(_PATCHSET.match(ln) for ln in e.body.splitlines())
        m = _UBUNTU_VERSION.match(e.version)
        if m and e.source == "linux" and e.distribution == dist and base is not None \
                and picked:
            found.picked.append(e.version)
        elif m and e.source == "linux" and e.distribution == dist and base is not None:
            found.add(f"{series}-{m.group(2)}", e.version, base)
    return found


# --- cross-check and output ----------------------------------------------------------------


def packages_abis(text: str) -> Dict[str, str]:
    """linux-headers-<ABI>-common -> Version, from a Debian Packages index."""
    out: Dict[str, str] = {}
    for stanza in text.split("\n\n"):
        pkg = re.search(r"^Package: linux-headers-(\S+)-common$", stanza, re.M)
        ver = re.search(r"^Version: (\S+)$", stanza, re.M)
        if pkg and ver:
            out[pkg.group(1)] = ver.group(1)
    return out


def cross_check(found: Found, archive: Dict[str, str]) -> List[str]:
    """ABIs of the archive whose version the changelogs put elsewhere."""
    bad = []
    for abi, version in sorted(archive.items(), key=lambda kv: natural_key(kv[0])):
        pkgs = found.builds.get(abi)
        if pkgs is not None and version not in pkgs:
            bad.append(f"{abi}: archive {version}, changelog {sorted(pkgs)}")
    return bad


@dataclass
class Source:
    kind: str  # debian, ubuntu, gencontrol (a Debian *.debian.tar.xz), packages
    path: Path
    url: str


def _span(keys: Iterable[str]) -> str:
    ks = sorted(keys, key=natural_key)
    return ks[0] if len(ks) == 1 else f"{ks[0]} .. {ks[-1]}"


def _shared(found: Found, keys: Iterable[str]) -> str:
    multi = [f"{k} ({', '.join(sorted(found.builds[k], key=natural_key))})" for k in
             sorted(keys, key=natural_key) if len({*found.builds[k].values()}) > 1]
    if not multi:
        return ""
    return ("; ABIs shared by uploads of different upstream releases take the lowest: "
            + "; ".join(multi))


def debian_evidence(src: Source, entries: Sequence[Entry], found: Found,
                    new_keys: Sequence[str], codes: Sequence[Gencontrol]) -> Dict[str, str]:
    top = entries[0]
    numbered = [k for k in new_keys if ABI_KEY.match(k)]
    named = [k for k in new_keys if k not in numbered]
    dists = {e.version: e.distribution for e in entries}
    parts = []
    if numbered:
        series = _series(top.upstream)
        ex_abi = numbered[len(numbered) // 2]
        ex_pkg = sorted(found.builds[ex_abi], key=natural_key)[0]
        anchor = next((c.anchor for c in codes
                       if c.anchor and _series(c.anchor[0]) == series), None)
        auto = anchor and any(AUTO_MARKER in e.body for e in entries)
        parts.append(
            f"headers such as 'linux ({ex_pkg}) {dists.get(ex_pkg, top.distribution)}' give "
            "the package version, whose upstream part is the base; 'Set ABI to N' and "
            f"'Bump ABI to N' lines name the ABI {series}.0-N (here {ex_abi}) until the next "
            "bump" + (f"; from the entry saying '{AUTO_MARKER} if not configured' the ABI "
                      "is the previous one +1 for each upload (debian/bin/gencontrol.py "
                      f"counts from {anchor[0]} = {anchor[1]})" if auto and anchor else "")
            + f"; {len(numbered)} ABIs {_span(numbered)}")
    if named:
        ex = next((k for k in named if re.search(r"deb\d+[.+]\d+$", k)), named[-1])
        ex_pkg = sorted(found.builds[ex], key=natural_key)[0]
        parts.append(
            f"from 6.12.33-1 ('{RELEASE_ABI_MARKER}') the ABI is the upstream version + "
            "'+deb13' (unstable, trixie) or '+deb12' (bookworm-backports, bookworm linux-6.12), "
            "a further upload of the same version to the same suite adding a serial "
            f"(here 'linux ({ex_pkg}) {dists.get(ex_pkg, top.distribution)}' is {ex}); "
            f"{len(named)} such names {_span(named)}, none needing a table row as each "
            "carries its upstream version")
    return {"title": f"Debian {_release(top.distribution)}: kernel changelog of "
                     f"{top.source} {top.version} ({top.distribution})",
            "url": src.url,
            "observed": "; ".join(parts) + _shared(found, new_keys)}


def gencontrol_evidence(src: Source, code: Gencontrol) -> Dict[str, str]:
    said = []
    if code.anchor:
        said.append(f"the automatic ABI counts from {code.anchor[0]} = ABI {code.anchor[1]}, "
                    "+1 for every later non-backport changelog entry")
    if code.serial:
        said.append(f"a further upload of one upstream version to the same suite gets the "
                    f"serial suffix '{code.serial}<n-1>' (e.g. +deb13{code.serial}1)")
    return {"title": f"Debian linux {code.version} source: debian/bin/gencontrol.py",
            "url": src.url, "observed": "; ".join(said)}


def ubuntu_evidence(src: Source, entries: Sequence[Entry], found: Found,
                    new_keys: Sequence[str], found_here: Optional[Found] = None) -> Dict[str, str]:
    found_here = found_here or Found()
    top = entries[0]
    series = top.version.split("-")[0]
    rel = top.distribution.capitalize()
    if len(new_keys) > 3:
        how = (f"each upload 'linux ({series}-N.M) {top.distribution}' is ABI {series}-N; "
               f"'* {rel} update: vX upstream stable release' sections ending in the release "
               "commit '- Linux X' set the base, kept by later uploads until the next one "
               f"(a section without that commit is not counted); {len(new_keys)} ABIs "
               f"{_span(new_keys)}")
    else:
        table = found.table()
        pairs = ", ".join(f"{k} -> {table[k]}" for k in new_keys)
        how = (f"top entry 'linux ({top.version}) {top.distribution}' (an upload absent from "
               f"the newer changelogs), base from the '{rel} update' sections of it and its "
               f"older entries: {pairs}")
    if found_here.picked:
        how += (f"; the uploads {found_here.picked[0]} .. {found_here.picked[-1]} also took "
                f"'{rel} update: upstream stable patchset <date>' sections (picks from newer "
                "stable series) after their last whole release, so no upstream release is "
                "their base: left out")
    return {"title": f"Ubuntu {top.distribution}: debian.master/changelog of linux "
                     f"{top.version}",
            "url": src.url, "observed": how + _shared(found, new_keys)}


def _newest_first(item: Tuple[Source, List[Entry], Found]) -> Tuple[object, ...]:
    top = item[1][0]
    return natural_key(top.upstream), debian_order(top.version)


def build(sources: Sequence[Source]) -> Dict[str, object]:
    """The kernel-builds.json document."""
    codes = [(src, Gencontrol.read(src.path)) for src in sources if src.kind == "gencontrol"]
    gencs = [c for _, c in codes]
    out: Dict[str, object] = {}
    for kind in ("debian", "ubuntu"):
        parsed = []
        for src in sources:
            if src.kind == kind:
                entries = parse_changelog(read_text(src.path))
                f = debian_found(entries, gencs) if kind == "debian" else ubuntu_found(entries)
                parsed.append((src, entries, f))
        if not parsed:
            continue
        # newest changelog first: it explains most ABIs; older ones only what it lacks
        parsed.sort(key=_newest_first, reverse=True)
        total = Found()
        evidence = []
        for src, entries, f in parsed:
            new = [k for k in sorted(f.builds, key=natural_key) if k not in total.builds]
            total.merge(f)
            if new:
                evidence.append((src, entries, new, f))
        if kind == "ubuntu":
            ev = [ubuntu_evidence(s, e, total, n, f) for s, e, n, f in evidence]
        else:
            ev = [debian_evidence(s, e, total, n, gencs) for s, e, n, _ in evidence]
            ev += [gencontrol_evidence(s, c) for s, c in
                   sorted(codes, key=lambda sc: debian_order(sc[1].version))]
            for src in sources:
                if src.kind == "packages":
                    archive = packages_abis(read_text(src.path))
                    bad = cross_check(total, archive)
                    if bad:
                        raise SourceError(f"{src.path}: " + "; ".join(bad))
                    seen = [k for k in sorted(archive, key=natural_key) if k in total.builds]
                    if seen:
                        ev.append({"title": "Debian archive index "
                                            + src.url.split("/dists/", 1)[-1],
                                   "url": src.url,
                                   "observed": "its linux-headers-<ABI>-common packages agree "
                                               "with the changelogs: " + ", ".join(
                                                   f"{k} {archive[k]}" for k in seen)})
        table = {k: v for k, v in total.table().items() if ABI_KEY.match(k)}
        out[kind] = {"abi": table, "evidence": ev}
        if kind == "debian":  # the suite each ABI series belongs to, as the changelogs name it
            bases = {".".join(k.split(".")[:2]) for k in table}
            out[kind]["releases"] = {b: r for b, r in DEBIAN_RELEASES.items() if b in bases}
    return {"schema_version": SCHEMA_VERSION, "kernel_builds": out}


# Debian's X.Y.0-N ABI series per release (bullseye 11, bookworm 12), as the changelogs'
# suites say; Ubuntu gets none: its newer kernels also ship to older releases (HWE)
DEBIAN_RELEASES = {"5.10": "11", "6.1": "12"}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 fromfile_prefix_chars="@")
    ap.add_argument("--source", nargs=3, action="append", default=[],
                    metavar=("KIND", "PATH", "URL"),
                    help="KIND debian or ubuntu (a changelog), gencontrol (a Debian "
                         "*.debian.tar.xz) or packages (a Debian Packages index to "
                         "cross-check); URL where the file came from")
    ap.add_argument("-o", "--output", type=Path, help="write here (default: stdout)")
    ap.add_argument("--update", action="store_true",
                    help="replace only the distributions given sources for in the existing "
                         "--output file, keeping its other sections")
    args = ap.parse_args(argv)
    if args.update and not (args.output and args.output.is_file()):
        ap.error("--update needs an existing --output file")
    sources = []
    for kind, path, url in args.source:
        if kind not in ("debian", "ubuntu", "gencontrol", "packages"):
            ap.error(f"unknown KIND {kind}")
        sources.append(Source(kind, Path(path), url))
    try:
        doc = build(sources)
    except SourceError as exc:
        print(f"kernel_builds: {exc}", file=sys.stderr)
        return 1
    if args.update:
        old = json.loads(args.output.read_text(encoding="utf-8"))
        old.setdefault("kernel_builds", {}).update(doc["kernel_builds"])  # type: ignore[arg-type]
        doc = old
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
