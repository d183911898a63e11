"""The check's Prometheus textfile: written through prometheus-client, parsed back with its
own parser, atomic (a reader never sees half a file), and only where the user said."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hwmgr.compliance.prom import write_prom
from hwmgr.errors import NotFoundError, UsageError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host

NOW = 1795000000.5


def sample() -> dict:
    """Check data per the contract (docs/check-report.md): drift, ok, unknown, uncatalogued,
    unsupported."""
    def f(layer: str, item: str, status: str, device: str | None = "0000:01:00.0",
          iface: str | None = "enp1s0f0") -> dict:
        return {"layer": layer, "device": device, "interface": iface, "item": item,
                "expected": 1, "actual": 0, "status": status, "reason": "r", "fix": None,
                "evidence": None}
    return {"compliant": False,
            "summary": {"ok": 2, "drift": 2, "unknown": 1, "uncatalogued": 1,
                        "unsupported": 1},
            "reboot_pending": [{"driver": "be2net", "txn": 12, "kind": "upgrade",
                                "status": "pending", "reason": "upgrade #12 ..."}],
            "catalog_version": "2026.11.0",
            "host": {"hostname": "web01", "kernel": "6.1.0-26-amd64"},
            "findings": [
                f("setting", "ring.rx", "drift"),
                f("setting", "features.tcp-segmentation-offload", "ok"),
                f("driver", "driver_version", "ok", iface=None),
                f("setting", "pause.autoneg", "unsupported"),
                f("sysctl", "sysctl.net.core.rmem_max", "drift", device=None, iface=None),
                f("firmware", "firmware_version", "unknown"),
                f("driver", "driver_version", "uncatalogued", device="0000:01:10.0",
                  iface=None),
            ]}


def samples(path: Path) -> dict[str, list]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(path.read_text()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def test_metrics_for_a_sample(tmp_path: Path) -> None:
    dest = tmp_path / "hwmgr.prom"
    assert write_prom(dest, sample(), now=NOW) == dest
    m = samples(dest)
    item = {(lab["layer"], lab["device"], lab["interface"], lab["item"]): v
            for lab, v in m["hwmgr_compliance_item"]}
    assert item == {
        ("setting", "0000:01:00.0", "enp1s0f0", "ring.rx"): 0.0,
        ("setting", "0000:01:00.0", "enp1s0f0", "features.tcp-segmentation-offload"): 1.0,
        ("driver", "0000:01:00.0", "", "driver_version"): 1.0,
        ("sysctl", "", "", "sysctl.net.core.rmem_max"): 0.0,
    }  # unknown / uncatalogued / unsupported items are neither 1 nor 0
    status = {(lab["item"], lab["status"]) for lab, v in m["hwmgr_compliance_item_status"]
              if v == 1.0}
    assert ("pause.autoneg", "unsupported") in status
    assert ("firmware_version", "unknown") in status and len(status) == 7
    assert [lab["device"] for lab, v in m["hwmgr_compliance_item_status"]
            if lab["status"] == "uncatalogued" and v == 1.0] == ["0000:01:10.0"]
    assert dict((lab["status"], v) for lab, v in m["hwmgr_compliance_items"]) == {
        "ok": 2.0, "drift": 2.0, "unknown": 1.0, "uncatalogued": 1.0, "unsupported": 1.0}
    assert m["hwmgr_compliance_drift_items"] == [({}, 2.0)]
    assert m["hwmgr_check_compliant"] == [({}, 0.0)]
    assert m["hwmgr_check_reboot_pending"] == [({}, 1.0)]
    assert m["hwmgr_catalog_info"] == [({"catalog_version": "2026.11.0"}, 1.0)]
    assert m["hwmgr_check_last_run_timestamp_seconds"] == [({}, NOW)]
    assert sorted(os.listdir(tmp_path)) == ["hwmgr.prom"]  # no temporary file left


def test_compliant_without_pending_and_hostile_labels(tmp_path: Path) -> None:
    data = {"compliant": True, "summary": {"ok": 1, "drift": 0, "unknown": 0, "unsupported": 0},
            "reboot_pending": [], "catalog_version": None,
            "findings": [{"layer": "setting", "device": None, "interface": 'e"th\n0\\',
                          "item": "mtu", "status": "ok"}, "junk", {"status": "weird"}]}
    dest = tmp_path / "x.prom"
    write_prom(dest, data, now=NOW)
    m = samples(dest)
    assert m["hwmgr_compliance_item"] == [({"layer": "setting", "device": "",
                                            "interface": 'e"th\n0\\', "item": "mtu"}, 1.0)]
    assert m["hwmgr_check_compliant"] == [({}, 1.0)]
    assert m["hwmgr_check_reboot_pending"] == [({}, 0.0)]
    assert m["hwmgr_compliance_drift_items"] == [({}, 0.0)]
    # a version-1 summary (no uncatalogued key) still gives every status its series
    assert dict((lab["status"], v) for lab, v in m["hwmgr_compliance_items"]) == {
        "ok": 1.0, "drift": 0.0, "unknown": 0.0, "uncatalogued": 0.0, "unsupported": 0.0}


@pytest.mark.heavy
def test_atomic_a_reader_sees_old_or_new_whole(tmp_path: Path) -> None:
    dest = tmp_path / "hwmgr.prom"
    big = sample()
    big["findings"] += [
        {"layer": "setting", "device": "0000:01:00.0", "interface": f"eth{i}",
         "item": "ring.rx", "status": "drift"} for i in range(3000)]
    write_prom(dest, big, now=NOW)
    whole = {dest.read_text()}
    stop = threading.Event()
    seen: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            seen.append(dest.read_text())

    t = threading.Thread(target=reader)
    t.start()
    try:
        for n in range(5):
            write_prom(dest, big, now=NOW + 1 + n)
            whole.add(dest.read_text())
    finally:
        stop.set()
        t.join()
    assert seen and set(seen) <= whole  # every read was one complete version


def test_only_where_the_user_said(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="must end in .prom"):
        write_prom(tmp_path / "hwmgr.txt", sample())
    with pytest.raises(NotFoundError, match="does not exist"):
        write_prom(tmp_path / "missing" / "hwmgr.prom", sample())
    (tmp_path / "d.prom").mkdir()
    with pytest.raises(UsageError, match="is a directory"):
        write_prom(tmp_path / "d.prom", sample())
    assert sorted(os.listdir(tmp_path)) == ["d.prom"]
    # a Host rooted elsewhere (a scratch tree standing in for the machine) confines the write
    root = tmp_path / "root"
    (root / "var/lib/node_exporter").mkdir(parents=True)
    real = write_prom("/var/lib/node_exporter/hwmgr.prom", sample(),
                      host=Host(root, SubprocessRunner()), now=NOW)
    assert real == root / "var/lib/node_exporter/hwmgr.prom" and real.is_file()



def test_numeric_expected_and_actual_limits_success_and_duration(tmp_path: Path) -> None:
    data = sample()
    data["findings"] = [
        {"layer": "setting", "device": "0000:01:00.0", "interface": "eth0", "item": "ring.rx",
         "expected": {"min": 4096, "max": 8192}, "actual": 512, "status": "drift",
         "reason": None, "fix": "ethtool -G eth0 rx 4096", "evidence": None},
        {"layer": "sysctl", "device": None, "interface": None, "item": "sysctl.net.core.rmem_max",
         "expected": 16777216, "actual": 16777216, "status": "ok", "reason": None, "fix": None,
         "evidence": None},
        {"layer": "setting", "device": "0000:01:00.0", "interface": "eth0", "item": "features.gro",
         "expected": "on", "actual": "off", "status": "drift", "reason": None, "fix": None,
         "evidence": None},
    ]
    dest = tmp_path / "hwmgr.prom"
    write_prom(dest, data, now=NOW, duration=0.25)
    m = samples(dest)
    by_item = {name: {lab["item"]: v for lab, v in m.get(name, [])}
               for name in ("hwmgr_compliance_item_expected", "hwmgr_compliance_item_actual",
                            "hwmgr_compliance_item_expected_min",
                            "hwmgr_compliance_item_expected_max")}
    assert by_item["hwmgr_compliance_item_expected"] == {"sysctl.net.core.rmem_max": 16777216}
    assert by_item["hwmgr_compliance_item_expected_min"] == {"ring.rx": 4096}
    assert by_item["hwmgr_compliance_item_expected_max"] == {"ring.rx": 8192}
    # strings (on/off) have no numeric sample: only their status says anything
    assert by_item["hwmgr_compliance_item_actual"] == {"ring.rx": 512,
                                                       "sysctl.net.core.rmem_max": 16777216}
    assert m["hwmgr_check_success"] == [({}, 1.0)]
    assert m["hwmgr_check_duration_seconds"] == [({}, 0.25)]


def test_a_failed_check_replaces_the_textfile_and_says_so(tmp_path: Path) -> None:
    import subprocess
    import sys

    dest = tmp_path / "hwmgr.prom"
    write_prom(dest, sample(), now=NOW)
    assert "hwmgr_compliance_item{" in dest.read_text()
    res = subprocess.run([sys.executable, "-m", "hwmgr", "check", "--root",
                          str(tmp_path / "gone.tar.gz"), "--prom", str(dest)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 3, res.stderr
    m = samples(dest)
    assert m["hwmgr_check_success"] == [({}, 0.0)]
    assert "hwmgr_compliance_item" not in m  # the last good run's items are gone
    [(labels, value)] = m["hwmgr_check_failure_info"]
    assert "no such snapshot" in labels["reason"] and value == 1.0
