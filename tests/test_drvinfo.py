"""`ethtool -i` answered in-process (hwmgr/host/drvinfo.py): byte for byte what the real
ethtool prints, on real devices (this host's NICs, a veth pair in namespaces, loopback), and
the real binary still runs whenever the ioctl cannot answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from netns import VethLink

from hwmgr.host.drvinfo import ethtool_i, valid_ifname
from hwmgr.host.runner import RecordingRunner, SubprocessRunner

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("ethtool") is None, reason="needs ethtool")

# every name the kernel lists here, plus a missing one; runs wherever it is executed
_COMPARE = textwrap.dedent("""
    import json, os, subprocess
    from hwmgr.host.runner import SubprocessRunner
    names = sorted(os.listdir("/sys/class/net")) + ["hwmgr-none0"]
    native, spawned = SubprocessRunner(), SubprocessRunner(native_ethtool=False)
    out = {}
    for n in names:
        real = subprocess.run(["ethtool", "-i", n], capture_output=True, text=True,
                              env=dict(os.environ, LC_ALL="C"))
        a, b = native.run(["ethtool", "-i", n]), spawned.run(["ethtool", "-i", n])
        out[n] = [real.returncode, real.stdout, a.rc, a.stdout, b.rc, b.stdout]
    print(json.dumps(out))
""")


def _check(out: dict[str, list]) -> None:
    for name, (real_rc, real_out, rc, text, spawned_rc, spawned_out) in out.items():
        assert (rc, text) == (real_rc, real_out) == (spawned_rc, spawned_out), name


def test_same_bytes_as_ethtool_on_this_hosts_devices() -> None:
    res = subprocess.run([sys.executable, "-c", _COMPARE], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    _check(out)
    assert out["hwmgr-none0"][0] != 0  # the missing device: the binary ran and failed
    answered = [n for n, v in out.items() if v[0] == 0]
    assert answered, out  # at least one real NIC answered (eth0 here: virtio_net)
    assert all(ethtool_i(n) == out[n][1] for n in answered)


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_same_bytes_as_ethtool_on_veth_and_loopback_in_a_namespace() -> None:
    link = VethLink.create("drv")
    try:
        res = link.run_a([sys.executable, "-c", _COMPARE], env={"PYTHONPATH": str(REPO)})
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert set(out) == {"lo", link.if_a, "hwmgr-none0"}
        _check(out)
        assert out[link.if_a][0] == 0 and out[link.if_a][3].startswith("driver: veth\n")
        assert out["lo"][0] != 0  # loopback has no driver info: ethtool's own error, rc 71
    finally:
        link.teardown()


def test_recording_runner_keeps_the_native_answer() -> None:
    name = next((n for n in sorted(os.listdir("/sys/class/net")) if ethtool_i(n)), None)
    if name is None:
        pytest.skip("no interface here answers ETHTOOL_GDRVINFO")
    rec = RecordingRunner(SubprocessRunner())
    res = rec.run(["ethtool", "-i", name])
    assert res.ok and rec.calls == [res] and res.stdout == ethtool_i(name)
    assert res.argv == ("ethtool", "-i", name)


def test_no_ethtool_on_path_is_still_not_available() -> None:
    """rc 127 as before: the ioctl is ethtool's, so it answers only where ethtool exists."""
    name = next((n for n in sorted(os.listdir("/sys/class/net")) if ethtool_i(n)), "lo")
    res = SubprocessRunner(extra_env={"PATH": "/nonexistent"}).run(["ethtool", "-i", name])
    assert res.rc == 127


@pytest.mark.parametrize("name", ["", "x" * 16, "a/b", "a b", "a:b", "a\0b", "a\tb", ".", "..",
                                  "\udcff" * 16])
def test_hostile_names_never_reach_the_ioctl(name: str) -> None:
    assert not valid_ifname(name)
    assert ethtool_i(name) is None


@pytest.mark.parametrize("name", ["eth0", "x" * 15, "enp1s0f0", "veth-é"])
def test_kernel_names_are_valid(name: str) -> None:
    assert valid_ifname(name)
