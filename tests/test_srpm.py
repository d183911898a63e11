"""Tests for hwmgr.lifecycle.builds.srpm with real rpmbuild-made SRPMs, including hostile ones."""

from __future__ import annotations

import dataclasses
import io
import os
import tarfile
from pathlib import Path

import pytest
from support import srpmfactory as factory

from hwmgr.errors import BadInputError, NotFoundError, RefusedError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.recipe import load_recipe
from hwmgr.lifecycle.builds.srpm import check_tarball, extract_tarball, inspect_srpm, unpack_srpm

V = factory.BE2NET_VERSION

pytestmark = pytest.mark.skipif(
    SubprocessRunner().run(["rpmbuild", "--version"]).rc != 0, reason="rpmbuild not installed"
)
pytestmark = [pytestmark, pytest.mark.slow]  # rpmbuild runs


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Host:
    """This machine, allowed to write only the tests' temp dirs (the work dirs live there)."""
    return Host("/", SubprocessRunner(), writable=[tmp_path_factory.getbasetemp()])


@pytest.fixture(scope="module")
def be2net_srpm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return factory.build_be2net_srpm(tmp_path_factory.mktemp("srpm"))


def _evil_leftovers() -> list[str]:
    return sorted(n for n in os.listdir("/tmp") if n.startswith("hwmgr-evil"))


def test_inspect_reads_header(host: Host, be2net_srpm: Path) -> None:
    info = inspect_srpm(host, be2net_srpm)
    assert (info.name, info.version, info.release) == ("be2net", V, "1")
    assert sorted(f.name for f in info.files) == ["be2net-10.2.470.14.tar.gz", "be2net.spec"]
    tarball = next(f for f in info.files if f.name.endswith(".tar.gz"))
    assert tarball.size > 500
    assert oct(tarball.mode).endswith("100644")


def test_unpack_vendor_shaped_srpm(host: Host, be2net_srpm: Path, tmp_path: Path) -> None:
    tree = unpack_srpm(host, be2net_srpm, tmp_path / "work", load_recipe("be2net"), V)
    assert tree == tmp_path / "work" / "src" / "be2net-10.2.470.14"
    assert sorted(p.name for p in tree.iterdir()) == ["Makefile", "be2net.c", "version.h"]
    assert '#define HWMGRTEST_VERSION "10.2.470.14"' in (tree / "version.h").read_text()
    assert "obj-m := be2net.o" in (tree / "Makefile").read_text()
    # rpm -i put the sources in the private top dir, and nowhere else
    sources = tmp_path / "work" / "rpm" / "SOURCES"
    assert sorted(os.listdir(sources)) == ["be2net-10.2.470.14.tar.gz"]
    assert sorted(os.listdir(tmp_path / "work" / "rpm")) == ["SOURCES", "SPECS"]
    # unpacking again replaces the previous tree
    (tree / "stale").write_text("x")
    tree2 = unpack_srpm(host, be2net_srpm, tmp_path / "work", load_recipe("be2net"), V)
    assert tree2 == tree and not (tree / "stale").exists()


def test_name_and_version_must_match_catalog(
    host: Host, be2net_srpm: Path, tmp_path: Path
) -> None:
    with pytest.raises(RefusedError, match="package version is '10.2.470.14', catalog promised "
                                           "'10.2.470.15'"):
        unpack_srpm(host, be2net_srpm, tmp_path, load_recipe("be2net"), "10.2.470.15")
    with pytest.raises(RefusedError, match="package name is 'be2net', recipe 'hwmgrtest' "
                                           "expects 'hwmgrtest'"):
        unpack_srpm(host, be2net_srpm, tmp_path, load_recipe("hwmgrtest"), V)
    assert not (tmp_path / "rpm").exists()


def test_missing_tarball_and_subdir(host: Host, be2net_srpm: Path, tmp_path: Path) -> None:
    r = load_recipe("be2net")
    with pytest.raises(NotFoundError, match=r"one source tarball matching 'be2net-10.2.470.14"
                                            r".tar.bz2', found 0 \(files: be2net-"):
        unpack_srpm(host, be2net_srpm, tmp_path, dataclasses.replace(
            r, tarball="be2net-{version}.tar.bz2"), V)
    with pytest.raises(NotFoundError, match="has no source directory 'be2net-src'"):
        unpack_srpm(host, be2net_srpm, tmp_path, dataclasses.replace(r, subdir="be2net-src"), V)


def test_not_an_srpm(host: Host, tmp_path: Path) -> None:
    r = load_recipe("be2net")
    with pytest.raises(NotFoundError, match="does not exist"):
        unpack_srpm(host, tmp_path / "nope.src.rpm", tmp_path / "w", r, V)
    junk = tmp_path / "junk.src.rpm"
    junk.write_bytes(b"this is not an rpm\n" * 10)
    with pytest.raises((RefusedError, BadInputError), match="junk.src.rpm"):
        unpack_srpm(host, junk, tmp_path / "w", r, V)
    binary = factory.build_binary_rpm(tmp_path)
    with pytest.raises(RefusedError, match="is a binary RPM, not a source RPM"):
        inspect_srpm(host, binary)


