"""The one interface-name rule (hwmgr/host/ifname.py): the kernel's dev_valid_name, checked
against the kernel itself where this machine lets a test make interfaces, and the one rule for
names a tool argument cannot carry (a leading '-')."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.apply_env import ApplyNs

from hwmgr.compliance.read import read_interface
from hwmgr.errors import BadInputError
from hwmgr.host import ifname
from hwmgr.host.runner import RecordingRunner, ReplayRunner, SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.inventory.scan import Inventory

# (name, the kernel accepts it)
CASES = [
    ("eth0", True),
    ("eth0:1", False),  # ':' is the old alias separator
    ("-x", True),  # valid for the kernel; not tool-safe
    ("ēth0", True),  # 5 UTF-8 bytes
    ("ē" * 7 + "0", True),  # 15 bytes
    ("ē" * 8, False),  # 8 characters, 16 bytes
    ("à0", False),  # "à" is C3 A0, and the kernel's isspace(0xA0) is true
    ("eth0\n", False),
    ("eth 0", False),
    ("eth\t0", False),
    ("a/b", False),
    ("a\0b", False),
    ("", False),
    (".", False),
    ("..", False),
    ("...", True),
    ("e\x1b", True),  # a control character is no space: shown escaped, passed as is
    ("x" * 15, True),
    ("x" * 16, False),
    ("\udcff" * 15, True),  # 15 undecodable bytes, as os.listdir hands them over
    ("\udcff" * 16, False),
    ("\ud800", False),  # a lone surrogate that stands for no byte
]


@pytest.mark.parametrize("name, ok", CASES)
def test_kernel_rule(name: str, ok: bool) -> None:
    assert ifname.valid(name) is ok
    assert (ifname.why_invalid(name) is None) is ok


@pytest.mark.parametrize("name, ok", CASES)
def test_tool_rule_is_the_kernel_rule_without_a_leading_dash(name: str, ok: bool) -> None:
    assert ifname.tool_safe(name) is (ok and not name.startswith("-"))


@pytest.mark.parametrize("name, fragment", [
    ("-x", "starts with '-'"),
    ("eth0:1", "':'"),
    ("ē" * 8, "16 bytes long"),
    ("eth0\n", "white space"),
    ("", "empty"),
    ("..", "'.' and '..'"),
])
def test_refusal_is_one_line_naming_the_interface(name: str, fragment: str) -> None:
    with pytest.raises(BadInputError, match=fragment) as err:
        ifname.check_tool_safe(name)
    msg = str(err.value)
    assert msg.startswith(f"interface {name!r}: ") and "\n" not in msg
    assert err.value.exit_code == 8


def test_read_interface_refuses_before_running_anything(tmp_path: Path) -> None:
    runner = RecordingRunner(SubprocessRunner())
    with pytest.raises(BadInputError, match="starts with '-'"):
        read_interface(Host(tmp_path, runner), "-x")
    assert runner.calls == []


def _replay(root: Path, recorded: dict[str, str]) -> ReplayRunner:
    """A snapshot's command index answering `ethtool -i NAME` with the given texts."""
    (root / "commands").mkdir()
    index = []
    for i, (name, text) in enumerate(recorded.items()):
        (root / f"commands/{i}.txt").write_text(text)
        index.append({"argv": ["ethtool", "-i", name], "rc": 0, "stdout": f"commands/{i}.txt"})
    (root / "commands/index.json").write_text(json.dumps(index))
    return ReplayRunner(root, lambda rel: (root / rel).read_bytes()
                        if (root / rel).is_file() else None)


def test_inventory_lists_kernel_names_and_runs_ethtool_only_on_tool_safe_ones(
        tmp_path: Path) -> None:
    fn = tmp_path / "sys/bus/pci/devices/0000:01:00.0"
    for name in ("eth0", "-x", "eth0:1"):
        (fn / "net" / name).mkdir(parents=True)
    for attr, value in (("vendor", "0x8086"), ("device", "0x10d3"), ("class", "0x020000"),
                        ("subsystem_vendor", "0x8086"), ("subsystem_device", "0xa01f")):
        (fn / attr).write_text(value + "\n")
    recorded = {"eth0": "driver: e1000e\nversion: 3.2.6-k\nbus-info: 0000:01:00.0\n",
                "-x": "driver: faked\n"}
    runner = RecordingRunner(_replay(tmp_path, recorded))
    scan = Inventory(Host(tmp_path, runner)).scan()
    assert [i["name"] for i in scan.interfaces] == ["-x", "eth0"]  # eth0:1: no kernel name
    by_name = {i["name"]: i for i in scan.interfaces}
    assert by_name["eth0"]["driver"] == "e1000e"
    assert by_name["-x"]["driver"] is None  # unknown, not what `ethtool -i -x` would say
    assert [c.argv for c in runner.calls] == [("ethtool", "-i", "eth0")]
    assert any("'-x'" in n and "not passed to ethtool" in n for n in scan.notes), scan.notes


def _kernel_accepts(ns: str, name: str, peer: str) -> bool | None:
    """Whether the kernel (not ip) accepts `name` for a new veth in namespace `ns`."""
    res = subprocess.run(["ip", "-n", ns, "link", "add", "name", name, "type", "veth",
                          "peer", "name", peer], capture_output=True, text=True, check=False)
    if res.returncode == 0:
        return True
    return False if "Invalid argument" in res.stderr else None  # None: ip refused it itself


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"), reason="needs root and ip")
def test_the_kernel_agrees(ns: ApplyNs) -> None:
    """Every case iproute2 lets through to the kernel: the kernel's answer is the rule's."""
    asked = 0
    for i, (name, ok) in enumerate(CASES):
        if "\0" in name or "\udcff" in name or "\ud800" in name:
            continue  # argv cannot carry these
        got = _kernel_accepts(ns.ns, name, f"hwp{i}")
        if got is None:
            continue
        asked += 1
        assert got is ok, name
    if asked == 0:
        pytest.skip("veth links cannot be made here")
