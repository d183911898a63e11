"""Unpack a vendor source RPM into a private work dir and hand back the driver's source tree.

Everything is checked before anything lands on disk: the package's digests, that it is a
source package with the Name/Version the catalog promised, that its file list holds only plain
file names (rpm 4.18 `rpm -i` of a source package writes `../x` outside its top dir), and that
the source tarball has no absolute, `..`, escaping-link or device members.
"""

from __future__ import annotations

import copy
import fnmatch
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from hwmgr.errors import BadInputError, HwmgrError, NotFoundError, RefusedError
from hwmgr.host.links import Escape, table_links, walk
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.recipe import Recipe, check_version
from hwmgr.lifecycle.source.signature import RPM_TIMEOUT
from hwmgr.numtext import to_int

MAX_TAR_BYTES = 2 << 30  # uncompressed size of all regular members
MAX_TAR_MEMBERS = 100_000
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+~@%-")
_QUERY = (
    "%{NAME}\\n%{VERSION}\\n%{RELEASE}\\n%{SOURCEPACKAGE}\\n%{FILENAMES:arraysize}\\n"
    "[%{FILEMODES:octal} %{FILESIZES} %{FILENAMES}\\n]"
)


@dataclass(frozen=True)
class SrpmFile:
    """One file in a source RPM's payload, as its header lists it."""

    name: str
    mode: int
    size: int


@dataclass(frozen=True)
class SrpmInfo:
    """What a source RPM's header says about itself."""

    path: Path
    name: str
    version: str
    release: str
    files: tuple[SrpmFile, ...]


def _rpm(host: Host, argv: list[str], what: Path) -> str:
    res = host.run(argv, timeout=RPM_TIMEOUT)
    if not res.available:
        raise HwmgrError(f"{what}: cannot read source RPMs: `rpm` is not installed")
    if not res.ok:
        raise BadInputError(f"{what}: not a readable RPM package ({res.describe()})")
    return res.stdout


def inspect_srpm(host: Host, srpm: Path) -> SrpmInfo:
    """Verify a source RPM's digests and read its Name/Version/Release and file list."""
    srpm = Path(srpm)
    if not srpm.is_file():
        raise NotFoundError(f"source RPM {srpm} does not exist")
    check = host.run(["rpm", "-K", "--nosignature", str(srpm)], timeout=RPM_TIMEOUT)
    if not check.available:
        raise HwmgrError(f"{srpm}: cannot read source RPMs: `rpm` is not installed")
    if not check.ok:
        raise RefusedError(f"{srpm}: digest check failed, file is corrupt or tampered "
                           f"({check.describe()})")
    out = _rpm(host, ["rpm", "-qp", "--nosignature", "--qf", _QUERY, str(srpm)], srpm)
    lines = out.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 5:
        raise BadInputError(f"{srpm}: unexpected `rpm -qp` output")
    name, version, release, source_pkg, count_text = lines[:5]
    if source_pkg.strip() != "1":
        raise RefusedError(f"{srpm}: is a binary RPM, not a source RPM (.src.rpm)")
    count = to_int(count_text)
    if count is None:
        raise BadInputError(f"{srpm}: unexpected file count {count_text[:40]!r}")
    rows = lines[5:]
    if len(rows) != count:
        raise RefusedError(f"{srpm}: file list does not parse (a file name holds a newline?)")
    files = []
    for row in rows:
        mode_text, size_text, fname = (row.split(" ", 2) + ["", ""])[:3]
        mode, size = to_int(mode_text, 8), to_int(size_text)
        if mode is None or size is None:
            raise BadInputError(f"{srpm}: unexpected file list line {row[:200]!r}")
        files.append(SrpmFile(fname, mode, size))
    return SrpmInfo(srpm, name, version, release, tuple(files))