def test_corrupt_srpm_refused(host: Host, be2net_srpm: Path, tmp_path: Path) -> None:
    blob = bytearray(be2net_srpm.read_bytes())
    blob[-100] ^= 0xFF  # inside the compressed payload
    bad = tmp_path / be2net_srpm.name
    bad.write_bytes(bytes(blob))
    with pytest.raises(RefusedError, match="digest check failed"):
        unpack_srpm(host, bad, tmp_path / "w", load_recipe("be2net"), V)
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("kind", factory.EVIL_KINDS)
def test_hostile_tarball_refused_before_extraction(host: Host, tmp_path: Path, kind: str) -> None:
    before = _evil_leftovers()
    top = f"be2net-{V}"
    srpm = factory.build_srpm(
        "be2net", V, tmp_path / "in", extra_members=factory.evil_members(kind, top)
    )
    work = tmp_path / "work"
    with pytest.raises(RefusedError) as exc:
        unpack_srpm(host, srpm, work, load_recipe("be2net"), V)
    msg = str(exc.value)
    bad_name = factory.evil_members(kind, top)[-1][0].name
    assert msg.startswith("be2net-10.2.470.14.tar.gz: refusing member ")
    assert repr(bad_name) in msg or repr(factory.evil_members(kind, top)[0][0].name) in msg
    assert not (work / "src").exists(), "nothing may be extracted"
    assert _evil_leftovers() == before


def test_payload_with_dotdot_name_refused(host: Host, tmp_path: Path) -> None:
    """A digest-consistent SRPM whose payload names '../x.tar.gz' is refused before rpm -i."""
    srpm = factory.build_srpm_with_payload_name("be2net", V, tmp_path / "in")
    check = host.run(["rpm", "-K", "--nosignature", str(srpm)])
    assert check.ok and "digests OK" in check.stdout  # digests alone would not catch it
    work = tmp_path / "work"
    with pytest.raises(RefusedError, match=r"refusing payload entry '\.\./x\.tar\.gz'"):
        unpack_srpm(host, srpm, work, load_recipe("be2net"), V)
    assert not work.exists()


def test_rpm_itself_writes_dotdot_payload_outside_sourcedir(host: Host, tmp_path: Path) -> None:
    """Why the file-list check exists: rpm 4.18 `rpm -i` of that SRPM escapes SOURCES/."""
    srpm = factory.build_srpm_with_payload_name("be2net", V, tmp_path / "in")
    top = tmp_path / "top"
    top.mkdir()
    res = host.run(["rpm", "-i", "--nosignature", "--dbpath", str(tmp_path / "db"),
                    "--define", f"_topdir {top}", str(srpm)])
    assert res.ok, res.describe()
    assert (top / "x.tar.gz").is_file()  # one level above SOURCES/
    assert not (top / "SOURCES" / "x.tar.gz").exists()


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for ti, data in members:
            if data is not None:
                ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data) if data is not None else None)
    return path


def _ti(name: str, kind: bytes = tarfile.REGTYPE, **kw: object) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


def test_inner_links_allowed_and_modes_tamed(host: Host, tmp_path: Path) -> None:
    tb = _tar(tmp_path / "ok.tar.gz", [
        (_ti("./t", tarfile.DIRTYPE, mode=0o755), None),
        (_ti("./t/Makefile", mode=0o4775, uid=1234, gid=1234), b"all:\n"),
        (_ti("./t/sub", tarfile.DIRTYPE, mode=0o777), None),
        (_ti("./t/sub/link", tarfile.SYMTYPE, linkname="../Makefile"), None),
        (_ti("./t/hard", tarfile.LNKTYPE, linkname="./t/Makefile", mode=0o4775), None),
    ])
    assert len(check_tarball(tb)) == 5
    dest = tmp_path / "out"
    extract_tarball(host, tb, str(dest))
    mk = dest / "t" / "Makefile"
    st = mk.stat()
    assert st.st_mode & 0o7777 == 0o755  # setuid and group write dropped
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (0, 0)
    assert (dest / "t" / "sub" / "link").read_text() == "all:\n"
    assert os.readlink(dest / "t" / "sub" / "link") == "../Makefile"
    assert (dest / "t" / "sub").stat().st_mode & 0o777 == 0o755
    assert (dest / "t" / "hard").read_text() == "all:\n"


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([(_ti("a"), b"1"), (_ti("a"), b"2")], "duplicate member"),
        ([(_ti("late", tarfile.LNKTYPE, linkname="a"), None), (_ti("a"), b"1")],
         "not an earlier regular file"),
        ([(_ti("d", tarfile.DIRTYPE), None), (_ti("h", tarfile.LNKTYPE, linkname="d"), None)],
         "not an earlier regular file"),
        ([(_ti("a/../../b"), b"1")], "'..' in path"),
        ([(_ti("l", tarfile.SYMTYPE, linkname="l2"), None),
          (_ti("l2", tarfile.SYMTYPE, linkname="l"), None)], "leads outside the tree"),
    ],
)
def test_check_tarball_edge_cases(
    tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], message: str
) -> None:
    tb = _tar(tmp_path / "t.tar.gz", members)
    with pytest.raises(RefusedError, match=message):
        check_tarball(tb)


def test_check_tarball_limits_and_garbage(tmp_path: Path) -> None:
    tb = _tar(tmp_path / "big.tar.gz", [(_ti(f"f{i}"), b"x" * 100) for i in range(5)])
    with pytest.raises(RefusedError, match="unpacks to more than 300 bytes"):
        check_tarball(tb, max_bytes=300)
    with pytest.raises(RefusedError, match="more than 3 members"):
        check_tarball(tb, max_members=3)
    assert len(check_tarball(tb)) == 5
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b" + b"garbage" * 20)
    with pytest.raises(BadInputError, match="not a readable tar archive"):
        check_tarball(junk)
