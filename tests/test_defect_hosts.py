"""The catalog against hosts built from public bug reports, bug-fix tables and CVE records
(tests/fixtures/defects/: each host runs a driver version or kernel build with a documented
defect, its twin the documented fix; built from the sources, not from the catalog).

Held: at least 70 % of the hosts are flagged known-bad or outdated; a target the verdict
names is at or past the documented fix; no twin is flagged by an issue that its own fix
closes (the fix is honoured), and no twin is known-bad. A twin may still be `outdated` by a
later documented defect (the catalog names it); known-bad needs a source that ties the
twin's very build to a serious defect (docs/known-issues.md, "Known-bad or outdated").
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hwmgr.catalog import kbuild, versions
from hwmgr.catalog.load import Catalog, load_catalog
from hwmgr.config import config_from
from hwmgr.host.snapshot import open_host
from hwmgr.inventory.scan import Inventory

REPO = Path(__file__).resolve().parent.parent
DEFECTS = REPO / "tests" / "fixtures" / "defects"
HOSTS = sorted(p.parent for p in DEFECTS.glob("*/expect.json"))
FLAGS = ("known-bad", "outdated")


def verdicts(cat: Catalog, snap: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(device, verdict) of every function with a driver version and a verdict."""
    host, cleanup = open_host(str(snap))
    try:
        scan = Inventory(host, verdict=cat.verdict).scan()
    finally:
        if cleanup:
            cleanup()
    return [(d, d["catalog"]) for d in scan.devices if d.get("driver_version") and d["catalog"]]


def at_or_past(target: str, fixed: str, scheme: str) -> bool:
    """target >= fixed, on the kernel's upstream or an Ubuntu line, or in the driver's scheme."""
    for line in (kbuild.UPSTREAM, *kbuild.UBUNTU_LINES):
        if kbuild.valid(line, target) and kbuild.valid(line, fixed):
            return kbuild.compare(line, target, fixed) >= 0
    return versions.compare(target, fixed, scheme) >= 0


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog([REPO / "catalogs"], config=config_from(None))


def test_there_are_defect_hosts_with_twins() -> None:
    assert len(HOSTS) >= 20
    for h in HOSTS:
        exp = json.loads((h / "expect.json").read_text())
        assert (DEFECTS / exp["twin"] / "snapshot").is_dir(), h
        assert exp["source"].startswith("https://"), h
        assert (h / "README.md").is_file()


def test_defect_hosts_are_flagged_and_twins_are_not_known_bad(cat: Catalog) -> None:
    flagged, rows, twins_later, twins_bad = 0, [], [], []
    for h in HOSTS:
        exp = json.loads((h / "expect.json").read_text())
        got = [v for d, v in verdicts(cat, h / "snapshot") if d["driver"] == exp["driver"]]
        assert got, f"{h.name}: no verdict on {exp['driver']}"
        hit = [v for v in got if v["status"] in FLAGS]
        flagged += bool(hit)
        scheme = cat.entry(got[0]["entry"])["version_scheme"]
        # the issues the documented fix closes, where the catalog states that very fix
        closing = {r["id"] for v in hit for r in v["known_issues"] if r["fixed"] == exp["fixed"]}
        for v in hit:
            if closing:
                assert v.get("target") and at_or_past(v["target"], exp["fixed"], scheme), \
                    (h.name, v)
        rows.append((h.name, [v["status"] for v in got]))
        for d, v in verdicts(cat, DEFECTS / exp["twin"] / "snapshot"):
            if d["driver"] != exp["driver"]:
                continue
            ids = {r["id"] for r in v.get("known_issues", [])}
            assert not ids & closing, (exp["twin"], ids & closing)  # the fix is honoured
            if v["status"] == "known-bad":
                twins_bad.append((exp["twin"], v["reason"]))
            elif v["status"] == "outdated":
                twins_later.append((exp["twin"], v["known_issues"][0]["id"]))
    share = flagged / len(HOSTS)
    print(f"flagged {flagged} of {len(HOSTS)} defect hosts ({share:.0%}); twins outdated by a "
          f"later documented defect: {len(twins_later)} {twins_later}")
    assert share >= 0.7, rows
    assert not twins_bad, twins_bad


@pytest.mark.slow
def test_committed_snapshots_equal_a_regeneration() -> None:
    """The snapshots are generated from host.json (never hand-edited), and every
    expect.json names a twin of the same device and driver."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, str(DEFECTS / "make_defect_hosts.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.heavy
def test_fleet_report_and_metrics_name_the_known_issues(tmp_path: Path) -> None:
    """A night over two defect hosts and a fixed twin: the report and the fleet metrics carry
    each known issue as an item, drifting on the hosts that run into it."""
    import subprocess
    import sys

    res_dir = tmp_path / "results"
    res_dir.mkdir()
    hosts = ["ena-2.9.1-admin-timeout-crash", "smartpqi-cve-2024-26742-deb12",
             "ixgbe-6.2.6-vf-link-speed-fixed"]
    for h in hosts:
        out = subprocess.run([sys.executable, "-m", "hwmgr", "check", "--json", "--layer",
                              "driver,firmware", "--root", str(DEFECTS / h / "snapshot")],
                             capture_output=True, text=True, timeout=120)
        (res_dir / f"{h}.json").write_text(out.stdout)
    rep = subprocess.run([sys.executable, "-m", "hwmgr", "fleet-report", "--results",
                          str(res_dir), "--out", str(tmp_path / "rep"), "--prom",
                          str(tmp_path / "fleet.prom")], capture_output=True, text=True,
                         timeout=120)
    assert rep.returncode == 5, rep.stderr
    data = json.loads((tmp_path / "rep" / "fleet-report.json").read_text())
    pqi = data["hosts"]["smartpqi-cve-2024-26742-deb12"]
    items = {f["item"]: f["status"] for f in pqi["findings"]}
    assert items["known_issue.CVE-2024-26742"] == "drift"
    assert data["hosts"]["ixgbe-6.2.6-vf-link-speed-fixed"]["status"] == "compliant"
    prom = (tmp_path / "fleet.prom").read_text()
    assert 'item="known_issue.CVE-2024-26742"' in prom


def test_the_check_table_says_what_each_known_issue_is() -> None:
    """A known issue's row says its id, severity, symptom and fix version; the command that
    gets past them all is the driver's, listed once under "To fix"."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "hwmgr", "check", "--layer", "driver",
                          "--root", str(DEFECTS / "mlnx-ofed-5.8-recovery-teardown-crash" /
                                        "snapshot")],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "160"})
    assert res.returncode == 5, res.stderr
    flat = " ".join(res.stdout.split())
    assert "mlx5_core-3484175 (crash): Health recovery" in flat
    assert "fixed in 5.8-3.0.7" in flat and ".;" not in flat
    fixes = res.stdout.split("To fix:")[1].split("\n\n")[0].strip().splitlines()
    assert fixes == ["install mlx5_core 5.8-3.0.7 or later from the vendor (the catalog has "
                     "no verified source for it)"], fixes
