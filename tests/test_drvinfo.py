"""`ethtool -i` answered in-process (hwmgr/host/drvinfo.py): byte for byte what the real
ethtool prints, on real devices (this host's NICs; veth, loopback, bridge, ifb, macvlan, vxlan,
tun and whatever else this kernel has, in namespaces) and in a snapshot, and the real binary
still runs whenever the ioctl cannot answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from netns import IP, VethLink, sh
from support import run_cli

from hwmgr.host.drvinfo import DRVINFO_SIZE, ethtool_i, format_drvinfo, valid_ifname
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


# device kinds whose drivers fill ethtool_drvinfo differently ("N/A" fields, a bus-info, the
# kernel release as version); each is made inside the namespace if this kernel has its driver
_KINDS = {
    "bridge": ["type", "bridge"],
    "ifb": ["type", "ifb"],
    "macvlan": ["link", "{veth}", "type", "macvlan"],
    "vxlan": ["type", "vxlan", "id", "42", "dstport", "4789"],
    "vlan": ["link", "{veth}", "type", "vlan", "id", "5"],
    "dummy": ["type", "dummy"],
    "tun": [],  # ip tuntap
}


@pytest.fixture(scope="module")
def drv_link():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    link = VethLink.create("dk")
    yield link
    link.teardown()


@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_same_bytes_as_ethtool_on_other_device_kinds(drv_link: VethLink, kind: str) -> None:
    name = f"hwd-{kind}"
    if kind == "tun":
        argv = [IP, "-n", drv_link.ns_a, "tuntap", "add", "dev", name, "mode", "tun"]
    else:
        argv = [IP, "-n", drv_link.ns_a, "link", "add", name,
                *(a.format(veth=drv_link.if_a) for a in _KINDS[kind])]
    made = sh(argv, check=False)
    if made.returncode != 0:
        if "Unknown device type" in made.stderr or "not supported" in made.stderr.lower():
            pytest.skip(f"this kernel has no {kind} driver (and cannot load modules): "
                        f"{made.stderr.strip()}")
        raise AssertionError(f"{' '.join(argv)}: {made.stderr}")
    try:
        res = drv_link.run_a([sys.executable, "-c", _COMPARE], env={"PYTHONPATH": str(REPO)})
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert name in out
        _check(out)
        assert out[name][0] == 0 and out[name][3].startswith(f"driver: {kind}\n"), out[name]
    finally:
        sh([IP, "-n", drv_link.ns_a, "link", "del", name], check=False)


def _drvinfo(driver: bytes = b"", version: bytes = b"", fw: bytes = b"", bus: bytes = b"",
             erom: bytes = b"", counts: tuple[int, ...] = (0, 0, 0, 0, 0)) -> bytes:
    """A struct ethtool_drvinfo as the kernel fills it (fields given up to 32 bytes)."""
    raw = bytearray(DRVINFO_SIZE)
    raw[0:4] = (3).to_bytes(4, sys.byteorder)
    for at, value in ((4, driver), (36, version), (68, fw), (100, bus), (132, erom)):
        raw[at:at + len(value)] = value
    for at, n in zip((176, 180, 184, 188, 192), counts):  # n_priv_flags .. regdump_len
        raw[at:at + 4] = n.to_bytes(4, sys.byteorder)
    return bytes(raw)


def test_a_full_32_byte_field_stops_at_its_end_and_counts_map_to_their_lines() -> None:
    # %.*s with 32: a field without a NUL prints all 32 bytes and never the next field
    text = format_drvinfo(_drvinfo(driver=b"d" * 32, version=b"v" * 32, bus=b"0000:01:00.0",
                                   erom=b"1.2\0junk", counts=(1, 0, 7, 0, 2)))
    assert text == ("driver: " + "d" * 32 + "\nversion: " + "v" * 32 +
                    "\nfirmware-version: \nexpansion-rom-version: 1.2\n"
                    "bus-info: 0000:01:00.0\nsupports-statistics: no\nsupports-test: yes\n"
                    "supports-eeprom-access: no\nsupports-register-dump: yes\n"
                    "supports-priv-flags: yes\n")


def test_bytes_that_are_not_utf8_decode_as_a_real_runs_stdout() -> None:
    """A firmware string with stray bytes: the same U+FFFD text the spawned ethtool's stdout
    decodes to (so a snapshot can write it), never lone surrogates."""
    fw = b"FW \xff\xfe 1.\xe2\x82"
    text = format_drvinfo(_drvinfo(driver=b"x", fw=fw))
    printed = (b"driver: x\nversion: \nfirmware-version: " + fw +
               b"\nexpansion-rom-version: \nbus-info: \nsupports-statistics: no\n"
               b"supports-test: no\nsupports-eeprom-access: no\n"
               b"supports-register-dump: no\nsupports-priv-flags: no\n")
    assert text == printed.decode("utf-8", errors="replace")
    assert "firmware-version: FW \ufffd\ufffd 1.\ufffd\n" in text
    text.encode("utf-8")  # strict: what write_text needs


def test_a_snapshot_stores_ethtool_i_as_the_binary_prints_it(tmp_path: Path) -> None:
    target = tmp_path / "snap"
    res = run_cli("snapshot", str(target))
    assert res.returncode == 0, res.stderr
    index = json.loads((target / "commands" / "index.json").read_text())
    stored = [e for e in index if e["argv"][:2] == ["ethtool", "-i"]]
    if not stored:
        pytest.skip("no PCI NIC here: the inventory asks ethtool -i nothing")
    for entry in stored:
        real = subprocess.run(entry["argv"], capture_output=True, text=True, check=False,
                              env=dict(os.environ, LC_ALL="C"))
        assert entry["rc"] == real.returncode
        assert (target / entry["stdout"]).read_text() == real.stdout


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
