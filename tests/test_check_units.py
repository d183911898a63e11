"""contrib/systemd/hwmgr-check.{service,timer}: valid for systemd, daily, drift not a failure."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parent.parent / "contrib" / "systemd"


def unit(name: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    cp.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    cp.read_string((UNITS / name).read_text())
    return cp


def test_timer_is_daily_spread_and_catches_up() -> None:
    t = unit("hwmgr-check.timer")["Timer"]
    assert t["OnCalendar"] == "daily" and t["Persistent"] == "true"
    assert t["RandomizedDelaySec"]
    assert unit("hwmgr-check.timer")["Install"]["WantedBy"] == "timers.target"


def test_service_runs_the_check_idle_and_drift_is_success() -> None:
    s = unit("hwmgr-check.service")["Service"]
    assert s["Type"] == "oneshot"
    assert s["ExecStart"].split() == [
        "/usr/bin/hwmgr", "check", "--prom", "/var/lib/node_exporter/textfile_collector/hwmgr.prom"]
    assert set(s["SuccessExitStatus"].split()) == {"5", "7", "11"}
    assert s["IOSchedulingClass"] == "idle" and int(s["Nice"]) > 0


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")
def test_systemd_analyze_verify_is_clean(tmp_path: Path) -> None:
    """Verified as shipped except ExecStart, which points at a stand-in hwmgr (systemd checks
    the binary exists). Warnings such as unknown keys fail the test, not only errors."""
    fake = tmp_path / "hwmgr"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    for name in ("hwmgr-check.service", "hwmgr-check.timer"):
        (tmp_path / name).write_text((UNITS / name).read_text().replace("/usr/bin/hwmgr",
                                                                        str(fake)))
    res = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "hwmgr-check.service"),
                          str(tmp_path / "hwmgr-check.timer")], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0 and not res.stderr.strip() and not res.stdout.strip(), (
        res.stdout + res.stderr)
