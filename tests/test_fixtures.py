"""Conformance tests for the host snapshot fixtures in tests/fixtures/hosts/ (docs/formats.md).

They check that each good snapshot is well-formed (kernel-format ID files, plausible driver
links, relative in-root symlinks, a replayable command index), that the parts agree with each
other (ethtool bus-info vs. the PCI tree, module versions, SR-IOV links), that the seed facts
are really there, that the IDs carry the expected names in pci.ids, that each broken snapshot is
broken in exactly the way its README says, and that the committed trees equal a regeneration.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from hwmgr.errors import BadInputError
from hwmgr.host.snapshot import open_host

HOSTS_DIR = Path(__file__).resolve().parent / "fixtures" / "hosts"
GOOD = ["seed000-ustor", "seed001-bnx2", "seed002-router", "seed002-before", "seed002-after"]
BROKEN = HOSTS_DIR / "broken"

ADDR_RE = re.compile(r"^[0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
ID_FILES = {
    "vendor": re.compile(r"^0x[0-9a-f]{4}\n$"),
    "device": re.compile(r"^0x[0-9a-f]{4}\n$"),
    "subsystem_vendor": re.compile(r"^0x[0-9a-f]{4}\n$"),
    "subsystem_device": re.compile(r"^0x[0-9a-f]{4}\n$"),
    "class": re.compile(r"^0x[0-9a-f]{6}\n$"),
    "revision": re.compile(r"^0x[0-9a-f]{2}\n$"),
}
MAC_RE = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}\n$")
CAPTURED_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
KNOWN_DRIVERS = {
    "ahci", "ast", "ata_piix", "be2net", "bnx2", "e1000e", "ehci-pci", "ehci_hcd",
    "i801_smbus", "ixgbe", "ixgbevf", "lpc_ich", "megaraid_sas", "nvme", "pcieport", "tg3",
    "uhci_hcd", "xhci_hcd",
}
PCI_IDS_PATHS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids")


# --------------------------------------------------------------------------- helpers
def lexical_target(link: Path) -> str:
    """Where a symlink points, resolved lexically (no following) from its directory."""
    return os.path.normpath(os.path.join(os.path.dirname(link), os.readlink(link)))


def walk_links(root: Path) -> Iterator[Path]:
    """Every symlink under root (links are not followed)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            if p.is_symlink():
                yield p


def read(root: Path, rel: str) -> Optional[str]:
    p = root / rel
    return p.read_text() if p.is_file() else None


def devices(root: Path) -> Dict[str, Path]:
    """PCI address → the (resolved) function directory of a good snapshot."""
    base = root / "sys/bus/pci/devices"
    return {name: Path(os.path.realpath(base / name)) for name in sorted(os.listdir(base))}


def driver_of(dev: Path) -> Optional[str]:
    link = dev / "driver"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else None


def parse_ethtool_i(text: str) -> Dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key] = value.strip()
    return out


def load_pci_ids() -> Tuple[Dict[str, str], Dict[Tuple[str, str], str],
                            Dict[Tuple[str, str, str, str], str]]:
    """vendors, devices and subsystems from the system pci.ids (independent tiny parser)."""
    path = next((p for p in PCI_IDS_PATHS if os.path.exists(p)), None)
    if path is None:
        pytest.skip("no pci.ids on this machine (install pciutils / hwdata)")
    vendors: Dict[str, str] = {}
    devs: Dict[Tuple[str, str], str] = {}
    subs: Dict[Tuple[str, str, str, str], str] = {}
    ven = dev = None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("#") or not line.strip():
                continue
            if line.startswith("C "):
                break
            if not line.startswith("\t"):
                ven, dev = line[:4].lower(), None
                vendors[ven] = line[4:].strip()
            elif not line.startswith("\t\t"):
                dev = line[1:5].lower()
                devs[(ven, dev)] = line[5:].strip()
            elif dev is not None:
                sv, sd = line[2:6].lower(), line[7:11].lower()
                subs[(ven, dev, sv, sd)] = line[11:].strip()
    return vendors, devs, subs


