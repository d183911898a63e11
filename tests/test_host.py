"""The host seam: path resolution stays inside the root, readers never raise, writes are
confined (to the root, or to the live host's writable dirs) and atomic."""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path

import pytest

from hwmgr.errors import RefusedError
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


# ------------------------------------------------------------------ the write half
def test_rooted_write_through_link_out_of_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / "var/lib").mkdir(parents=True)
    os.symlink(str(outside), root / "var/lib/hwmgr")  # absolute: out of the root
    os.symlink("../../../..", root / "var/lib/up")  # relative, climbing above the root
    os.symlink("../cache", root / "var/lib/inside")  # relative and inside: fine
    h = Host(root, SubprocessRunner())
    for call in (lambda: h.write_bytes("/var/lib/hwmgr/x", b"x"),
                 lambda: h.makedirs("/var/lib/hwmgr/sub"),
                 lambda: h.copy_in(__file__, "/var/lib/hwmgr/copy"),
                 lambda: h.remove_tree("/var/lib/hwmgr/x"),
                 lambda: h.write_bytes("/var/lib/up/escaped", b"x")):
        with pytest.raises(RefusedError, match=r"refusing to write /var/lib/(hwmgr|up)/"):
            call()
    assert list(outside.iterdir()) == [] and not (tmp_path / "escaped").exists()
    with pytest.raises(RefusedError, match="'..' in a host path"):
        h.write_bytes("/var/../../x", b"x")
    h.write_bytes("/var/lib/inside/ok", b"ok")
    assert (root / "var/cache/ok").read_bytes() == b"ok"
    assert h.read_bytes("/var/lib/inside/ok") == b"ok"  # the reader sees the same file


def test_rooted_leaf_link_is_replaced_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("keep")
    root = tmp_path / "root"
    (root / "s").mkdir(parents=True)
    os.symlink(str(secret), root / "s/file")
    h = Host(root, SubprocessRunner())
    h.write_bytes("/s/file", b"new")
    assert secret.read_text() == "keep" and (root / "s/file").read_bytes() == b"new"
    os.symlink(str(tmp_path), root / "s/tree")
    assert h.remove_tree("/s/tree") and tmp_path.is_dir() and secret.exists()


def test_live_writes_only_under_writable_roots(tmp_path: Path) -> None:
    allowed, other = tmp_path / "state", tmp_path / "elsewhere"
    other.mkdir()
    h = Host("/", SubprocessRunner(), writable=[allowed])
    h.write_bytes(f"{allowed}/a/b", b"x")
    assert (allowed / "a/b").read_bytes() == b"x"
    with pytest.raises(RefusedError, match=f"refusing to write {other}/f: outside"):
        h.write_bytes(f"{other}/f", b"x")
    with pytest.raises(RefusedError, match="refusing to write /etc/hwmgr-test-never"):
        h.makedirs("/etc/hwmgr-test-never")
    # a link inside a writable root that points out of it does not widen it
    os.symlink(str(other), allowed / "link")
    with pytest.raises(RefusedError, match="outside"):
        h.write_bytes(f"{allowed}/link/f", b"x")
    assert list(other.iterdir()) == [] and not Path("/etc/hwmgr-test-never").exists()
    plain = Host("/", SubprocessRunner())
    with pytest.raises(RefusedError):
        plain.write_bytes(f"{allowed}/c", b"x")
    plain.allow_writes(allowed)
    plain.write_bytes(f"{allowed}/c", b"x")
    assert "/usr/src" in plain.writable and str(allowed) in plain.writable


def test_atomic_write_leaves_no_partial_file(tmp_path: Path) -> None:
    h = Host(tmp_path, SubprocessRunner())
    h.write_bytes("/d/f", b"old")
    with pytest.raises(RuntimeError), h.open_atomic("/d/f") as fh:
        fh.write(b"half of the new")
        raise RuntimeError("crash mid-write")
    assert (tmp_path / "d/f").read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path / "d")) == ["f"]  # no temp file left behind
    with pytest.raises(OSError):
        h.copy_in(tmp_path / "missing", "/d/g")
    assert sorted(os.listdir(tmp_path / "d")) == ["f"]


