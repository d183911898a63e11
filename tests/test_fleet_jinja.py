"""fleet/jinja.py: without Jinja2 (RHEL 8's python39 has none) fleet-report fails in one line
naming the package, exit 3, before reading or writing anything; with it the page is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli

REPO = Path(__file__).resolve().parent.parent
BLOCKED = ("import sys; sys.modules['jinja2'] = None; from hwmgr.cli import main; "
           "sys.exit(main(sys.argv[1:]))")


def _results(tmp_path: Path) -> Path:
    res = tmp_path / "results"
    res.mkdir()
    got = run_cli("check", "--root", str(REPO / "tests/fixtures/hosts/seed002-after"), "--json")
    (res / "seed002-after.json").write_text(got.stdout)
    return res


@pytest.mark.slow  # a process of its own
def test_without_jinja2_fleet_report_says_so_and_writes_nothing(tmp_path: Path) -> None:
    res, out = _results(tmp_path), tmp_path / "out"
    p = subprocess.run([sys.executable, "-c", BLOCKED, "fleet-report", "--results", str(res),
                        "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "python3-jinja2" in lines[0], p.stderr
    assert not out.exists()


def test_with_jinja2_the_page_is_written(tmp_path: Path) -> None:
    res, out = _results(tmp_path), tmp_path / "out"
    got = run_cli("fleet-report", "--results", str(res), "--out", str(out))
    assert got.returncode == 0, got.stderr
    assert "<html" in (out / "fleet-report.html").read_text()