def check_srpm_files(info: SrpmInfo) -> None:
    """Refuse payload entries that are not plain regular files named without any path."""
    if not info.files:
        raise RefusedError(f"{info.path}: source RPM holds no files")
    for f in info.files:
        if (
            not f.name
            or f.name in (".", "..")
            or not set(f.name) <= _NAME_CHARS
            or f.name.startswith("-")
        ):
            raise RefusedError(f"{info.path}: refusing payload entry {f.name!r}: "
                               "not a plain file name (it would be written outside SOURCES/)")
        if not stat.S_ISREG(f.mode):
            raise RefusedError(f"{info.path}: refusing payload entry {f.name!r}: "
                               f"not a regular file (mode {f.mode:o})")


def _parts(name: str) -> list[str]:
    return [p for p in name.split("/") if p not in ("", ".")]


def check_tarball(
    path: Path, *, max_bytes: int = MAX_TAR_BYTES, max_members: int = MAX_TAR_MEMBERS
) -> list[tarfile.TarInfo]:
    """List a source tarball and refuse anything unsafe before extraction; returns its members.

    Refused (RefusedError naming the member): absolute names, `..` components, duplicate
    names, members reached through a symlink, symlinks whose target (followed through the
    archive's other links) leaves the tree, hard links to anything but an earlier regular
    member, device nodes, fifos and other special files, and archives over the size limits.
    """
    where = Path(path).name
    members: list[tarfile.TarInfo] = []
    total = 0
    try:
        with tarfile.open(path, "r:*") as tar:
            for ti in tar:
                members.append(ti)
                if len(members) > max_members:
                    raise RefusedError(f"{where}: more than {max_members} members")
                if ti.isreg():
                    total += ti.size
                    if total > max_bytes:
                        raise RefusedError(f"{where}: unpacks to more than {max_bytes} bytes")
    except (OSError, tarfile.TarError, EOFError) as exc:
        words = (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(":")
        if words.startswith("file could not be opened"):  # tarfile lists every method tried
            words = "not gzip, bzip2, xz or tar data"
        raise BadInputError(f"{path}: not a readable tar archive ({words})") from None

    def refuse(ti: tarfile.TarInfo, why: str) -> RefusedError:
        return RefusedError(f"{where}: refusing member {ti.name!r}: {why}")

    links: dict[str, str] = {}
    seen: dict[str, tarfile.TarInfo] = {}
    position: dict[str, int] = {}
    for pos, ti in enumerate(members):
        if ti.name.startswith("/"):
            raise refuse(ti, "absolute path")
        parts = _parts(ti.name)
        if not parts:
            if ti.isdir():
                continue  # "./" itself
            raise refuse(ti, "empty name")
        if ".." in parts:
            raise refuse(ti, "'..' in path")
        if "\x00" in ti.name:
            raise refuse(ti, "NUL in name")
        if ti.ischr() or ti.isblk():
            raise refuse(ti, "device node")
        if ti.isfifo():
            raise refuse(ti, "fifo")
        if not (ti.isreg() or ti.isdir() or ti.issym() or ti.islnk()):
            raise refuse(ti, f"special file (type {ti.type!r})")
        key = "/".join(parts)
        if key in seen:
            raise refuse(ti, "duplicate member")
        seen[key] = ti
        position[key] = pos
        if ti.issym():
            links[key] = ti.linkname
    for pos, ti in enumerate(members):
        parts = _parts(ti.name)
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in links:
                raise refuse(ti, f"path goes through symlink {'/'.join(parts[:i])!r}")
        if ti.issym():
            if not ti.linkname or ti.linkname.startswith("/"):
                raise refuse(ti, f"symlink to absolute path {ti.linkname!r}")
            try:
                walk([*parts[:-1], *ti.linkname.split("/")], table_links(links), reroot=False)
            except Escape:
                raise refuse(ti, f"symlink {ti.linkname!r} leads outside the tree") from None
        elif ti.islnk():
            target = _parts(ti.linkname)
            if ti.linkname.startswith("/") or ".." in target or not target:
                raise refuse(ti, f"hard link to {ti.linkname!r} outside the tree")
            other = seen.get("/".join(target))
            if other is None or not other.isreg() or position["/".join(target)] > pos:
                raise refuse(ti, f"hard link to {ti.linkname!r}, not an earlier regular file")
    return members


def _tame(ti: tarfile.TarInfo) -> tarfile.TarInfo:
    """A copy owned by root with no setuid/setgid/sticky or group/other write bits."""
    ti = copy.copy(ti)
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    ti.mode = ti.mode & 0o755 if not ti.isdir() else (ti.mode & 0o755) | 0o700
    return ti


def extract_tarball(host: Host, path: Path, dest: str) -> list[str]:
    """Check then extract a source tarball into host dir `dest` (created); returns names."""
    members = check_tarball(path)
    names = {m.name for m in members}
    host.extract_tar(path, dest, lambda m: _tame(m) if m.name in names else None)
    return sorted(names)


def _fresh_dir(host: Host, logical: str) -> Path:
    """An empty private (0700) directory at `logical`; returns its real path for tools."""
    host.remove_tree(logical)
    return host.makedirs(logical, mode=0o700)


def unpack_srpm(host: Host, srpm: Path, workdir: str | os.PathLike[str], recipe: Recipe,
                version: str) -> Path:
    """Unpack `srpm` under host dir `workdir` and return the prepared tree's real path.

    The SRPM's Name must be the recipe's `srpm_name` and its Version the catalog's `version`.
    The sources go through `rpm -i` into a private top dir (`workdir/rpm`, own rpmdb), the
    recipe's tarball is checked member by member and extracted into `workdir/src`.
    """
    version = check_version(version)
    srpm, work = Path(srpm), os.fspath(workdir).rstrip("/")
    info = inspect_srpm(host, srpm)
    if info.name != recipe.srpm_name:
        raise RefusedError(
            f"{srpm.name}: package name is {info.name!r}, recipe '{recipe.driver}' expects "
            f"{recipe.srpm_name!r}"
        )
    if info.version != version:
        raise RefusedError(
            f"{srpm.name}: package version is {info.version!r}, catalog promised {version!r}"
        )
    check_srpm_files(info)
    pattern = recipe.tarball_glob(version)
    hits = [f.name for f in info.files if fnmatch.fnmatchcase(f.name, pattern)]
    if len(hits) != 1:
        listed = ", ".join(f.name for f in info.files)
        raise NotFoundError(
            f"{srpm.name}: expected one source tarball matching {pattern!r}, found "
            f"{len(hits)} (files: {listed})"
        )
    tarball_name = hits[0]

    host.makedirs(work)
    top = _fresh_dir(host, f"{work}/rpm")
    res = host.run(
        [
            "rpm", "-i", "--nosignature", "--nodeps",
            "--dbpath", str(top / "rpmdb"),
            "--define", f"_topdir {top}",
            str(srpm),
        ],
        timeout=RPM_TIMEOUT,
        cwd=str(top),
    )
    if not res.ok:
        raise HwmgrError(f"{srpm.name}: `rpm -i` of the source RPM failed ({res.describe()})")
    tarball = top / "SOURCES" / tarball_name
    if tarball.is_symlink() or not tarball.is_file():
        raise HwmgrError(f"{srpm.name}: rpm did not unpack {tarball_name} into {top}/SOURCES")

    check_tarball(tarball)  # refuse before the old tree is touched or anything is written
    host.remove_tree(f"{work}/src")
    extract_tarball(host, tarball, f"{work}/src")
    src = host.writable_path(f"{work}/src")
    sub = recipe.source_subdir(version)
    tree = src / sub if sub else src
    real_src = os.path.realpath(src)
    real_tree = os.path.realpath(tree)
    if (
        tree.is_symlink()
        or not tree.is_dir()
        or os.path.commonpath([real_src, real_tree]) != real_src
    ):
        raise NotFoundError(
            f"{tarball_name}: has no source directory {sub!r} (recipe '{recipe.driver}' "
            "source.subdir)"
        )
    return tree
