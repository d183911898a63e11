"""Inventory on live and snapshot hosts: §5 JSON keys, verdicts, SR-IOV, RAID, bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from support import HOSTS, python_runs_as_nobody, run_cli, run_json

from hwmgr.host.snapshot import open_host
from hwmgr.inventory.scan import Inventory, parse_ethtool_i

SECTION5 = ["address", "vendor_id", "device_id", "subsystem_vendor_id", "subsystem_device_id",
            "class", "vendor_name", "device_name", "driver", "driver_version",
            "firmware_version", "interfaces", "catalog"]
FIXTURES = sorted(p.name for p in HOSTS.iterdir() if (p / "snapshot.json").is_file())


def inventory(root: Path | str | None = None, *extra: str) -> dict:
    args = ["inventory", *extra] + (["--root", str(root)] if root else [])
    rc, doc = run_json(*args)
    assert rc == 0, doc
    assert doc["format_version"] == 1 and doc["command"] == "inventory"
    assert doc["status"] == "ok" and doc["errors"] == []
    return doc["data"]


@pytest.mark.parametrize("name", [*FIXTURES, "live"])
def test_section5_keys_hold(name: str) -> None:
    data = inventory(None if name == "live" else HOSTS / name)
    assert set(data["host"]) >= {"hostname", "kernel"}
    assert data["devices"], "every fixture has PCI functions"
    for dev in data["devices"]:
        missing = [k for k in SECTION5 if k not in dev]
        assert not missing, (dev["address"], missing)
        for k in SECTION5:
            if k not in ("interfaces", "catalog"):
                assert dev[k] is None or isinstance(dev[k], str), (k, dev[k])
        assert isinstance(dev["interfaces"], list)
        assert re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", dev["address"])
        cat = dev["catalog"]
        assert cat is None or (set(cat) >= {"entry", "status", "recommended_version"}
                               and cat["status"] in ("ok", "outdated", "known-bad",
                                                     "uncatalogued", "unknown"))


def _dev(data: dict, addr: str) -> dict:
    return next(d for d in data["devices"] if d["address"] == addr)


def test_seed000_be3_is_known_bad_with_vendor_driver_recommended() -> None:
    data = inventory(HOSTS / "seed000-ustor")
    assert data["host"] == {"hostname": "Ustor", "kernel": "2.6.32-279.el6.x86_64"}
    for addr, iface in (("0000:02:00.0", "eth2"), ("0000:02:00.1", "eth3")):
        be3 = _dev(data, addr)
        assert (be3["vendor_id"], be3["device_id"], be3["class"]) == ("19a2", "0710", "0200")
        assert be3["driver"] == "be2net" and be3["driver_version"] == "4.1.307r"
        assert be3["firmware_version"] == "10.0.803.19"
        assert be3["interfaces"] == [iface]
        assert be3["device_name"] == "OneConnect 10Gb NIC (be3)"
        assert be3["catalog"]["entry"] == "be2net"
        assert be3["catalog"]["status"] == "known-bad"
        assert be3["catalog"]["recommended_version"] == "10.2.470.14"
        assert "100 MB/s" in be3["catalog"]["reason"]
    eth2 = next(i for i in data["interfaces"] if i["name"] == "eth2")
    assert (eth2["speed_mbps"], eth2["operstate"], eth2["bus_info"]) == (10000, "up",
                                                                          "0000:02:00.0")
    raid = _dev(data, "0000:01:00.0")
    assert (raid["vendor_id"], raid["device_id"], raid["driver"]) == ("1000", "0079",
                                                                      "megaraid_sas")
    assert raid["firmware_version"] and raid["firmware_source"] == "MegaCli"
    assert raid["class"] == "0104" and raid["scsi_hosts"]


def test_human_table_shows_the_verdict() -> None:
    res = run_cli("inventory", "--root", str(HOSTS / "seed000-ustor"))
    assert res.returncode == 0
    assert "known-bad [1]" in res.stdout and "OneConnect" in res.stdout
    assert "[1] be2net 4.1.307r is known-bad (recommended: 10.2.470.14)" in res.stdout
    assert "MegaRAID SAS 2108" in res.stdout  # storage controllers are listed with the NICs


def test_seed002_sriov_domains_and_in_kernel_version() -> None:
    data = inventory(HOSTS / "seed002-router")
    pf = _dev(data, "0000:01:00.0")
    assert pf["sriov"]["totalvfs"] == 63 and pf["sriov"]["numvfs"] == 2
    assert pf["sriov"]["vfs"] == ["0000:01:10.0", "0000:01:10.2"]
    assert pf["driver_version"] == "5.1.0-k-rh7.6"
    vf = _dev(data, "0000:01:10.0")
    assert vf["physfn"] == "0000:01:00.0" and vf["driver"] == "ixgbevf"
    domains = {d["domain"] for d in data["devices"]}
    assert "10000" in domains, "functions outside domain 0000 are listed"
    assert pf["pcie_link"] and pf["pcie_link"]["width"]
    q = inventory(HOSTS / "seed002-router", "--class", "02")
    assert {d["class"] for d in q["devices"]} == {"0200"}


def test_seed001_unknown_speed_values_are_null() -> None:
    data = inventory(HOSTS / "seed001-bnx2")
    speeds = {i["name"]: i["speed_mbps"] for i in data["interfaces"]}
    assert all(s is None or 10 <= s <= 400000 for s in speeds.values()), speeds
    bnx2 = [d for d in data["devices"] if d["driver"] == "bnx2"]
    assert bnx2 and all(d["device_id"] == "1639" for d in bnx2)


def test_missing_ethtool_falls_back_to_sysfs_module_version(tmp_path: Path) -> None:
    snap = tmp_path / "s"
    shutil.copytree(HOSTS / "seed000-ustor", snap, symlinks=True)
    shutil.rmtree(snap / "commands")  # as if ethtool/MegaCli were not installed
    data = inventory(snap)
    be3 = _dev(data, "0000:02:00.0")
    assert be3["driver_version"] == "4.1.307r" and be3["driver_version_source"] == "sysfs"
    assert be3["firmware_version"] is None  # only ethtool knows it: unknown, not invented
    assert _dev(data, "0000:01:00.0")["firmware_version"] is None
    assert be3["catalog"]["status"] == "known-bad"


def test_nothing_known_is_unknown_not_invented(tmp_path: Path) -> None:
    snap = tmp_path / "s"
    shutil.copytree(HOSTS / "seed000-ustor", snap, symlinks=True)
    shutil.rmtree(snap / "commands")
    shutil.rmtree(snap / "sys/module")
    be3 = _dev(inventory(snap), "0000:02:00.0")
    assert be3["driver_version"] is None and be3["driver_version_source"] is None
    assert be3["catalog"]["status"] == "unknown"


@pytest.mark.parametrize("broken", sorted(p.name for p in (HOSTS / "broken").iterdir()
                                          if p.is_dir()))
def test_broken_snapshots_fail_cleanly(broken: str) -> None:
    res = run_cli("inventory", "--root", str(HOSTS / "broken" / broken), "--json")
    assert res.returncode in (0, 8), res.stderr
    assert "Traceback" not in res.stderr
    doc = json.loads(res.stdout)
    if res.returncode == 8:
        assert doc["status"] == "error" and len(doc["errors"]) == 1
        assert len(res.stderr.strip().splitlines()) == 1
    else:
        for dev in doc["data"]["devices"]:
            assert dev["vendor_id"] is None or re.fullmatch(r"[0-9a-f]{4}", dev["vendor_id"])


@pytest.mark.skipif(not python_runs_as_nobody(), reason="this Python cannot start as nobody")
def test_non_root_live_inventory_works(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    import subprocess

    res = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
         str(Path(os.sys.executable)), "-m", "hwmgr", "inventory", "--json"],
        capture_output=True, text=True, cwd=Path(__file__).parent.parent, check=False,
        env={**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["data"]["devices"]


@pytest.mark.skipif(not python_runs_as_nobody(), reason="this Python cannot start as nobody")
def test_non_root_cannot_upgrade(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    import subprocess

    res = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
         str(Path(os.sys.executable)), "-m", "hwmgr", "upgrade", "be2net", "--to",
         "10.2.470.14", "--yes"],
        capture_output=True, text=True, cwd=Path(__file__).parent.parent, check=False,
        env={**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)})
    assert res.returncode == 13 and "must run as root" in res.stderr


def test_ethtool_parser_keeps_unknowns_null() -> None:
    got = parse_ethtool_i("driver: be2net\nversion: 4.1.307r \nfirmware-version: \n"
                          "expansion-rom-version:\nbus-info: 0000:02:00.0\njunk line\n")
    assert got == {"driver": "be2net", "version": "4.1.307r", "firmware-version": None,
                   "expansion-rom-version": None, "bus-info": "0000:02:00.0"}


def test_scan_api_on_snapshot_without_names() -> None:
    host, _ = open_host(HOSTS / "seed000-ustor")
    scan = Inventory(host).scan()
    assert all(d["vendor_name"] is None for d in scan.devices)  # no names db given
    assert len(scan.devices) == 17


def test_live_inventory_without_ethtool_on_path() -> None:
    """No ethtool (or any tool) on PATH: NIC versions become unknown, nothing crashes."""
    rc, doc = run_json("inventory", env={"PATH": "/nonexistent"})
    assert rc == 0, doc
    data = doc["data"]
    assert data["devices"]
    for iface in data["interfaces"]:
        assert iface["driver"] is None and iface["firmware_version"] is None
        assert iface["name"] and iface["address"]  # sysfs still tells these
    for dev in data["devices"]:
        assert dev["driver_version_source"] in (None, "sysfs")


def synth_module():  # noqa: ANN201 - bench/synth.py, loaded from its file
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "synth", Path(__file__).resolve().parent.parent / "bench" / "synth.py")
    assert spec and spec.loader
    synth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(synth)
    return synth


def _synthetic(root: Path, uevent: bool = True) -> Path:
    """bench/synth.py's tree (PFs with SR-IOV VFs), small: 2 PFs x 3 VFs."""
    assert synth_module().build(root, 2, 3, ue=uevent) == 8
    return root