def load_generator():
    path = HOSTS_DIR.parent / "make_fixtures.py"
    spec = importlib.util.spec_from_file_location("make_fixtures", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the file runs
    spec.loader.exec_module(mod)
    return mod


def tree_digest(root: Path) -> Dict[str, Tuple[str, str]]:
    """path → (kind, content-or-target) for a whole tree, README.md files excluded."""
    out: Dict[str, Tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if name == "README.md":
                continue
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", "")
            else:
                out[rel] = ("file", p.read_bytes().hex())
    return out


# --------------------------------------------------------------------------- generation
def test_committed_fixtures_equal_a_fresh_generation(tmp_path: Path) -> None:
    gen = load_generator()
    names = gen.generate(tmp_path)
    assert sorted(names) == sorted(GOOD + ["broken"])
    for name in names:
        fresh, committed = tree_digest(tmp_path / name), tree_digest(HOSTS_DIR / name)
        missing = sorted(set(fresh) - set(committed))[:5]
        extra = sorted(set(committed) - set(fresh))[:5]
        changed = sorted(k for k in fresh.keys() & committed.keys() if fresh[k] != committed[k])
        assert not (missing or extra or changed), (
            f"{name}: run tests/fixtures/make_fixtures.py — missing {missing}, extra {extra}, "
            f"changed {changed[:5]}"
        )


def test_no_empty_directories() -> None:
    """git stores no empty directories, so a committed fixture must not rely on one."""
    for name in GOOD + ["broken"]:
        for dirpath, dirnames, filenames in os.walk(HOSTS_DIR / name):
            assert dirnames or filenames, f"empty directory {dirpath} would be lost by git"


def test_every_fixture_dir_has_a_readme() -> None:
    assert "expected behaviour" in (BROKEN / "README.md").read_text()
    for name in GOOD:
        text = (HOSTS_DIR / name / "README.md").read_text()
        assert "From the seed" in text and "Illustrative" in text


# --------------------------------------------------------------------------- well-formed
@pytest.mark.parametrize("name", GOOD)
def test_snapshot_json(name: str) -> None:
    root = HOSTS_DIR / name
    meta = json.loads((root / "snapshot.json").read_text())
    assert set(meta) - {"hwmgr", "records"} == {"format", "version", "hostname", "kernel",
                                                 "captured"}
    assert meta["format"] == "hwmgr-snapshot" and meta["version"] == 1
    assert all(isinstance(meta[k], str) and meta[k] for k in ("hostname", "kernel", "captured"))
    assert CAPTURED_RE.match(meta["captured"]), meta["captured"]
    assert read(root, "proc/sys/kernel/osrelease") == meta["kernel"] + "\n"
    assert read(root, "proc/sys/kernel/hostname") == meta["hostname"] + "\n"


@pytest.mark.parametrize("name", GOOD)
def test_pci_functions_in_kernel_format(name: str) -> None:
    root = HOSTS_DIR / name
    devs = devices(root)
    assert len(devs) >= 10, "a believable host has chipset functions too"
    for addr, d in devs.items():
        assert ADDR_RE.match(addr), addr
        assert d.is_dir() and str(d).startswith(str(root.resolve())), addr
        ids = {}
        for fname, rx in ID_FILES.items():
            text = (d / fname).read_text()
            assert rx.match(text), f"{addr}/{fname}: {text!r}"
            ids[fname] = int(text, 16)
        cls = ids["class"]
        expected = (
            f"pci:v{ids['vendor']:08X}d{ids['device']:08X}"
            f"sv{ids['subsystem_vendor']:08X}sd{ids['subsystem_device']:08X}"
            f"bc{cls >> 16:02X}sc{(cls >> 8) & 0xFF:02X}i{cls & 0xFF:02X}\n"
        )
        assert (d / "modalias").read_text() == expected, addr
        numa = d / "numa_node"
        if numa.exists():
            assert re.match(r"^-?\d+\n$", numa.read_text()), addr
        for attr, rx in (("current_link_speed", r"^(2\.5|5|8|16) GT/s\n$"),
                         ("max_link_speed", r"^(2\.5|5|8|16) GT/s\n$"),
                         ("current_link_width", r"^(1|2|4|8|16)\n$"),
                         ("max_link_width", r"^(1|2|4|8|16)\n$")):
            if (d / attr).exists():
                assert re.match(rx, (d / attr).read_text()), f"{addr}/{attr}"


@pytest.mark.parametrize("name", GOOD)
def test_driver_links_name_a_plausible_driver(name: str) -> None:
    root = HOSTS_DIR / name
    bound = 0
    for addr, d in devices(root).items():
        link = d / "driver"
        if not link.is_symlink():
            assert not link.exists(), addr
            continue
        bound += 1
        target = os.readlink(link)
        assert not target.startswith("/"), f"{addr}: absolute driver link {target}"
        drv = os.path.basename(target)
        assert re.match(r"^[a-z0-9_-]+$", drv) and drv in KNOWN_DRIVERS, f"{addr}: {drv}"
        assert lexical_target(link).endswith(f"/sys/bus/pci/drivers/{drv}"), addr
    assert bound >= 8


@pytest.mark.parametrize("name", GOOD)
def test_all_links_relative_and_inside_root(name: str) -> None:
    root = HOSTS_DIR / name
    real_root = os.path.realpath(root)
    links = list(walk_links(root))
    assert links, "every snapshot has at least its driver links"
    for link in links:
        target = os.readlink(link)
        assert not target.startswith("/"), f"{link}: absolute target {target}"
        lexical = lexical_target(link)
        assert os.path.commonpath([lexical, str(root)]) == str(root), f"{link} leaves the root"
        real = os.path.realpath(link)  # follows the chain; loops would stay inside too
        assert os.path.commonpath([real, real_root]) == real_root, f"{link} leaves the root"
    if name == "seed002-router":  # the kernel-style tree: every link must resolve
        dangling = [str(p) for p in links if not os.path.exists(p)]
        assert not dangling, dangling[:5]


@pytest.mark.parametrize("name", GOOD)
def test_net_scsi_and_module_attributes(name: str) -> None:
    root = HOSTS_DIR / name
    devs = devices(root)
    netdevs = []
    for addr, d in devs.items():
        for ifname in sorted(os.listdir(d / "net")) if (d / "net").is_dir() else []:
            netdevs.append(ifname)
            cls = root / "sys/class/net" / ifname
            assert cls.is_dir(), f"{addr}: {ifname} has no sys/class/net entry"
            assert MAC_RE.match((cls / "address").read_text()), ifname
            assert re.match(r"^\d+\n$", (cls / "mtu").read_text()), ifname
            assert re.match(r"^\d+\n$", (cls / "tx_queue_len").read_text()), ifname
            assert (cls / "operstate").read_text() in ("up\n", "down\n", "unknown\n")
            if (cls / "speed").exists():
                assert re.match(r"^-?\d+\n$", (cls / "speed").read_text()), ifname
            if (cls / "duplex").exists():
                assert (cls / "duplex").read_text() in ("full\n", "half\n", "unknown\n")
        for host in (h for h in os.listdir(d) if re.match(r"^host\d+$", h)):
            proc = root / "sys/class/scsi_host" / host / "proc_name"
            assert proc.read_text().strip() == driver_of(d), f"{addr}/{host}"
        drv = driver_of(d)
        if drv and (d / "net").is_dir():
            mod = root / "sys/module" / drv
            assert (mod / "srcversion").exists(), f"no sys/module/{drv}"
            assert re.match(r"^[0-9A-F]{23}\n$", (mod / "srcversion").read_text()), drv
    assert len(netdevs) == len(set(netdevs)) >= 2


@pytest.mark.parametrize("name", GOOD)
def test_command_index_is_replayable(name: str) -> None:
    root = HOSTS_DIR / name
    index = json.loads((root / "commands/index.json").read_text())
    assert isinstance(index, list) and index
    keys = set()
    for entry in index:
        assert set(entry) == {"argv", "rc", "stdout"}, entry
        argv = entry["argv"]
        assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
        assert "/" not in argv[0], "argv[0] is a bare command name"
        assert isinstance(entry["rc"], int)
        rel = entry["stdout"]
        assert not rel.startswith("/") and ".." not in rel.split("/")
        assert (root / rel).is_file(), f"{rel} missing"
        keys.add(tuple(argv))
    assert len(keys) == len(index), "duplicate argv"
    host, cleanup = open_host(root)
    assert cleanup is None
    for entry in index:
        res = host.run(entry["argv"])
        assert res.rc == entry["rc"]
        assert res.stdout == (root / entry["stdout"]).read_text()
    assert host.run(["ethtool", "-i", "nosuch0"]).rc == 127


@pytest.mark.parametrize("name", GOOD)
def test_ethtool_i_agrees_with_the_pci_tree(name: str) -> None:
    root = HOSTS_DIR / name
    owner = {}
    for addr, d in devices(root).items():
        for ifname in os.listdir(d / "net") if (d / "net").is_dir() else []:
            owner[ifname] = (addr, d)
    checked = 0
    for entry in json.loads((root / "commands/index.json").read_text()):
        argv = entry["argv"]
        if argv[:2] != ["ethtool", "-i"]:
            continue
        info = parse_ethtool_i((root / entry["stdout"]).read_text())
        addr, d = owner[argv[2]]
        assert info["bus-info"] == addr, argv
        assert info["driver"] == driver_of(d), argv
        assert read(root, f"sys/module/{info['driver']}/version") == info["version"] + "\n"
        checked += 1
    assert checked == len(owner), "every PCI netdev has a recorded ethtool -i"


# --------------------------------------------------------------------------- seed facts
def test_seed000_facts() -> None:
    root = HOSTS_DIR / "seed000-ustor"
    devs = devices(root)
    assert driver_of(devs["0000:02:00.0"]) == "be2net"
    assert read(root, "sys/module/be2net/version") == "4.1.307r\n"
    assert read(root, "sys/module/be2net/srcversion") == "7076CA6C80C3CD968BAFFFC\n"
    assert (root / "commands/ethtool-i-eth2.txt").read_text() == (
        "driver: be2net\nversion: 4.1.307r\nfirmware-version: 10.0.803.19\n"
        "bus-info: 0000:02:00.0\n")
    assert read(root, "sys/class/net/eth0/address") == "40:16:7e:35:c7:c2\n"
    assert read(root, "sys/class/net/eth2/speed") == "10000\n"
    assert read(root, "sys/class/net/eth3/operstate") == "down\n"
    assert (devs["0000:02:00.0"] / "revision").read_text() == "0x01\n"  # lspci -nn: rev 01
    raid = devs["0000:01:00.0"]
    assert driver_of(raid) == "megaraid_sas" and (raid / "host6").is_dir()
    assert read(root, "sys/class/scsi_host/host6/proc_name") == "megaraid_sas\n"
    mega = (root / "commands/MegaCli-AdpAllInfo-aALL-NoLog.txt").read_text()
    for line in ("Adapter #0", "Product Name    : LSI MegaRAID SAS 9260-8i",
                 "FW Package Build: 12.12.0-0124", "FW Version         : 2.130.353-1663",
                 "SubDeviceId     : 9261", "Exit Code: 0x00"):
        assert line in mega.splitlines(), line
    assert not (devs["0000:02:00.0"] / "current_link_speed").exists()  # 2.6.32 had none


def test_seed001_facts() -> None:
    root = HOSTS_DIR / "seed001-bnx2"
    devs = devices(root)
    assert [driver_of(devs[a]) for a in ("0000:01:00.0", "0000:01:00.1")] == ["bnx2", "bnx2"]
    assert read(root, "sys/class/net/eth0/address") == read(root, "sys/class/net/eth1/address")
    assert read(root, "sys/class/net/eth0/address") == "4c:b1:6c:8f:4a:bc\n"
    assert "Permanent HW addr: 4c:b1:6c:8f:4a:bd" in read(root, "proc/net/bonding/bond0")
    assert read(root, "sys/class/net/eth1/carrier") == "0\n"
    assert (root / "sys/class/net/bond0").is_dir()  # a netdev with no PCI function


def test_seed002_facts_sriov_and_domain() -> None:
    root = HOSTS_DIR / "seed002-router"
    devs = devices(root)
    pf = devs["0000:01:00.0"]
    assert read(root, "sys/module/ixgbe/version") == "5.1.0-k-rh7.6\n"
    assert read(root, "sys/module/ixgbe/srcversion") == "8A6178275DDA252CA16D17C\n"
    assert read(root, "sys/class/net/enp1s0f0/address") == "a0:36:9f:3e:c4:38\n"
    assert read(root, "sys/class/net/enp1s0f0/tx_queue_len") == "10000\n"
    assert (pf / "sriov_totalvfs").read_text() == "63\n"
    numvfs = int((pf / "sriov_numvfs").read_text())
    vfs = sorted(p for p in os.listdir(pf) if re.match(r"^virtfn\d+$", p))
    assert len(vfs) == numvfs == 2
    for link in vfs:
        vf = Path(os.path.realpath(pf / link))
        assert driver_of(vf) == "ixgbevf" and (vf / "device").read_text() == "0x1515\n"
        assert os.path.realpath(vf / "physfn") == str(pf)
        assert vf.name in devs and not (vf / "sriov_totalvfs").exists()
    assert [p for p in os.listdir(devs["0000:01:00.1"]) if p.startswith("virtfn")] == []
    wide = [a for a in devs if not a.startswith("0000:")]
    assert wide == ["10000:00:02.0", "10000:01:00.0"]
    assert driver_of(devs["10000:01:00.0"]) == "nvme"
    # RHEL 7's nvme declares MODULE_VERSION("1.0") (derived from catalogs/drivers/nvme.json)
    assert (root / "sys/module/nvme/version").read_text() == "1.0\n"
    assert "Combined:\t63" in read(root, "commands/ethtool-l-enp1s0f0.txt")
    assert "expansion-rom-version: \n" in read(root, "commands/ethtool-i-enp1s0f0.txt")


# --------------------------------------------------------------------------- pci.ids
EXPECTED_NAMES = {
    ("1000", "0079"): "MegaRAID SAS 2108 [Liberator]",
    ("19a2", "0710"): "OneConnect 10Gb NIC (be3)",
    ("8086", "10d3"): "82574L Gigabit Network Connection",
    ("8086", "1528"): "Ethernet Controller 10-Gigabit X540-AT2",
    ("8086", "1515"): "X540 Ethernet Controller Virtual Function",
    ("14e4", "1639"): "NetXtreme II BCM5709 Gigabit Ethernet",
    ("14e4", "165f"): "NetXtreme BCM5720 Gigabit Ethernet PCIe",
    ("8086", "153a"): "Ethernet Connection I217-LM",
    ("1a03", "2000"): "ASPEED Graphics Family",
    ("8086", "1c52"): "C202 Chipset LPC Controller",
    ("144d", "a804"): "NVMe SSD Controller SM961/PM961/SM963",
}
EXPECTED_SUBSYSTEMS = {
    ("1000", "0079", "1000", "9261"): "MegaRAID SAS 9260-8i",
    ("8086", "1528", "8086", "0001"): "Ethernet Converged Network Adapter X540-T2",
    ("8086", "10d3", "1043", "8369"): "Motherboard",
    ("14e4", "1639", "1028", "0235"): "PowerEdge R710 BCM5709 Gigabit Ethernet",
}
EXPECTED_VENDORS = {"8086": "Intel Corporation", "19a2": "Emulex Corporation",
                    "14e4": "Broadcom Inc. and subsidiaries", "1a03": "ASPEED Technology, Inc."}


def fixture_ids() -> List[Tuple[str, str, str, str, str]]:
    out = []
    for name in GOOD:
        for addr, d in devices(HOSTS_DIR / name).items():
            ids = [(d / f).read_text().strip()[2:] for f in
                   ("vendor", "device", "subsystem_vendor", "subsystem_device")]
            out.append((f"{name}/{addr}", *ids))
    return out


def test_every_fixture_id_is_named_in_pci_ids() -> None:
    vendors, devs, _ = load_pci_ids()
    for where, ven, dev, _sv, _sd in fixture_ids():
        assert ven in vendors, f"{where}: vendor {ven}"
        assert (ven, dev) in devs, f"{where}: {ven}:{dev} not in pci.ids"


def test_key_ids_have_the_expected_names() -> None:
    vendors, devs, subs = load_pci_ids()
    present = {(v, d) for _, v, d, _, _ in fixture_ids()}
    present_subs = {(v, d, sv, sd) for _, v, d, sv, sd in fixture_ids()}
    for key, name in EXPECTED_NAMES.items():
        assert key in present, f"{key} not used by any fixture"
        assert devs[key] == name, f"{key}: pci.ids says {devs[key]!r}"
    for key, name in EXPECTED_SUBSYSTEMS.items():
        assert key in present_subs, f"{key} not used by any fixture"
        assert subs[key] == name, f"{key}: pci.ids says {subs.get(key)!r}"
    for ven, name in EXPECTED_VENDORS.items():
        assert vendors[ven] == name
    # The be3 subsystem 10df:e70b is deliberately one pci.ids cannot name.
    assert ("19a2", "0710", "10df", "e70b") in present_subs
    assert ("19a2", "0710", "10df", "e70b") not in subs


# --------------------------------------------------------------------------- broken set
def test_broken_no_snapshot_json() -> None:
    root = BROKEN / "no-snapshot-json"
    assert (root / "sys/bus/pci/devices/0000:03:00.0/vendor").is_file()
    assert not (root / "snapshot.json").exists()
    with pytest.raises(BadInputError):
        open_host(root)


def test_broken_garbled() -> None:
    root = BROKEN / "garbled"
    raw = (root / "snapshot.json").read_bytes()
    assert raw.startswith(b'{\n "format": "hwmgr-snapshot"')
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)
    with pytest.raises(BadInputError):
        open_host(root)
    for sub in ("garbled", "garbled-sysfs"):
        dev = BROKEN / sub / "sys/bus/pci/devices/0000:02:00.0"
        for fname in ("vendor", "class", "device"):
            data = (dev / fname).read_bytes()
            assert not ID_FILES[fname].match(data.decode("latin-1")), fname
        with pytest.raises(UnicodeDecodeError):
            (dev / "vendor").read_bytes().decode("utf-8")
        with pytest.raises(UnicodeDecodeError):
            (BROKEN / sub / "commands/ethtool-i-eth2.txt").read_bytes().decode("utf-8")
    host, _ = open_host(BROKEN / "garbled-sysfs")  # valid snapshot.json: opens, then junk
    res = host.run(["ethtool", "-i", "eth2"])
    assert res.rc == 0 and "\ufffd" in res.stdout and "bus-info: 0000:02:00.0" in res.stdout


def test_broken_symlink_loops_and_escapes() -> None:
    root = BROKEN / "symlink-loop"
    devs = root / "sys/bus/pci/devices"
    for loop in (devs / "0000:00:1c.0", devs / "0000:00:1d.0", devs / "0000:00:1f.2/driver",
                 devs / "0000:00:19.0/driver"):
        assert loop.is_symlink()
        with pytest.raises(OSError) as info:
            os.stat(loop)
        assert info.value.errno == errno.ELOOP, loop
    escape = devs / "0000:66:00.0"
    assert os.readlink(escape) == "../../../../../../etc"
    assert os.path.commonpath([lexical_target(escape), str(root)]) != str(root)
    assert os.readlink(devs / "0000:77:00.0") == "/etc"
    assert not (root / "etc").exists()
    host, _ = open_host(root)
    assert host.listdir("/sys/bus/pci/devices/0000:66:00.0") == []
    assert host.listdir("/sys/bus/pci/devices/0000:77:00.0") == []
    assert host.read_attr("/sys/bus/pci/devices/0000:00:1c.0/vendor") is None
    assert host.read_attr("/sys/bus/pci/devices/0000:00:19.0/vendor") == "0x8086"


@pytest.mark.parametrize("name", ["bad-index", "missing-output", "index-escape"])
def test_broken_command_index(name: str) -> None:
    root = BROKEN / name
    assert json.loads((root / "snapshot.json").read_text())["format"] == "hwmgr-snapshot"
    index = json.loads((root / "commands/index.json").read_text())
    if name == "bad-index":
        assert isinstance(index, dict)
    elif name == "missing-output":
        assert isinstance(index, list) and (root / index[0]["stdout"]).is_file()
        assert not (root / index[1]["stdout"]).exists()
    else:
        assert ".." in index[0]["stdout"].split("/")
    with pytest.raises(BadInputError):
        open_host(root)


def test_no_fixture_directory_is_empty() -> None:
    """git does not keep empty directories: a fresh clone would silently lose them."""
    root = Path(__file__).parent / "fixtures"
    empty = [str(p) for p in root.rglob("*") if p.is_dir() and not p.is_symlink()
             and not any(p.iterdir())]
    assert not empty, empty
