"""Build a synthetic host snapshot with many PCI functions (PFs with SR-IOV VFs) for benches.

Each function also gets a 64-byte `config` file so pciutils' lspci can read the same tree
(`lspci -A linux-sysfs -O sysfs.path=TREE/sys/bus/pci`); hwmgr itself never reads `config`.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from hwmgr.catalog.load import load_catalog
from hwmgr.config import config_from

PF = ("8086", "1528", "8086", "0001", "020000", "01", "ixgbe", "5.1.0-k")
VF = ("8086", "1515", "8086", "0001", "020000", "01", "ixgbevf", "4.1.0-k")


def _config(vendor: str, device: str, svendor: str, sdevice: str, cls: str, rev: str) -> bytes:
    head = struct.pack("<HHHHB", int(vendor, 16), int(device, 16), 0x0406, 0x0010, int(rev, 16))
    head += bytes([int(cls[4:6], 16), int(cls[2:4], 16), int(cls[0:2], 16), 0, 0, 0, 0])
    head += b"\0" * 24 + b"\0" * 4
    head += struct.pack("<HH", int(svendor, 16), int(sdevice, 16))
    return head.ljust(64, b"\0")


def uevent(addr: str, spec: tuple[str, ...]) -> str:
    """The function's `uevent` as the kernel writes it (dev_uevent + pci_uevent)."""
    vendor, device, svendor, sdevice, cls, _, driver, _ = (s.upper() for s in spec)
    return (
        f"DRIVER={spec[6]}\nPCI_CLASS={int(cls, 16):04X}\nPCI_ID={vendor}:{device}\n"
        f"PCI_SUBSYS_ID={svendor}:{sdevice}\nPCI_SLOT_NAME={addr}\n"
        f"MODALIAS=pci:v0000{vendor}d0000{device}sv0000{svendor}sd0000{sdevice}"
        f"bc{cls[0:2]}sc{cls[2:4]}i{cls[4:6]}\n"
    )


def _function(root: Path, addr: str, spec: tuple[str, ...], ifname: str, ue: bool) -> Path:
    vendor, device, svendor, sdevice, cls, rev, driver, _ = spec
    d = root / "sys/bus/pci/devices" / addr
    d.mkdir(parents=True)
    for name, value in (
        ("vendor", f"0x{vendor}"), ("device", f"0x{device}"),
        ("subsystem_vendor", f"0x{svendor}"), ("subsystem_device", f"0x{sdevice}"),
        ("class", f"0x{cls}"), ("revision", f"0x{rev}"), ("numa_node", "0"),
        ("current_link_speed", "5.0 GT/s PCIe"), ("current_link_width", "8"),
    ):
        (d / name).write_text(value + "\n")
    if ue:
        (d / "uevent").write_text(uevent(addr, spec))
    (d / "config").write_bytes(_config(vendor, device, svendor, sdevice, cls, rev))
    os.symlink(f"../../../bus/pci/drivers/{driver}", d / "driver")
    (d / "net" / ifname).mkdir(parents=True)
    n = root / "sys/class/net" / ifname
    n.mkdir(parents=True)
    for name, value in (("address", "a0:36:9f:3e:c4:38"), ("mtu", "1500"), ("speed", "10000"),
                        ("duplex", "full"), ("operstate", "up"), ("tx_queue_len", "1000")):
        (n / name).write_text(value + "\n")
    return d


def build(root: Path, pfs: int = 64, vfs_per_pf: int = 15, ue: bool = True) -> int:
    """Write the tree under `root`; returns the number of PCI functions. `ue=False` leaves
    out the `uevent` files, like snapshots taken before hwmgr read them."""
    index, count = [], 0
    (root / "commands").mkdir(parents=True)
    for i in range(pfs):
        bus, dom = 0x10 + i % 240, 2 * (i // 240)  # PFs on even domains, their VFs on odd
        pf_addr = f"{dom:04x}:{bus:02x}:00.0"
        pf = _function(root, pf_addr, PF, f"p{i}", ue)
        (pf / "sriov_totalvfs").write_text("63\n")
        (pf / "sriov_numvfs").write_text(f"{vfs_per_pf}\n")
        specs = [(pf_addr, PF, f"p{i}")]
        for v in range(vfs_per_pf):
            vf_addr = f"{dom + 1:04x}:{bus:02x}:{0x10 + v // 8:02x}.{v % 8}"
            vf = _function(root, vf_addr, VF, f"p{i}v{v}", ue)
            os.symlink(f"../{vf_addr}", pf / f"virtfn{v}")
            os.symlink(f"../{pf_addr}", vf / "physfn")
            specs.append((vf_addr, VF, f"p{i}v{v}"))
        for addr, spec, ifname in specs:
            out = f"commands/ethtool-i-{ifname}.txt"
            (root / out).write_text(
                f"driver: {spec[6]}\nversion: {spec[7]}\nfirmware-version: 0x800003df\n"
                f"bus-info: {addr}\n"
            )
            index.append({"argv": ["ethtool", "-i", ifname], "rc": 0, "stdout": out})
            count += 1
    (root / "commands/index.json").write_text(json.dumps(index))
    for m, ver in (("ixgbe", PF[7]), ("ixgbevf", VF[7])):
        (root / "sys/module" / m).mkdir(parents=True)
        (root / "sys/module" / m / "version").write_text(ver + "\n")
    (root / "snapshot.json").write_text(json.dumps({
        "format": "hwmgr-snapshot", "version": 1, "hostname": "synthetic",
        "kernel": "3.10.0-957.5.1.el7.x86_64", "captured": "2026-11-21T00:00:00Z"}))
    return count


def big_catalog(dest: Path, shipped: Path, rules: int = 3_000) -> int:
    """Write the shipped catalog (a directory, merged into one file) plus one driver with
    `rules` subsystem rules; returns the number of device rules in the file (shipped ones
    included)."""
    data = json.loads(json.dumps(load_catalog([shipped], config=config_from(None)).doc))
    template = data["drivers"]["ixgbe"]
    devices = [
        {"vendor": "1d6c", "device": f"{0x1000 + i // 1000:04x}", "subvendor": "1d6c",
         "subdevice": f"{i % 1000:04x}", "name": f"Synthetic adapter {i}"}
        for i in range(rules)
    ]
    data["drivers"]["synthnic"] = {
        "version_scheme": template["version_scheme"],
        "description": f"synthetic driver for benches ({rules:,} subsystem rules)",
        "versions": {"1.0.0": {"status": "recommended", "reason": "bench",
                               "evidence": [{"title": "bench/synth.py", "kind": "lab",
                                             "observed": "synthetic"}]}},
        "devices": devices,
    }
    dest.write_text(json.dumps(data, indent=1))
    return sum(len(d["devices"]) for d in data["drivers"].values())
