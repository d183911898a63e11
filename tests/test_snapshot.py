"""Snapshots: capture → read back gives identical inventory; hostile archives are refused."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from support import run_cli, run_json

from hwmgr.config import config_from
from hwmgr.errors import BadInputError, NotFoundError, UsageError
from hwmgr.host import capture
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.host.snapshot import open_host
from hwmgr.lifecycle import bundle


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
    assert tops <= {"snapshot.json", "sys", "proc", "commands", "lib", "boot", "var"}, tops
    # which kernel build the host runs (a Debian package, an Ubuntu base), for the verdicts
    assert (target / "proc" / "version").read_bytes() == Path("/proc/version").read_bytes()
    # var/: only the state dir's journal, check history and armed expectations
    state = Path(config_from(None).state_dir)
    for f in (p for p in target.joinpath("var").rglob("*") if p.is_file()):
        rel = Path("/", f.relative_to(target)).relative_to(state)
        assert str(rel) in ("journal.sqlite", "checks.sqlite") or (
            rel.parent.name == "expectations" and rel.suffix == ".json"), rel
    # every recorded command output file exists and argv[0] is a bare name
    index = json.loads((target / "commands/index.json").read_text())
    for entry in index:
        assert "/" not in entry["argv"][0]
        refs = [entry[k] for k in ("stdout", "stderr") if k in entry]
        assert refs or entry["rc"] != 0  # a failed query may print nothing at all
        assert all((target / ref).is_file() for ref in refs)
    # no config-space dumps or other attributes the tool never reads
    assert not list(target.glob("sys/bus/pci/devices/*/config"))
    # each function's uevent (what inventory reads) and the files it stands in for (what
    # hwmgr releases before it read)
    funcs = list(target.glob("sys/bus/pci/devices/*"))
    assert funcs
    for f in funcs:
        if Path("/sys/bus/pci/devices", f.name, "uevent").is_file():
            assert (f / "uevent").read_text().startswith(("DRIVER=", "PCI_CLASS="))
        assert (f / "vendor").is_file() and (f / "class").is_file()


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


# ------------------------------------------------------------------ hostile archives, end to end
def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def _special(name: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 5
    return info, None


def _dir(name: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info, None


def _refused(res, archive: Path, member: str) -> str:
    """Exit 8 and one short stderr line naming the archive and the member."""
    assert res.returncode == 8, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    shown = f"'{member}'" if len(member) < 120 else f"'{member[:100]}"  # long names are cut
    assert str(archive) in lines[0] and shown in lines[0], lines[0]
    assert len(lines[0]) < 400, "one short line"
    assert "Traceback" not in res.stderr
    return lines[0]


@pytest.mark.parametrize("verb", ["inventory", "history", "verify"])
@pytest.mark.parametrize("target", ["absolute", "relative"])
def test_symlink_then_write_through_it_never_leaves_the_scratch_dir(
        tmp_path: Path, verb: str, target: str) -> None:
    """`snap/esc` -> a directory outside, then `snap/esc/FILE`: refused, nothing written."""
    scratch, canary = tmp_path / "scratch", tmp_path / "canary"
    scratch.mkdir()
    canary.mkdir()
    # extraction happens in $TMPDIR/hwmgr-snap-XXXX/; ../../../canary climbs from snap/ to it
    link = str(canary) if target == "absolute" else "../../../canary"
    bad = _tar(tmp_path / "esc.tar.gz", [
        _file("snap/snapshot.json", META.encode()),
        _link("snap/esc", link),
        _file("snap/esc/FILE", b"pwned"),
    ])
    res = run_cli(verb, "--root", str(bad), env={"TMPDIR": str(scratch)})
    line = _refused(res, bad, "snap/esc/FILE")
    assert "symlink" in line
    assert list(canary.iterdir()) == []
    assert list(scratch.iterdir()) == [], "the partial extraction is cleaned up"


@pytest.mark.parametrize("kind, member, fragment", [
    ("duplicate", "snap/a", "twice"),
    ("dir-then-symlink", "snap/d", "twice"),
    ("file-then-dir-under-it", "snap/f/x", "not a directory"),
    ("hardlink", "snap/passwd", "hard link"),
    ("chardev", "snap/zero", "device node"),
    ("blockdev", "snap/sda", "device node"),
    ("fifo", "snap/pipe", "FIFO"),
    ("dotdot", "snap/../../evil", "'..'"),
    ("absolute", "/tmp/evil", "absolute"),
    ("deep", "snap/" + "d/" * 200 + "x", "deep"),
])
def test_hostile_members_are_refused_naming_the_member(
        tmp_path: Path, kind: str, member: str, fragment: str) -> None:
    canary = tmp_path / "canary"
    canary.mkdir()
    members = [_file("snap/snapshot.json", META.encode())]
    if kind == "duplicate":
        members += [_file("snap/a", b"1"), _file("snap/a", b"2")]
    elif kind == "dir-then-symlink":
        members += [_dir("snap/d"), _file("snap/d/x", b"1"), _link("snap/d", str(canary))]
    elif kind == "file-then-dir-under-it":
        members += [_file("snap/f", b"1"), _file("snap/f/x", b"2")]
    elif kind == "hardlink":
        members.append(_link("snap/passwd", "/etc/passwd", tarfile.LNKTYPE))
    elif kind in ("chardev", "blockdev", "fifo"):
        members.append(_special(member, {"chardev": tarfile.CHRTYPE, "blockdev": tarfile.BLKTYPE,
                                         "fifo": tarfile.FIFOTYPE}[kind]))
    else:
        members.append(_file(member, b"x"))
    bad = _tar(tmp_path / "bad.tar.gz", members)
    line = _refused(run_cli("inventory", "--root", str(bad)), bad, member)
    assert fragment in line and "refusing" in line
    assert list(canary.iterdir()) == [] and not (tmp_path / "evil").exists()


def test_truncated_archives_are_one_line_not_tarfile_text(tmp_path: Path) -> None:
    body = b"x" * 5000
    members = [_file("snap/snapshot.json", META.encode()), _file("snap/big", body),
               _file("snap/last", b"1")]
    good = _tar(tmp_path / "good.tar", members)
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data))
    raw = plain.getvalue()
    cuts = {
        "mid-data.tar": raw[:512 * 3 + 1000],  # inside snap/big's data
        "at-header.tar": raw[:512 * 3 + 5120],  # right before snap/last's header: no end block
        "mid-header.tar": raw[:512 * 3 + 5120 + 100],
    }
    import gzip
    cuts["gzip-cut.tar.gz"] = gzip.compress(raw)[:-30]
    for name, data in cuts.items():
        path = tmp_path / name
        path.write_bytes(data)
        res = run_cli("inventory", "--root", str(path))
        assert res.returncode == 8, (name, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "damaged or truncated" in lines[0], (name, res.stderr)
        assert "end of data" not in lines[0] and "truncated header" not in lines[0], lines[0]
    assert good.stat().st_size > 0


@pytest.mark.timeout(20)
def test_a_fifo_named_like_an_archive_does_not_block(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "snap.tar.gz"
    os.mkfifo(fifo)
    res = run_cli("inventory", "--root", str(fifo), timeout=15)
    assert res.returncode == 8 and "not a regular file" in res.stderr, res.stderr


def test_directory_snapshot_never_follows_a_link_out_of_its_root(tmp_path: Path) -> None:
    """snapshot.json linked to a valid one outside the root is not read (links re-root)."""
    import os

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "snapshot.json").write_text(META)
    root = tmp_path / "root"
    root.mkdir()
    for i, target in enumerate([str(outside / "snapshot.json"), "../outside/snapshot.json"]):
        snap = root / f"s{i}"
        snap.mkdir()
        os.symlink(target, snap / "snapshot.json")
        res = run_cli("inventory", "--root", str(snap))
        assert res.returncode == 8 and "snapshot.json is missing" in res.stderr, res.stderr


@pytest.mark.parametrize("what", ["deep", "bigint"])
@pytest.mark.parametrize("where", ["snapshot.json", "commands/index.json"])
def test_hostile_json_is_exit_8_naming_the_file(tmp_path: Path, what: str, where: str) -> None:
    text = "[" * 100_000 + "]" * 100_000 if what == "deep" else "9" * 50_000
    (tmp_path / "commands").mkdir()
    (tmp_path / "snapshot.json").write_text(META)
    (tmp_path / where).write_text(text if where == "commands/index.json"
                                  else '{"format": "hwmgr-snapshot", "version": ' + text + "}")
    res = run_cli("inventory", "--root", str(tmp_path))
    assert res.returncode == 8, res.stderr
    assert f"{tmp_path}/{where}" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert ("nested" if what == "deep" else "digits") in res.stderr


@pytest.mark.timeout(20)
@pytest.mark.parametrize("where", ["snapshot.json", "commands/index.json", "vendor"])
def test_fifos_in_a_directory_snapshot_never_block(copy_host, where: str) -> None:
    import os

    snap = copy_host("seed001-bnx2")
    dev = "sys/bus/pci/devices/0000:01:00.0"
    path = snap / (f"{dev}/vendor" if where == "vendor" else where)
    real = Path(os.path.realpath(path))
    real.unlink()
    os.mkfifo(real)
    rc, doc = run_json("inventory", "--root", str(snap))
    if where == "snapshot.json":
        assert rc == 8 and "snapshot.json is not a regular file" in doc["errors"][0]
        return
    assert rc in (0, 5), doc
    assert doc["status"] != "error"
    if where == "vendor":
        dev_row = next(d for d in doc["data"]["devices"] if d["address"] == "0000:01:00.0")
        assert dev_row["vendor_id"] is None


def test_member_names_reach_the_terminal_escaped(tmp_path: Path) -> None:
    member = "snap/\x1b]0;owned\x07\x1b[31mred\rX"
    bad = _tar(tmp_path / "esc.tar.gz", [_file("snap/snapshot.json", META.encode()),
                                         _link(member, "/etc/passwd", tarfile.LNKTYPE)])
    res = run_cli("inventory", "--root", str(bad))
    assert res.returncode == 8
    assert "\x1b" not in res.stderr and "\r" not in res.stderr and "\x07" not in res.stderr
    assert "snap/\\x1b]0;owned\\x07\\x1b[31mred\\rX" in res.stderr


@pytest.mark.parametrize("case, code, fragment", [
    ("out-is-a-file", 2, "already exists"),
    ("out-is-a-file.tar.gz", 2, "already exists"),
    ("parent-is-a-file", 2, "is not a directory"),
    ("parent-missing", 3, "does not exist"),
    ("dangling-link", 2, "already exists"),
])
def test_snapshot_out_problems_are_one_line_and_create_nothing(
        tmp_path: Path, case: str, code: int, fragment: str) -> None:
    import os

    (tmp_path / "file").write_text("keep")
    out = {"out-is-a-file": tmp_path / "file", "out-is-a-file.tar.gz": tmp_path / "f.tar.gz",
           "parent-is-a-file": tmp_path / "file/snap", "parent-missing": tmp_path / "a/b/snap",
           "dangling-link": tmp_path / "link"}[case]
    if case == "out-is-a-file.tar.gz":
        out.write_text("keep")
    if case == "dangling-link":
        os.symlink(tmp_path / "nowhere", out)
    before = sorted(p.name for p in tmp_path.iterdir())
    res = run_cli("snapshot", str(out))
    assert res.returncode == code, res.stderr
    assert res.stderr.count("\n") == 1 and fragment in res.stderr, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "file").read_text() == "keep"


# ------------------------------------------------------------- what plan/verify/check read
def test_capture_records_what_plan_verify_and_check_read(tmp_path: Path) -> None:
    """On this machine: modinfo -k per bound driver and target kernel, every ethtool query
    per interface, ip -d link, the net sysctls as files, routes, headers, Secure Boot."""
    target = tmp_path / "snap"
    assert run_cli("snapshot", str(target)).returncode == 0
    meta = json.loads((target / "snapshot.json").read_text())
    assert meta["records"] == sorted([*capture.RECORDS, capture.STATE])
    assert meta["sysctls"][:len(capture.NET_SYSCTLS)] == list(capture.NET_SYSCTLS)
    assert meta["hwmgr"] == capture.CAPTURE_SINCE
    index = {tuple(e["argv"]): e for e in json.loads((target / "commands/index.json").read_text())}
    live = Host("/", SubprocessRunner())
    kernels = bundle.target_kernels(live)
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
    for k in bundle.target_kernels(live):
        if Path(f"/lib/modules/{k}/build/Makefile").exists():
            assert (target / f"lib/modules/{k}/build/Makefile").is_file()


def test_plan_reads_a_fresh_snapshot_like_the_live_host(tmp_path: Path) -> None:
    """Replaying a capture: the module each target kernel resolves to, routes and Secure
    Boot read the same as on the live host, and nothing reads as "not recorded"."""
    from hwmgr.inventory import guard as safety
    from hwmgr.lifecycle.builds import kmod

    target = tmp_path / "snap.tar.gz"
    assert run_cli("snapshot", str(target)).returncode == 0
    snap, cleanup = open_host(target)
    assert cleanup is not None
    try:
        live = Host("/", SubprocessRunner())
        assert not capture.lacks(snap, capture.ROUTES) and capture.lacks(snap, "no-such")
        assert not capture.lacks(live, "no-such")
        assert bundle.target_kernels(snap) == bundle.target_kernels(live)
        for k in bundle.target_kernels(live):
            for m in bundle.bound_modules(collect_devices(live)):
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
    from hwmgr.inventory.scan import Inventory

    return Inventory(host).scan().devices
