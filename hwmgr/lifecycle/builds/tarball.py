"""Vendor sources as vendors ship them: a source RPM, or the vendor's own tarball.

A tarball (`.tar.gz`, `.tgz`, `.tar.xz`: Broadcom's `netxtreme-bnxt_en-<ver>.tar.gz`, Intel's
`igb-<ver>.tar.gz`) goes through the same member checks as the tarball inside an SRPM
(`srpm.check_tarball`: no absolute names, no `..`, no link leaving the tree, no devices,
bounded size and member count, one line naming the archive and the member), its version is
read from its file name with the recipe's `source.tarball`, and the sha512 sums file a vendor
ships in the module tree (`source.manifest`, Broadcom's MANIFEST) must match every file it
lists before anything is extracted.
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

from hwmgr import safejson
from hwmgr.errors import NotFoundError, RefusedError
from hwmgr.host.links import Escape, table_links, walk
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.recipe import TARBALL_SUFFIXES, Recipe, check_version
from hwmgr.lifecycle.builds.srpm import check_tarball, extract_tarball, inspect_srpm, unpack_srpm
from hwmgr.output import printable

MAX_SOURCE_BYTES = 4 << 30  # a vendor source package; Broadcom's is ~1.5 MiB, Intel's 0.5
MAX_MANIFEST = 1 << 20  # a sums file of a few hundred lines is a few tens of KiB
_SUM_LINE = re.compile(r"([0-9a-fA-F]{128}) [ *](.+)")


@dataclass(frozen=True)
class TarballFacts:
    """What a vendor tarball says about itself: the version in its name, its members, and
    how many files its sums file vouched for (0: the recipe names none, or it has none)."""

    path: Path
    version: str
    members: tuple[str, ...]
    manifest_checked: int


def kind_of(path: Path) -> str:
    """'tarball' for a file named like one (.tar.gz, .tgz, .tar.xz), else 'srpm': rpm's own
    digest check then decides (anything else is refused there as corrupt, exit 9)."""
    if not os.path.lexists(path):
        raise NotFoundError(f"{printable(path)}: no such file")
    if Path(path).name.endswith(TARBALL_SUFFIXES):
        os.close(safejson.open_regular(path, printable(path), max_bytes=MAX_SOURCE_BYTES))
        return "tarball"
    return "srpm"


def tarball_version(recipe: Recipe, path: Path) -> str:
    """The version a vendor tarball's file name says, per the recipe (RefusedError if its
    name is not the recipe's form)."""
    version = recipe.tarball_version(path.name)
    if version is None:
        raise RefusedError(f"{printable(path.name)}: not named like recipe '{recipe.driver}' "
                           f"expects ({recipe.tarball}, source.tarball)")
    return check_version(version, f"{path.name}: version")


def _key(name: str) -> str:
    """A member's name as the link walk spells paths: no '.', no empty components."""
    return "/".join(p for p in name.split("/") if p not in ("", "."))


def _resolve(parts: list[str], links: dict[str, str]) -> str | None:
    """A member path with the archive's own symlinks followed; None if it leaves the tree."""
    try:
        return "/".join(walk(parts, table_links(links), reroot=False))
    except Escape:
        return None


def check_manifest(path: Path, recipe: Recipe, version: str,
                   members: list[tarfile.TarInfo]) -> int:
    """Check the recipe's sums file in the module tree against the archive's own members;
    returns the files it vouched for (0 when the recipe names none or the tree has none)."""
    if not recipe.manifest:
        return 0
    where, sub = path.name, recipe.source_subdir(version)
    links = {_key(m.name): m.linkname for m in members if m.issym()}
    regular = {_key(m.name): m for m in members if m.isreg()}
    tree = _resolve(sub.split("/"), links) if sub else ""
    if tree is None:
        raise RefusedError(f"{where}: source.subdir {sub!r} leads outside the tree")
    listed = _resolve([*tree.split("/"), *recipe.manifest.split("/")], links)
    if listed is None or listed not in regular:
        return 0
    raw = _stream(path, {listed}, MAX_MANIFEST, where).get(listed, b"")
    sums: dict[str, tuple[str, str]] = {}  # member key -> (sha512, name as listed)
    for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        found = _SUM_LINE.fullmatch(line.rstrip("\r"))
        if not found:
            raise RefusedError(f"{where}: member '{listed}' line {n}: not a sha512 sum "
                               "line; refusing")
        name = found.group(2)
        key = _resolve([*tree.split("/"), *name.split("/")], links)
        if key is None or ".." in name.split("/") or name.startswith("/"):
            raise RefusedError(f"{where}: member '{listed}' lists {printable(name)!r}, "
                               "outside the tree; refusing")
        if key not in regular:
            raise RefusedError(f"{where}: member '{printable(key)}' is listed in "
                               f"'{listed}' but not in the archive; refusing")
        sums[key] = (found.group(1).lower(), name)
    # one pass over the stream: a gzip member read out of order decompresses from the start
    digests = _stream(path, set(sums), None, where, hashed=True)
    for key, (want, _name) in sums.items():
        if digests.get(key) != want.encode():
            raise RefusedError(f"{where}: member '{printable(key)}' does not match its "
                               f"sha512 in '{listed}'; refusing")
    return len(sums)


