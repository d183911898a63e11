"""read_interface on a real veth pair in a namespace of our own, through a live Host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.apply_env import ApplyNs

from hwmgr.compliance.items import Status
from hwmgr.compliance.read import canonical_item, lookup, read_interface
from hwmgr.errors import BadInputError
from hwmgr.host.ifname import check_tool_safe
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host

REPO = Path(__file__).resolve().parent.parent
READER = """
import json
from hwmgr.compliance.items import jsonable
from hwmgr.compliance.read import read_interface
from hwmgr.compliance.sysctl import read_sysctls
from hwmgr.host.seam import Host
from hwmgr.host.ifname import check_tool_safe
from hwmgr.host.runner import SubprocessRunner
host = Host("/", SubprocessRunner())
items = read_interface(host, "v0")
items.update(read_sysctls(host, ["net.ipv4.ip_forward"]))
print(json.dumps({k: jsonable(v) for k, v in items.items()}))
"""


@pytest.fixture
def veth_ns(ns: ApplyNs) -> tuple[str, int]:
    """conftest's namespace with veth v0 set away from every default we check."""
    ns.ip("link", "set", "v0", "mtu", "9000", "txqueuelen", "4321", "up")
    ns.x("ethtool", "-K", "v0", "gro", "on", "tso", "off")
    ns.x("ethtool", "-L", "v0", "rx", "2", "tx", "1")
    outside = int(Path("/proc/sys/net/ipv4/ip_forward").read_text())
    inside = 1 - outside  # the opposite of the host's, whatever the host has
    ns.x("sh", "-c", f"echo {inside} > /proc/sys/net/ipv4/ip_forward")
    return ns.ns, inside


@pytest.mark.root
def test_read_veth_inside_its_namespace(veth_ns: tuple[str, int]) -> None:
    ns, inside = veth_ns
    res = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", READER],
                         capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert res.returncode == 0, res.stderr
    items = json.loads(res.stdout)
    assert items["features.tcp-segmentation-offload"] is False
    assert items["features.generic-receive-offload"] is True
    assert items["features.large-receive-offload"] is False
    assert items["channels.rx"] == 2 and items["channels.tx"] == 1
    assert items["channels.rx.max"] == 2 and items["channels.combined"] == "unsupported"
    assert items["pause"] == "unsupported" and items["pause.rx"] == "unsupported"
    assert items["ring.rx"] == "unsupported"
    assert items["mtu"] == 9000 and items["txqueuelen"] == 4321
    assert items["qdisc"] == "noqueue" and items["kind"] == "veth" and items["master"] == ""
    assert items["sysctl.net.ipv4.ip_forward"] == inside
    outside = int(Path("/proc/sys/net/ipv4/ip_forward").read_text())
    assert outside == 1 - inside, "the namespace's sysctl must not have leaked to the host"


def test_loopback_on_the_live_host() -> None:
    """lo exists everywhere: features read, pause unsupported, MTU from /sys."""
    items = read_interface(Host("/", SubprocessRunner()), "lo")
    assert items["features"] is Status.OK
    assert items["features.tcp-segmentation-offload"] in (True, False)
    assert items["features.loopback"] in (True, False)
    assert items["pause"] is Status.UNSUPPORTED
    assert items["mtu"] == int(Path("/sys/class/net/lo/mtu").read_text())
    assert lookup(items, "features.tso") == items["features.tcp-segmentation-offload"]
    assert lookup(items, "pause.rx-negotiated") is Status.UNSUPPORTED
    assert lookup(items, "coalesce.rx-usecs") is Status.UNSUPPORTED
    assert lookup(items, "features.no-such-feature") is Status.UNKNOWN


def test_missing_ethtool_and_missing_device_are_unknown() -> None:
    host = Host("/", SubprocessRunner())
    items = read_interface(host, "lo", ethtool="/nonexistent/ethtool")
    assert items["features"] is Status.UNKNOWN
    assert items["features.generic-receive-offload"] is Status.UNKNOWN
    assert items["channels.rx.max"] is Status.UNKNOWN
    assert isinstance(items["mtu"], int)
    gone = read_interface(host, f"nx{os.getpid() % 100000}")
    assert all(v is Status.UNKNOWN for v in gone.values()), gone


# (the whole rule is tests/test_ifname.py's; "e\x1b" is a name the kernel accepts, and
# printable() escapes it wherever it is shown)
@pytest.mark.parametrize("bad", ["-v", "", "a/b", "a b", "x" * 16, "..", "eth0:1"])
def test_bad_interface_names_refused(bad: str) -> None:
    with pytest.raises(BadInputError):
        check_tool_safe(bad)


def test_canonical_item() -> None:
    assert canonical_item("features.GRO") == "features.generic-receive-offload"
    assert canonical_item("sysctl.net.ipv4.tcp_rmem") == "sysctl.net.ipv4.tcp_rmem"
