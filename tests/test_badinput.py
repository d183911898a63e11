"""Property-based bad input: damaged snapshots never crash the inventory or invent values.

Hypothesis builds snapshot trees with garbage attribute bytes, missing files, dangling and
looping symlinks, odd directory names and broken command indexes; the scan must either
succeed with `None` for what it cannot read, or raise a one-line `HwmgrError`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import HOSTS, run_cli

from hwmgr.errors import HwmgrError
from hwmgr.host.snapshot import open_host
from hwmgr.inventory.scan import Inventory

ATTRS = ["vendor", "device", "subsystem_vendor", "subsystem_device", "class", "revision",
         "numa_node", "current_link_speed", "current_link_width", "sriov_totalvfs",
         "sriov_numvfs", "modalias"]
GOOD = {"vendor": b"0x19a2\n", "device": b"0x0710\n", "subsystem_vendor": b"0x10df\n",
        "subsystem_device": b"0xe70b\n", "class": b"0x020000\n", "revision": b"0x02\n"}
HEX4 = re.compile(r"^[0-9a-f]{4}$")

attr_value = st.one_of(
    st.sampled_from(list(GOOD.values())),
    st.binary(max_size=40),
    st.text(max_size=20).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.just(b""),
    st.just(b"0x" + b"f" * 50 + b"\n"),
)
link_kind = st.sampled_from(["none", "dangling", "loop", "escape", "absolute"])
ethtool_text = st.one_of(
    st.just("driver: be2net\nversion: 4.1.307r\nfirmware-version: 10.0.803.19\n"),
    st.text(max_size=200),
    st.binary(max_size=100).map(lambda b: b.decode("latin-1")),
)
device_spec = st.fixed_dictionaries({
    "attrs": st.dictionaries(st.sampled_from(ATTRS), attr_value, max_size=len(ATTRS)),
    "driver": link_kind,
    "net": st.lists(st.sampled_from(["eth0", "eth1", "x" * 20, "bad name"]), max_size=2),
    "ethtool": ethtool_text,
    "ethtool_rc": st.sampled_from([0, 1, 127]),
})
index_kind = st.sampled_from(["good", "missing", "garbage", "not-list", "missing-output"])


def _link(path: Path, kind: str) -> None:
    target = {"dangling": "../../../bus/pci/drivers/be2net", "loop": path.name,
              "escape": "../../../../../../../../../etc", "absolute": "/etc/passwd"}.get(kind)
    if target:
        os.symlink(target, path)


def build(root: Path, devices: list[dict], index: str, meta_ok: bool) -> None:
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    meta = {"format": "hwmgr-snapshot", "version": 1, "hostname": "h", "kernel": "k"}
    (root / "snapshot.json").write_text(json.dumps(meta) if meta_ok else '{"format": "hwm')
    entries = []
    for i, spec in enumerate(devices):
        d = root / f"sys/bus/pci/devices/0000:0{i}:00.0"
        d.mkdir()
        for name, value in {**GOOD, **spec["attrs"]}.items():
            (d / name).write_bytes(value)
        _link(d / "driver", spec["driver"])
        for ifname in spec["net"]:
            if "/" not in ifname:
                (d / "net" / ifname).mkdir(parents=True, exist_ok=True)
                n = root / "sys/class/net" / ifname
                n.mkdir(parents=True, exist_ok=True)
                (n / "speed").write_bytes(spec["attrs"].get("numa_node", b"-1\n"))
                (root / "commands").mkdir(exist_ok=True)
                (root / f"commands/e-{ifname}.txt").write_text(spec["ethtool"])
                entries.append({"argv": ["ethtool", "-i", ifname], "rc": spec["ethtool_rc"],
                                "stdout": f"commands/e-{ifname}.txt"})
    (root / "sys/bus/pci/devices/not-an-address").mkdir()
    _link(root / "sys/bus/pci/devices/0000:0f:00.0", "loop")
    (root / "commands").mkdir(exist_ok=True)
    text = {"good": json.dumps(entries), "garbage": "\x00{[", "not-list": "{}",
            "missing-output": json.dumps([{"argv": ["x"], "stdout": "commands/nope"}])}
    if index in text:
        (root / "commands/index.json").write_text(text[index])


@pytest.mark.heavy
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(device_spec, min_size=0, max_size=4), index_kind, st.booleans())
def test_damaged_snapshots_never_crash(devices: list[dict], index: str, meta_ok: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hwmgr-hyp-"))
    try:
        build(tmp, devices, index, meta_ok)
        try:
            host, _ = open_host(tmp)
            scan = Inventory(host).scan()
        except HwmgrError as exc:
            assert "\n" not in str(exc) and str(exc)
            assert (not meta_ok) or index in ("garbage", "not-list", "missing-output")
            return
        assert meta_ok and index in ("good", "missing")
        assert len(scan.devices) == len(devices)
        for dev in scan.devices:
            for key in ("vendor_id", "device_id", "subsystem_vendor_id", "subsystem_device_id",
                        "class"):
                assert dev[key] is None or HEX4.match(dev[key]), (key, dev[key])
            assert dev["driver"] is None or re.match(r"^[A-Za-z0-9_.+-]+$", dev["driver"])
            assert dev["numa_node"] is None or dev["numa_node"] >= 0
        # the escape/absolute links must never surface the analysing machine's files
        assert "root:" not in json.dumps(scan.to_json())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ CLI: not-a-file inputs
@pytest.mark.timeout(20)
@pytest.mark.parametrize("kind, code, fragment", [
    ("directory", 3, "holds no catalog files"),  # a catalog directory, but empty
    ("devnull", 8, "is a character device"),
    ("fifo", 8, "is a FIFO"),
    ("missing", 3, "does not exist"),
])
def test_catalog_validate_says_what_a_non_file_is(tmp_path: Path, kind: str, code: int,
                                                  fragment: str) -> None:
    path = {"directory": tmp_path, "devnull": Path("/dev/null"), "fifo": tmp_path / "c.json",
            "missing": tmp_path / "nope.json"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    res = run_cli("catalog", "validate", str(path), timeout=15)
    assert res.returncode == code, res.stderr
    assert res.stderr.count("\n") == 1 and fragment in res.stderr and str(path) in res.stderr


# ------------------------------------------------------------------ hostile strings on screen
EVIL = "eth\x1b[2J\x1b]0;t\x07[bold red]X[/]\r"
SHOWN = "eth\\x1b[2J\\x1b]0;t\\x07[bold red]X[/]\\r"


def _screen(render, data) -> str:
    import io

    from hwmgr.output import make_console

    buf = io.StringIO()
    render(make_console(buf), data)
    return buf.getvalue()


def test_plan_rendering_escapes_host_strings() -> None:
    from hwmgr.ui.lifecycle import render_plan

    plan = {"action": "upgrade", "driver": EVIL, "to_version": EVIL, "kernels": [EVIL],
            "from_versions": {EVIL: EVIL}, "initramfs": {}, "reboot_required": False,
            "devices": [{"address": EVIL, "vendor_id": "19a2", "device_id": "0710",
                         "interfaces": [EVIL]}], "steps": [EVIL],
            "backups": [{"kernel": EVIL, "module": EVIL, "path": EVIL, "version": EVIL}],
            "warnings": [EVIL], "refusals": [{"code": 9, "reason": EVIL}]}
    out = _screen(render_plan, plan)
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert out.count(SHOWN) >= 10, out


def test_verify_rendering_escapes_host_strings() -> None:
    from hwmgr.commands.verify import _render

    check = {"result": "fail", "device": EVIL, "field": EVIL, "expected": EVIL, "actual": EVIL,
             "source": EVIL, "message": EVIL}
    data = {"expectations": [{"driver": EVIL, "expected_version": EVIL, "kind": "upgrade",
                              "txn": 3, "status": "failed", "checks": [check],
                              "action": "report", "action_detail": EVIL, "throughput": {}}],
            "notes": [EVIL], "reboot": None}
    out = _screen(_render, data)
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert out.count(SHOWN) >= 4 and out.count("[bol") >= 8, out  # table cells fold


@pytest.mark.parametrize("text, fragment", [("[" * 100_000, "nested"), ("9" * 50_000, "digits")])
def test_hostile_json_elsewhere_in_a_snapshot_is_exit_8_or_ignored(
        tmp_path: Path, text: str, fragment: str) -> None:
    """The site config (exit 8, named) and a recorded storcli output (ignored) in a snapshot."""
    snap = tmp_path / "snap"
    shutil.copytree(HOSTS / "seed001-bnx2", snap, symlinks=True)
    (snap / "etc/hwmgr").mkdir()
    (snap / "etc/hwmgr/hwmgr.json").write_text(text)
    res = run_cli("verify", "--root", str(snap))
    assert res.returncode == 8, res.stderr
    assert "/etc/hwmgr/hwmgr.json" in res.stderr and fragment in res.stderr
    (snap / "etc/hwmgr/hwmgr.json").unlink()
    index = json.loads((snap / "commands/index.json").read_text())
    (snap / "commands/storcli.txt").write_text(text)
    index.append({"argv": ["storcli64", "/call", "show", "J"], "rc": 0,
                  "stdout": "commands/storcli.txt"})
    (snap / "commands/index.json").write_text(json.dumps(index))
    res = run_cli("inventory", "--root", str(snap))
    assert res.returncode in (0, 5), res.stderr
