"""hwmgr.host.archive: the stream and member limits hold whatever the tar headers claim."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest

from hwmgr.errors import BadInputError
from hwmgr.host import archive


def _tarball(path: Path, files: dict[str, bytes], *, pax: dict[str, str] | None = None,
             compress: bool = True) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if pax:
                info.pax_headers = dict(pax)
            tf.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buf.getvalue()) if compress else buf.getvalue())
    return path


def test_a_good_archive_extracts_with_safe_modes(tmp_path: Path) -> None:
    arc = _tarball(tmp_path / "ok.tar.gz", {"snap/a/b": b"hello", "./snap/c": b""})
    dest = tmp_path / "out"
    dest.mkdir()
    archive.extract(arc, dest)
    assert (dest / "snap/a/b").read_bytes() == b"hello"
    assert (dest / "snap/c").read_bytes() == b""
    assert (dest / "snap/a/b").stat().st_mode & 0o7777 == 0o644


def test_a_gzip_bomb_stops_at_the_stream_budget(tmp_path: Path, monkeypatch) -> None:
    """Many small members: every header is honest, the total is what gets bounded."""
    monkeypatch.setattr(archive, "MAX_BYTES", 1 << 20)
    files = {f"snap/f{i}": bytes(4096) for i in range(600)}  # ~2.7 MiB of tar stream
    arc = _tarball(tmp_path / "bomb.tar.gz", files)
    assert arc.stat().st_size < 100_000  # it really is a (small) bomb
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(BadInputError, match=r"bomb\.tar\.gz: .*more than 1 MiB"):
        archive.extract(arc, dest)


def test_one_member_larger_than_the_budget_is_refused_by_name(tmp_path: Path,
                                                              monkeypatch) -> None:
    monkeypatch.setattr(archive, "MAX_BYTES", 1 << 20)
    arc = _tarball(tmp_path / "big.tar.gz", {"snap/huge": bytes(2 << 20)})
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(BadInputError, match="member 'snap/huge' would take the snapshot past"):
        archive.extract(arc, dest)


def test_a_huge_pax_header_is_not_read_into_memory(tmp_path: Path) -> None:
    arc = _tarball(tmp_path / "pax.tar.gz", {"snap/x": b"1"},
                   pax={"comment": "x" * (archive.MAX_READ + 1)})
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(BadInputError, match="archive has a header larger than"):
        archive.extract(arc, dest)


def test_too_many_members(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(archive, "MAX_MEMBERS", 5)
    arc = _tarball(tmp_path / "many.tar", {f"snap/{i}": b"" for i in range(10)},
                   compress=False)
    dest = tmp_path / "out"
    dest.mkdir()
    # the directory snap/ counts too: snap, snap/0..3 are five entries
    with pytest.raises(BadInputError, match="member 'snap/4' is past the limit of 5 entries"):
        archive.extract(arc, dest)


def test_members_each_in_their_own_directory_count_their_directories(
        tmp_path: Path, monkeypatch) -> None:
    """200,001 members each in its own directory were 400,002 inodes: the bound is on what
    gets created, so such an archive stops at MAX_MEMBERS entries."""
    monkeypatch.setattr(archive, "MAX_MEMBERS", 100)
    arc = _tarball(tmp_path / "dirs.tar", {f"d{i}/f": b"" for i in range(80)}, compress=False)
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(BadInputError, match="member 'd50/f' is past the limit of 100 entries"):
        archive.extract(arc, dest)
    assert sum(1 for _ in dest.rglob("*")) == 100


def test_corrupt_compressed_data_is_damage(tmp_path: Path) -> None:
    arc = _tarball(tmp_path / "t.tar.gz", {"snap/x": os.urandom(3000), "snap/y": b"1"})
    data = bytearray(arc.read_bytes())
    data[40:60] = b"\xff" * 20  # inside the deflate stream
    arc.write_bytes(bytes(data))
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(BadInputError, match="cannot read snapshot archive: damaged"):
        archive.extract(arc, dest)


def test_a_link_already_in_the_destination_is_not_followed(tmp_path: Path) -> None:
    """The mechanism holds even for links the archive did not make."""
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "out"
    dest.mkdir()
    os.symlink(outside, dest / "snap")
    arc = _tarball(tmp_path / "x.tar.gz", {"snap/x": b"1"})
    with pytest.raises(BadInputError, match="through the symlink 'snap'"):
        archive.extract(arc, dest)
    assert list(outside.iterdir()) == []
