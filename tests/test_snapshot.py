"""Snapshots: capture → read back gives identical inventory; hostile archives are refused."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from support import run_cli, run_json

from hwmgr import capture
from hwmgr.errors import BadInputError, NotFoundError, UsageError
from hwmgr.host import Host
from hwmgr.runner import SubprocessRunner
from hwmgr.snapshot import open_host


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
    assert tops <= {"snapshot.json", "sys", "proc", "commands", "lib", "boot"}, tops
    # every recorded command output file exists and argv[0] is a bare name
    index = json.loads((target / "commands/index.json").read_text())
    for entry in index:
        assert "/" not in entry["argv"][0]
        refs = [entry[k] for k in ("stdout", "stderr") if k in entry]
        assert refs or entry["rc"] != 0  # a failed query may print nothing at all
        assert all((target / ref).is_file() for ref in refs)
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


# ------------------------------------------------------------- what plan/verify/check read
def test_capture_records_what_plan_verify_and_check_read(tmp_path: Path) -> None:
    """On this machine: modinfo -k per bound driver and target kernel, every ethtool query
    per interface, ip -d link, the net sysctls as files, routes, headers, Secure Boot."""
    target = tmp_path / "snap"
    assert run_cli("snapshot", str(target)).returncode == 0
    meta = json.loads((target / "snapshot.json").read_text())
    assert meta["records"] == sorted(capture.RECORDS)
    assert meta["hwmgr"] == capture.CAPTURE_SINCE
    index = {tuple(e["argv"]): e for e in json.loads((target / "commands/index.json").read_text())}
    live = Host("/", SubprocessRunner())
    kernels = capture.target_kernels(live)
    rc, inv = run_json("inventory", "--no-catalog")
    assert rc == 0
    drivers = {d[k] for d in inv["data"]["devices"] for k in ("driver", "pci_driver") if d[k]}
    assert drivers and kernels
    for k in kernels:
        for m in drivers:
            entry = index[("modinfo", "-k", k, m)]
            real = live.run(["modinfo", "-k", k, m])
            assert entry["rc"] == real.rc
            if real.stdout:
                assert (target / entry["stdout"]).read_text() == real.stdout
    ifaces = [n for n in live.listdir("/sys/class/net") if n != "lo"]
    assert ifaces
    for ifname in ifaces:
        for q in capture.ETHTOOL_QUERIES:
            assert ("ethtool", *q, ifname) in index, (q, ifname)
    link = index[capture.IP_LINK_ARGV]
    assert link["rc"] == 0 and "link/" in (target / link["stdout"]).read_text()
    for name in capture.NET_SYSCTLS:
        path = capture.sysctl_path(name)
        real = live.read_bytes(path)
        if real is not None:  # the live kernel has it: the snapshot holds the same bytes
            assert (target / path.lstrip("/")).read_bytes() == real, name
    assert (target / "proc/sys/net/ipv4/tcp_rmem").is_file()
    assert (target / "proc/net/route").read_bytes() == Path("/proc/net/route").read_bytes()
    for k in capture.target_kernels(live):
        if Path(f"/lib/modules/{k}/build/Makefile").exists():
            assert (target / f"lib/modules/{k}/build/Makefile").is_file()


def test_plan_reads_a_fresh_snapshot_like_the_live_host(tmp_path: Path) -> None:
    """Replaying a capture: the module each target kernel resolves to, routes and Secure
    Boot read the same as on the live host, and nothing reads as "not recorded"."""
    from hwmgr import kmod, safety

    target = tmp_path / "snap.tar.gz"
    assert run_cli("snapshot", str(target)).returncode == 0
    snap, cleanup = open_host(target)
    assert cleanup is not None
    try:
        live = Host("/", SubprocessRunner())
        assert not capture.lacks(snap, capture.ROUTES) and capture.lacks(snap, "no-such")
        assert not capture.lacks(live, "no-such")
        assert capture.target_kernels(snap) == capture.target_kernels(live)
        for k in capture.target_kernels(live):
            for m in capture.bound_modules(collect_devices(live)):
                assert kmod.resolve(snap, m, k).version == kmod.resolve(live, m, k).version
        assert safety.default_route_interfaces(snap) == safety.default_route_interfaces(live)
        assert safety.secure_boot(snap) == safety.secure_boot(live)
        missing = snap.run(["modinfo", "-k", "0.0.0-none", "nosuchmod"])
        assert missing.rc == 127 and missing.unrecorded and not missing.available
        absent = live.run(["hwmgr-no-such-binary"])
        assert absent.rc == 127 and not absent.unrecorded
    finally:
        cleanup()


def collect_devices(host: Host) -> list[dict]:
    from hwmgr.inventory import Inventory

    return Inventory(host).scan().devices
