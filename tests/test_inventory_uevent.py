"""A PCI function's uevent: one read instead of five ID files and the driver link; a
hostile one is ignored whole (and noted), a well-formed one wins over disagreeing files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli
from test_inventory import synth_module

from hwmgr.host.seam import Recorder
from hwmgr.host.snapshot import open_host
from hwmgr.inventory.scan import Inventory
from hwmgr.inventory.uevent import MAX_UEVENT, parse_pci_uevent

ADDR = "0000:03:00.0"
KERNEL = ("DRIVER=ixgbe\nPCI_CLASS=20000\nPCI_ID=8086:1528\nPCI_SUBSYS_ID=8086:0001\n"
          f"PCI_SLOT_NAME={ADDR}\nMODALIAS=pci:v00008086d00001528sv00008086sd00000001"
          "bc02sc00i00")
PF = "sys/bus/pci/devices/0000:10:00.0"  # the first PF of bench/synth.py's tree


def test_the_kernels_uevent_parses() -> None:
    got, why = parse_pci_uevent(KERNEL, ADDR)
    assert why is None
    assert got == {"vendor": "8086", "device": "1528", "subsystem_vendor": "8086",
                   "subsystem_device": "0001", "class": "020000", "driver": "ixgbe",
                   "modalias": "pci:v00008086d00001528sv00008086sd00000001bc02sc00i00"}


def test_no_driver_line_means_unbound_and_no_modalias_is_left_out() -> None:
    text = "\n".join(ln for ln in KERNEL.split("\n")
                     if not ln.startswith(("DRIVER=", "MODALIAS=")))
    got, why = parse_pci_uevent(text.replace(ADDR, "0000:0A:00.0"), "0000:0a:00.0")
    assert why is None and got is not None
    assert got["driver"] is None and "modalias" not in got
    got, _ = parse_pci_uevent(text + "\nNEW_KEY=anything at all", ADDR)
    assert got is not None  # keys a newer kernel adds are allowed and ignored


@pytest.mark.parametrize("text, why", [
    ("x" * (MAX_UEVENT + 1), f"over {MAX_UEVENT} bytes"),
    (KERNEL + "\ngarbage", "line 7 is not KEY=VALUE"),
    (KERNEL + "\n\nA=b", "line 7 is not KEY=VALUE"),
    ("lower=case\n" + KERNEL, "line 1 is not KEY=VALUE"),
    (KERNEL + "\nPCI_ID=8086:1528", "PCI_ID repeated"),
    (KERNEL.replace("PCI_ID=8086:1528\n", ""), "no PCI_ID"),
    (KERNEL.replace("8086:1528", "8086:15289"), "PCI_ID is not XXXX:XXXX"),
    (KERNEL.replace("8086:0001", "zz:0001"), "PCI_SUBSYS_ID is not XXXX:XXXX"),
    (KERNEL.replace("PCI_CLASS=20000", "PCI_CLASS=2"), "PCI_CLASS is not 4 to 6 hex digits"),
    (KERNEL.replace(f"SLOT_NAME={ADDR}", "SLOT_NAME=0000:04:00.0"),
     "PCI_SLOT_NAME names another function"),
    (KERNEL.replace("DRIVER=ixgbe", "DRIVER=ix\x1b[2Jgbe"), "DRIVER is not a driver name"),
    (KERNEL.replace("DRIVER=ixgbe", "DRIVER="), "DRIVER is not a driver name"),
    (KERNEL.replace("d00001528sv", "d00001529sv"), "MODALIAS disagrees with the IDs"),
    (KERNEL.replace("MODALIAS=pci:", "MODALIAS=usb:"), "MODALIAS disagrees with the IDs"),
])
def test_what_no_kernel_writes_is_refused_saying_why(text: str, why: str) -> None:
    assert parse_pci_uevent(text, ADDR) == (None, why)


def _tree(root: Path, *, uevent: bool = True, pfs: int = 2, vfs: int = 3) -> Path:
    synth_module().build(root, pfs, vfs, ue=uevent)
    return root


def _scan(root: Path, recorder: Recorder | None = None) -> dict:
    host, _ = open_host(str(root))
    host.recorder = recorder
    return Inventory(host).scan().to_json()


# 17 and 1,024 functions (the big tree takes ~10 s: slow)
@pytest.mark.parametrize("pfs, vfs", [(1, 16), pytest.param(64, 15, marks=pytest.mark.slow)])
def test_trees_with_and_without_uevent_give_the_same_json(
        tmp_path: Path, pfs: int, vfs: int) -> None:
    with_ue = _scan(_tree(tmp_path / "ue", pfs=pfs, vfs=vfs))
    without = _scan(_tree(tmp_path / "plain", uevent=False, pfs=pfs, vfs=vfs))
    assert json.dumps(with_ue) == json.dumps(without)
    assert len(with_ue["devices"]) == pfs * (vfs + 1) and with_ue["notes"] == []


def test_the_cli_answers_alike_with_and_without_uevent(tmp_path: Path) -> None:
    a = run_cli("inventory", "--json", "--root", str(_tree(tmp_path / "ue", pfs=1, vfs=16)))
    b = run_cli("inventory", "--json", "--root",
                str(_tree(tmp_path / "plain", uevent=False, pfs=1, vfs=16)))
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout and json.loads(a.stdout)["data"]["devices"]


def _pf(doc: dict) -> dict:
    return next(d for d in doc["devices"] if d["address"] == "0000:10:00.0")


def test_a_wellformed_uevent_wins_over_disagreeing_files(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    (root / PF / "vendor").write_text("0x14e4\n")
    (root / PF / "class").write_text("0x010400\n")
    (root / PF / "driver").unlink()  # the uevent still says DRIVER=ixgbe
    for rec in (None, Recorder()):  # the fast path and the file-by-file path agree
        dev = _pf(_scan(root, rec))
        assert (dev["vendor_id"], dev["class"], dev["pci_driver"]) == ("8086", "0200", "ixgbe")


def test_unbound_per_the_uevent_even_with_a_driver_link(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    ue = root / PF / "uevent"
    ue.write_text(ue.read_text().replace("DRIVER=ixgbe\n", ""))
    dev = _pf(_scan(root))
    assert dev["pci_driver"] is None
    assert dev["driver"] == "ixgbe"  # ethtool still names the NIC's driver


@pytest.mark.parametrize("content", [
    b"PCI_ID=8086:1528\ngarbage\n", bytes(range(256)) * 4, b"PCI_ID=1\n" * 2000,
    b"DRIVER=x\x1b]0;owned\x07\nPCI_CLASS=20000\nPCI_ID=8086:1528\nPCI_SUBSYS_ID=8086:0001\n",
])
def test_a_malformed_uevent_is_noted_and_the_files_answer(tmp_path: Path, content: bytes) -> None:
    root = _tree(tmp_path / "t")
    (root / PF / "uevent").write_bytes(content)
    (root / PF / "vendor").write_text("0x14e4\n")
    doc = _scan(root)
    dev = _pf(doc)
    assert (dev["vendor_id"], dev["pci_driver"]) == ("14e4", "ixgbe")  # files and the link
    assert len(doc["notes"]) == 1 and doc["notes"][0].startswith(f"/{PF}/uevent: ignored (")
    assert doc["notes"][0].isprintable()


def test_a_recording_host_reads_the_uevent_and_what_it_stands_in_for(tmp_path: Path) -> None:
    """So a snapshot answers this hwmgr in one read and older ones from the files."""
    rec = Recorder()
    _scan(_tree(tmp_path / "t"), rec)
    for name in ("uevent", "vendor", "device", "subsystem_vendor", "subsystem_device", "class"):
        assert f"/{PF}/{name}" in rec.files, name
    assert f"/{PF}/driver" in rec.links
    assert "uevent" in rec.dirs[f"/{PF}"]


def test_a_plain_scan_reads_no_id_file_when_the_uevent_is_there(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    for name in ("vendor", "device", "subsystem_vendor", "subsystem_device", "class"):
        (root / PF / name).write_text("0xzzzz\n")  # read, it would show as unknown
    dev = _pf(_scan(root))
    assert (dev["vendor_id"], dev["device_id"], dev["class"]) == ("8086", "1528", "0200")