def test_trees_replace_resumable_and_extract(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub/a").write_text("a")
    os.symlink("sub/a", src / "link")
    root = tmp_path / "root"
    h = Host(root, SubprocessRunner())
    h.copy_tree(src, "/usr/src/.t.hwmgr-tmp")
    h.replace("/usr/src/.t.hwmgr-tmp", "/usr/src/t")
    assert os.readlink(root / "usr/src/t/link") == "sub/a"  # links copied as links
    assert h.read_text("/usr/src/t/sub/a") == "a"
    fd = h.open_resumable("/c/f.part", 0)
    os.write(fd, b"12345")
    os.close(fd)
    fd = h.open_resumable("/c/f.part", 2)  # resume: keep the first 2 bytes
    os.write(fd, b"x")
    h.replace("/c/f.part", "/c/f", fd=fd)
    os.close(fd)
    assert h.read_bytes("/c/f") == b"12x" and not h.exists("/c/f.part")
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(src / "sub/a", arcname="keep")
        tar.add(src / "sub/a", arcname="skip")
    names = h.extract_tar(archive, "/x", lambda m: m if m.name == "keep" else None)
    assert names == ["keep"] and sorted(os.listdir(root / "x")) == ["keep"]
    work = h.make_temp_dir("/cache/package", prefix="drv-")
    assert work.startswith("/cache/package/drv-") and h.is_dir(work)
    h.chmod("/c/f", 0o600)
    assert (root / "c/f").stat().st_mode & 0o777 == 0o600
    assert h.remove_tree("/usr/src/t") and not h.remove_tree("/usr/src/t")


def test_journal_and_lock_open_inside_the_root(tmp_path: Path) -> None:
    h = Host(tmp_path, SubprocessRunner())
    h.makedirs("/state")
    db = h.journal_connect("/state/journal.sqlite", isolation_level=None)
    db.execute("CREATE TABLE t (x)")
    db.close()
    assert (tmp_path / "state/journal.sqlite").is_file()
    fd = h.open_lock("/state/lock")
    os.close(fd)
    os.symlink("/etc", tmp_path / "state/etc")
    with pytest.raises(RefusedError):
        h.journal_connect("/state/etc/journal.sqlite")


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


@pytest.mark.timeout(20)
def test_a_snapshot_steps_through_links_by_its_listings_and_stays_inside(
        tmp_path: Path) -> None:
    """A static snapshot learns each path step's type from its parent's listing (d_type), not
    an lstat: absolute links are still re-rooted, '..' clamped, loops unknown, FIFOs unread."""
    root = tmp_path / "root"
    h = make_tree(root)
    h.meta = {"hostname": "h"}
    dev = root / "sys/devices/pci0000:00/0000:00:03.0"
    os.mkfifo(dev / "fifo")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/passwd").write_text("outside\n")
    for _ in range(2):  # cold, then from the cached listings
        assert h.read_attr("/sys/bus/pci/devices/abs/vendor") == "0x8086"
        assert h.read_bytes("/sys/bus/pci/devices/0000:00:03.0/vendor") == b"0x8086\n"
        assert h.read_attr("/sys/bus/pci/devices/escape/passwd") is None
        assert h.resolve("/sys/bus/pci/devices/escape") == str(root / "etc")
        assert h.read_attr("/sys/bus/pci/devices/loop1/vendor") is None
        assert h.listdir("/sys/bus/pci/devices/loop1") == []
        assert h.read_bytes("/sys/bus/pci/devices/abs/fifo") is None
        assert h.read_attrs("/sys/bus/pci/devices/abs", ["fifo", "vendor"]) == {
            "fifo": None, "vendor": "0x8086"}


def test_a_snapshot_lists_each_directory_once(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The inventory of a snapshot lists every directory it touches once: the listing serves
    listdir, the reads in the directory and the path steps through it."""
    from test_inventory import synth_module

    from hwmgr.host.snapshot import open_host
    from hwmgr.inventory.scan import Inventory

    synth_module().build(tmp_path / "t", 2, 3)
    host, _ = open_host(str(tmp_path / "t"))
    listed: list[str] = []
    real_scandir = os.scandir

    def counting(path: str) -> object:
        listed.append(str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", counting)
    scan = Inventory(host).scan()
    assert len(scan.devices) == 8 and all(d["vendor_id"] == "8086" for d in scan.devices)
    assert len(listed) == len(set(listed)), sorted(p for p in listed if listed.count(p) > 1)
    assert any(p.endswith("/sys/class/net") for p in listed)  # one listing, not an lstat each