@pytest.mark.parametrize("name", [*FIXTURES, "synthetic", "synthetic-no-uevent"])
def test_fast_paths_give_the_plain_readers_answers(name: str, tmp_path: Path) -> None:
    """One-pass attribute reads, names once per ID tuple and verdicts once per kind of device
    give exactly what per-file reads, fresh look-ups and a verdict per device give."""
    from hwmgr.catalog.load import load_catalog
    from hwmgr.catalog.pciids import PciNames
    from hwmgr.config import config_from
    from hwmgr.host.seam import Recorder

    root = (_synthetic(tmp_path / "t", name == "synthetic") if name.startswith("synthetic")
            else HOSTS / name)
    cat = load_catalog([Path(__file__).resolve().parent.parent / "catalogs"],
                       config=config_from(None))
    names = PciNames()
    fast_host, _ = open_host(str(root))
    fast = Inventory(fast_host, names=names, verdict=cat.verdict).scan().to_json()
    plain_host, _ = open_host(str(root))
    plain_host.recorder = Recorder()  # a recording host reads file by file (read_attr)
    plain = Inventory(plain_host, names=names).scan().to_json()
    assert len(fast["devices"]) == len(plain["devices"]) > 0
    for f, p in zip(fast["devices"], plain["devices"]):
        assert f["catalog"] == cat.verdict(p, fast["host"]["kernel"])
        assert {**f, "catalog": None} == p
        assert f["device_name"] == (names.device(p["vendor_id"], p["device_id"])
                                    if p["vendor_id"] and p["device_id"] else None)
    assert fast["interfaces"] == plain["interfaces"]
    if name.startswith("synthetic"):
        pfs = [d for d in fast["devices"] if d["sriov"]]
        assert len(pfs) == 2 and pfs[0]["catalog"] == pfs[1]["catalog"] is not None
        assert pfs[0]["catalog"] is not pfs[1]["catalog"]  # each device its own copy
