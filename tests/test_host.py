"""The host seam: path resolution stays inside the root, readers never raise."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host


def make_tree(root: Path) -> Host:
    (root / "sys/devices/pci0000:00/0000:00:03.0").mkdir(parents=True)
    dev = root / "sys/devices/pci0000:00/0000:00:03.0"
    (dev / "vendor").write_text("0x8086\n")
    (dev / "junk").write_bytes(b"\xff\xfe\x00bad\n")
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    # relative link, as the kernel makes it
    devs = root / "sys/bus/pci/devices"
    os.symlink("../../../devices/pci0000:00/0000:00:03.0", devs / "0000:00:03.0")
    # absolute link: must be re-rooted, not read from the analysing machine
    os.symlink("/sys/devices/pci0000:00/0000:00:03.0", root / "sys/bus/pci/devices/abs")
    os.symlink("../../../../../../../../etc", root / "sys/bus/pci/devices/escape")
    os.symlink("loop2", root / "sys/bus/pci/devices/loop1")
    os.symlink("loop1", root / "sys/bus/pci/devices/loop2")
    os.symlink("../../../bus/pci/drivers/e1000e", dev / "driver")
    return Host(root, SubprocessRunner())


def test_reads_through_relative_and_absolute_links(tmp_path: Path) -> None:
    h = make_tree(tmp_path)
    assert h.read_attr("/sys/bus/pci/devices/0000:00:03.0/vendor") == "0x8086"
    assert h.read_attr("/sys/bus/pci/devices/abs/vendor") == "0x8086"
    assert h.listdir("/sys/bus/pci/devices") == sorted(
        ["0000:00:03.0", "abs", "escape", "loop1", "loop2"]
    )


def test_escape_is_confined_to_root(tmp_path: Path) -> None:
    h = make_tree(tmp_path)
    # '..' cannot climb above the root, so this resolves to <root>/etc, which does not exist
    assert h.read_attr("/sys/bus/pci/devices/escape/passwd") is None
    assert h.resolve("/sys/bus/pci/devices/escape") == str(tmp_path / "etc")
    assert h.read_attr("/../../etc/passwd") is None
    assert h.listdir("/..") == h.listdir("/")


def test_loops_and_dangling_links_are_unknown(tmp_path: Path) -> None:
    h = make_tree(tmp_path)
    assert h.read_attr("/sys/bus/pci/devices/loop1/vendor") is None
    assert h.listdir("/sys/bus/pci/devices/loop1") == []
    assert h.read_attr("/sys/bus/pci/devices/0000:00:03.0/driver/module") is None
    assert h.readlink("/sys/bus/pci/devices/0000:00:03.0/driver") == (
        "../../../bus/pci/drivers/e1000e"
    )
    assert h.readlink("/sys/bus/pci/devices/0000:00:03.0/vendor") is None


def test_garbled_and_missing_values(tmp_path: Path) -> None:
    h = make_tree(tmp_path)
    assert h.read_attr("/sys/bus/pci/devices/0000:00:03.0/missing") is None
    assert h.read_attr("/sys/bus/pci/devices/0000:00:03.0") is None  # a directory
    junk = h.read_attr("/sys/bus/pci/devices/0000:00:03.0/junk")
    assert junk is not None and "bad" in junk and "\x00" not in junk
    assert h.listdir("/nope") == []
    assert not h.exists("/nope")


def test_leaf_symlink_leaving_root_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("secret")
    root = tmp_path / "root"
    (root / "sys").mkdir(parents=True)
    os.symlink(str(secret), root / "sys/vendor")  # absolute: re-rooted → missing
    h = Host(root, SubprocessRunner())
    assert h.read_attr("/sys/vendor") is None


def test_live_host_reads_real_files() -> None:
    h = Host("/", SubprocessRunner())
    assert h.live
    assert h.read_attr("/proc/sys/kernel/osrelease") == os.uname().release


def test_write_bytes_is_atomic_and_recorded_reads(tmp_path: Path) -> None:
    h = Host(tmp_path, SubprocessRunner())
    h.write_bytes("/var/lib/hwmgr/x", b"one")
    h.write_bytes("/var/lib/hwmgr/x", b"two")
    assert (tmp_path / "var/lib/hwmgr/x").read_bytes() == b"two"
    assert [p.name for p in (tmp_path / "var/lib/hwmgr").iterdir()] == ["x"]
    h.copy_file("/var/lib/hwmgr/x", "/var/lib/hwmgr/y")
    assert h.read_bytes("/var/lib/hwmgr/y") == b"two"
    assert h.remove("/var/lib/hwmgr/y") and not h.remove("/var/lib/hwmgr/y")
    assert h.free_bytes("/var/lib/hwmgr/nonexistent/deeper") > 0


@pytest.mark.timeout(20)
@pytest.mark.parametrize("snapshot", [False, True])
def test_fifos_read_as_unknown_without_blocking(tmp_path: Path, snapshot: bool) -> None:
    h = make_tree(tmp_path)
    h.meta = {"hostname": "h"} if snapshot else {}  # a snapshot host caches entry types
    dev = tmp_path / "sys/devices/pci0000:00/0000:00:03.0"
    os.mkfifo(dev / "device")
    os.symlink("device", dev / "via_link")
    h.listdir("/sys/devices/pci0000:00/0000:00:03.0")
    for leaf in ("device", "via_link"):
        for parent in ("/sys/bus/pci/devices/0000:00:03.0", "/sys/devices/pci0000:00/0000:00:03.0"):
            for _ in range(2):  # the second read takes read_attr's cached fast path
                assert h.read_attr(f"{parent}/{leaf}") is None
                assert h.read_bytes(f"{parent}/{leaf}") is None
    assert h.read_attr("/sys/devices/pci0000:00/0000:00:03.0/vendor") == "0x8086"
    live = Host("/", SubprocessRunner())
    assert live.read_bytes(str(dev / "device")) is None
    assert live.read_attr(str(dev / "device")) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
@pytest.mark.parametrize("snapshot", [False, True])
def test_device_nodes_in_a_snapshot_are_never_opened(tmp_path: Path, snapshot: bool) -> None:
    """A char device (here 1:5, like /dev/zero) would read as 1 MiB of zeros if opened."""
    h = make_tree(tmp_path)
    h.meta = {"hostname": "h"} if snapshot else {}
    dev = tmp_path / "sys/devices/pci0000:00/0000:00:03.0"
    os.mknod(dev / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    for _ in range(2):
        assert h.read_bytes("/sys/devices/pci0000:00/0000:00:03.0/zero") is None
        assert h.read_attr("/sys/devices/pci0000:00/0000:00:03.0/zero") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
@pytest.mark.parametrize("mode", ["tree", "snapshot", "live"])
def test_read_attrs_answers_like_read_attr(tmp_path: Path, mode: str) -> None:
    """The one-pass reader gives read_attr's answers for files, links (inside and leaving the
    root), FIFOs, devices and missing names, on a fake tree, a snapshot and the live root."""
    h = make_tree(tmp_path)
    dev = tmp_path / "sys/devices/pci0000:00/0000:00:03.0"
    os.mkfifo(dev / "fifo")
    os.mknod(dev / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    os.symlink("vendor", dev / "alias")
    os.symlink("/etc/hostname", dev / "abs_escape")
    os.symlink("../../../../../../etc/hostname", dev / "rel_escape")
    (dev / "big").write_bytes(b"x" * 5000 + b"\n")
    (dev / "empty").write_bytes(b"\x00\n")
    names = ["vendor", "junk", "fifo", "zero", "alias", "abs_escape", "rel_escape", "big",
             "empty", "missing", "driver", "..", ""]
    if mode == "live":
        h = Host("/", SubprocessRunner())
        base = str(dev)
    else:
        h.meta = {"hostname": "h"} if mode == "snapshot" else {}
        base = "/sys/bus/pci/devices/0000:00:03.0"
    h.listdir(base)
    for _ in range(2):  # cold, then with the directory's entry types cached
        got = h.read_attrs(base, names)
        assert got == {n: h.read_attr(f"{base}/{n}") for n in names}
    assert got["vendor"] == got["alias"] == "0x8086" and got["big"] == "x" * 5000
    assert got["fifo"] is None and got["zero"] is None and got["empty"] is None
    if mode != "live":
        assert got["abs_escape"] is None and got["rel_escape"] is None  # not this machine's
    assert h.read_attrs("/no/such/dir", ["vendor"]) == {"vendor": None}