def _stream(path: Path, wanted: set[str], limit: int | None, where: str,
            hashed: bool = False) -> dict[str, bytes]:
    """The `wanted` regular members' bytes (or sha512 hex digests), in one sequential read of
    an archive `check_tarball` already passed."""
    out: dict[str, bytes] = {}
    with tarfile.open(path, "r|*") as tar:
        for member in tar:
            key = _key(member.name)
            if key not in wanted or not member.isreg() or key in out:
                continue
            if limit is not None and member.size > limit:
                raise RefusedError(f"{where}: member '{printable(member.name)}' is over "
                                   f"{limit >> 10} KiB; refusing")
            fh = tar.extractfile(member)
            if fh is None:
                continue
            if hashed:
                h = hashlib.sha512()
                while chunk := fh.read(1 << 16):
                    h.update(chunk)
                out[key] = h.hexdigest().encode()
            else:
                out[key] = fh.read()
    return out


def inspect_tarball(path: Path, recipe: Recipe, version: str | None = None) -> TarballFacts:
    """Check a vendor tarball (name, members, sums file) without extracting anything."""
    path = Path(path)
    named = tarball_version(recipe, path)
    if version is not None and check_version(version) != named:
        raise RefusedError(f"{path.name}: its name says version {named}, not {version}")
    members = check_tarball(path)
    checked = check_manifest(path, recipe, named, members)
    return TarballFacts(path, named, tuple(sorted(m.name for m in members)), checked)


def unpack_tarball(host: Host, path: Path, workdir: str, recipe: Recipe, version: str) -> Path:
    """Check then extract a vendor tarball under host dir `workdir`; the module tree's path."""
    inspect_tarball(path, recipe, version)
    src = f"{workdir.rstrip('/')}/src"
    host.remove_tree(src)
    host.makedirs(workdir)
    extract_tarball(host, path, src)
    top = host.writable_path(src)
    sub = recipe.source_subdir(version)
    tree = os.path.realpath(top / sub) if sub else os.path.realpath(top)
    real_top = os.path.realpath(top)
    if not os.path.isdir(tree) or os.path.commonpath([real_top, tree]) != real_top:
        raise NotFoundError(f"{path.name}: has no source directory {sub!r} (recipe "
                            f"'{recipe.driver}' source.subdir)")
    return Path(tree)


def source_version(host: Host, recipe: Recipe, path: Path) -> str:
    """The version a vendor source says it is: an SRPM's Version (its Name checked against
    the recipe), a tarball's file name."""
    if kind_of(path) == "tarball":
        return tarball_version(recipe, path)
    _srpm_only(recipe, path)
    info = inspect_srpm(host, path)
    if info.name != recipe.srpm_name:
        raise RefusedError(f"{path.name}: package name is {info.name!r}, recipe "
                           f"'{recipe.driver}' expects {recipe.srpm_name!r} (source.srpm_name)")
    return info.version


def unpack_source(host: Host, path: Path, workdir: str, recipe: Recipe, version: str) -> Path:
    """Unpack an SRPM or a vendor tarball as the recipe lays it out; the module tree's path.

    A recipe of type 'srpm' takes the SRPM or the tarball it holds (vendors publish both);
    one of type 'tarball' only the tarball."""
    if kind_of(Path(path)) == "tarball":
        return unpack_tarball(host, Path(path), workdir, recipe, version)
    _srpm_only(recipe, Path(path))
    return unpack_srpm(host, Path(path), workdir, recipe, version)


def _srpm_only(recipe: Recipe, path: Path) -> None:
    if recipe.source_type != "srpm":
        raise RefusedError(f"{path.name}: a source RPM, but recipe '{recipe.driver}' builds "
                           f"from the vendor's tarball ({recipe.tarball}, source.type "
                           f"{recipe.source_type!r})")
