"""Snapshots: capture → read back gives identical inventory; hostile archives are refused."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from support import run_cli, run_json

from hwmgr.errors import BadInputError, NotFoundError, UsageError
from hwmgr.host.snapshot import open_host


def _data(doc: dict) -> dict:
    assert doc["status"] == "ok", doc
    return doc["data"]


@pytest.mark.parametrize("out", ["snap", "snap.tar.gz"])
def test_capture_and_read_back_is_identical(tmp_path: Path, out: str) -> None:
    target = tmp_path / out
    rc, doc = run_json("snapshot", str(target))
    assert rc == 0, doc
    assert doc["data"]["devices"] > 0 and doc["data"]["files"] > 0
    rc_live, live = run_json("inventory")
    rc_snap, snap = run_json("inventory", "--root", str(target))
    assert rc_live == rc_snap == 0
    assert _data(snap) == _data(live)
    assert _data(snap)["devices"], "the live host has PCI functions"


def test_snapshot_holds_only_what_was_read(tmp_path: Path) -> None:
    target = tmp_path / "snap"
    assert run_cli("snapshot", str(target)).returncode == 0
    meta = json.loads((target / "snapshot.json").read_text())
    assert meta["format"] == "hwmgr-snapshot" and meta["version"] == 1
    assert set(meta) >= {"hostname", "kernel", "captured"}
    tops = {p.name for p in target.iterdir()}
    assert tops <= {"snapshot.json", "sys", "proc", "commands"}, tops
    # every recorded command output file exists and argv[0] is a bare name
    index = json.loads((target / "commands/index.json").read_text())
    for entry in index:
        assert "/" not in entry["argv"][0]
        assert (target / entry["stdout"]).is_file()
    # no config-space dumps or other attributes the tool never reads
    assert not list(target.glob("sys/bus/pci/devices/*/config"))


def test_snapshot_refuses_to_overwrite(tmp_path: Path) -> None:
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap/x").write_text("keep")
    res = run_cli("snapshot", str(tmp_path / "snap"))
    assert res.returncode == 2 and "already exists" in res.stderr
    assert (tmp_path / "snap/x").read_text() == "keep"


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


META = json.dumps({"format": "hwmgr-snapshot", "version": 1, "hostname": "h", "kernel": "k"})


@pytest.mark.parametrize(
    "kind",
    ["dotdot", "absolute", "device", "hardlink"],
)
def test_hostile_tarballs_are_refused(tmp_path: Path, kind: str) -> None:
    members = [_file("snap/snapshot.json", META.encode())]
    if kind == "dotdot":
        members.append(_file("snap/../../evil", b"x"))
    elif kind == "absolute":
        members.append(_file("/tmp/evil", b"x"))
    elif kind == "device":
        dev = tarfile.TarInfo("snap/sda")
        dev.type = tarfile.BLKTYPE
        members.append((dev, None))
    else:
        link = tarfile.TarInfo("snap/passwd")
        link.type = tarfile.LNKTYPE
        link.linkname = "/etc/passwd"
        members.append((link, None))
    bad = _tar(tmp_path / "bad.tar.gz", members)
    res = run_cli("inventory", "--root", str(bad))
    assert res.returncode == 8, res.stderr
    assert "refusing" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "evil").exists()


def test_truncated_tarball_and_missing_meta(tmp_path: Path) -> None:
    good = _tar(tmp_path / "g.tar.gz", [_file("snap/snapshot.json", META.encode())])
    host, cleanup = open_host(good)
    assert host.meta["hostname"] == "h"
    assert cleanup is not None
    cleanup()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[:20])
    with pytest.raises(BadInputError, match="cannot read snapshot archive"):
        open_host(cut)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInputError, match="snapshot.json is missing"):
        open_host(empty)
    with pytest.raises(NotFoundError):
        open_host(tmp_path / "nope")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(UsageError):
        open_host(tmp_path / "file.txt")


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"{truncated", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[]", "expected a JSON object"),
        (b'{"format": "other", "version": 1}', "format is 'other'"),
        (b'{"format": "hwmgr-snapshot", "version": 2}', "version 2 is not supported"),
        (b'{"format": "hwmgr-snapshot", "version": 1, "kernel": 5}', "'kernel' must be"),
    ],
)
def test_bad_snapshot_json(tmp_path: Path, content: bytes, fragment: str) -> None:
    (tmp_path / "snapshot.json").write_bytes(content)
    res = run_cli("inventory", "--root", str(tmp_path))
    assert res.returncode == 8
    assert fragment in res.stderr and "Traceback" not in res.stderr
