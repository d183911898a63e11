"""`hwmgr check --root A --root B` / `--roots-from`: many snapshots in one process, a result
per host, each host's own outcome kept (a snapshot that cannot be opened fails only itself)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOSTS = REPO / "tests" / "fixtures" / "hosts"


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hwmgr", "check", *args], cwd=REPO,
                          capture_output=True, text=True, check=False)


def test_batch_keeps_each_hosts_outcome(tmp_path: Path) -> None:
    res = check("--json", "--root", str(HOSTS / "seed002-before"),
                "--root", str(HOSTS / "seed002-after"), "--root", str(HOSTS / "broken"),
                "--root", str(tmp_path / "gone.tar.gz"))
    assert res.returncode == 5, res.stderr  # drift outranks the hosts not checked
    hosts = json.loads(res.stdout)["data"]["hosts"]
    assert list(hosts) == ["seed002-before", "seed002-after", "broken", "gone"]
    assert hosts["seed002-before"]["status"] == "drift"
    assert hosts["seed002-before"]["check"]["summary"]["drift"] == 14
    assert hosts["seed002-after"]["status"] == "compliant"
    assert hosts["seed002-after"]["rc"] == 0
    assert hosts["broken"]["status"] == "failed" and "snapshot.json" in hosts["broken"]["error"]
    assert hosts["gone"]["rc"] == 3 and hosts["gone"]["check"] is None
    single = json.loads(check("--json", "--root", str(HOSTS / "seed002-before")).stdout)
    assert single["data"]["findings"] == hosts["seed002-before"]["check"]["findings"]


def test_manifest_lines_and_json(tmp_path: Path) -> None:
    (tmp_path / "m.txt").write_text(f"# site a\nweb01 {HOSTS / 'seed002-after'}\n\n"
                                    f"web02 {HOSTS / 'seed002-after'}\n")
    res = check("--roots-from", str(tmp_path / "m.txt"))
    assert res.returncode == 0, res.stderr
    assert "web01: compliant" in res.stdout and "2 snapshots: 2 compliant" in res.stdout
    (tmp_path / "snap").symlink_to(HOSTS / "broken")
    (tmp_path / "m.json").write_text(json.dumps({"db01": "snap"}))  # relative to the manifest
    res = check("--roots-from", str(tmp_path / "m.json"), "--json")
    assert res.returncode == 6
    assert json.loads(res.stdout)["data"]["hosts"]["db01"]["status"] == "failed"


def test_bad_manifest_and_twice_named_host(tmp_path: Path) -> None:
    (tmp_path / "m.txt").write_text("web01\n")
    res = check("--roots-from", str(tmp_path / "m.txt"))
    assert res.returncode == 8 and "m.txt:1: expected 'HOST SNAPSHOT'" in res.stderr
    assert "Traceback" not in res.stderr
    res = check("--root", str(HOSTS / "seed002-after"), "--root", str(HOSTS / "seed002-after"))
    assert res.returncode == 2 and "named twice" in res.stderr
    res = check("--root", "a", "--root", "b", "--prom", str(tmp_path / "x.prom"))
    assert res.returncode == 2 and "fleet-report --prom" in res.stderr
