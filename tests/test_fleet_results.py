"""hwmgr.fleet.results: per-host results and earlier reports read as hostile input, through
the real `fleet-report` verb where the refusal is the point (one line, exit 8, nothing
written)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from support import REPO, fleet_data, run_cli

from hwmgr.fleet.report import build_report, exit_code, schema
from hwmgr.fleet.results import load_host


def test_raw_check_envelopes_are_accepted(tmp_path: Path) -> None:
    findings = fleet_data.host_findings({"ring.rx"})
    ok = {"format_version": 1, "command": "check", "status": "ok",
          "data": fleet_data.check_data(fleet_data.host_findings(set())), "errors": []}
    drift = {**ok, "status": "drift", "data": fleet_data.check_data(findings)}
    err = {"format_version": 1, "command": "check", "status": "error", "data": None,
           "errors": ["/etc/hwmgr/catalog.json: not valid JSON"]}
    hosts = {n: load_host(v, n) for n, v in (("a", ok), ("b", drift), ("c", err))}
    assert [hosts[n]["status"] for n in "abc"] == ["compliant", "drift", "failed"]
    assert hosts["c"]["error"] == "/etc/hwmgr/catalog.json: not valid JSON"
    rep = build_report(hosts)
    jsonschema.validate(rep, schema())
    assert exit_code(rep) == 5


BAD_INPUTS = [
    ("not json", "{", "not valid JSON"),
    ("a list", "[]", "expected a JSON object"),
    ("bad status", '{"status": "fine", "check": null, "error": null}', ".status: 'fine'"),
    ("drift without check", '{"status": "drift", "check": null, "error": null}',
     "needs its check result"),
    ("bad layer", json.dumps({"status": "drift", "check": {"findings": [
        {"layer": "bios", "item": "x", "status": "drift"}]}}), ".check.findings[0].layer"),
    ("bad count", json.dumps({"status": "drift", "check": {"summary": {"drift": -1},
                                                           "findings": []}}),
     ".check.summary.drift"),
    ("other command", json.dumps({"format_version": 1, "command": "inventory", "status": "ok",
                                  "data": {}, "errors": []}), ".command: 'inventory'"),
    ("not utf-8", b"\xff\xfe{}", "not valid JSON"),
]


@pytest.mark.parametrize(("label", "content", "message"), BAD_INPUTS,
                         ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_file_is_named_and_nothing_written(tmp_path: Path, label: str,
                                                     content: str | bytes, message: str) -> None:
    results = tmp_path / "results"
    fleet_data.write_results(results)
    bad = results / "zz-bad.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    res = run_cli("fleet-report", "--results", str(results), "--out", str(tmp_path / "out"))
    assert res.returncode == 8, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and message in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


def test_bad_history_file_and_empty_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    fleet_data.write_results(results)
    hist = tmp_path / "old.json"
    hist.write_text(json.dumps({"format_version": 3, "generated": "x", "summary": {}}))
    res = run_cli("fleet-report", "--results", str(results), "--out", str(tmp_path / "out"),
                "--history", str(hist))
    assert res.returncode == 8 and str(hist) in res.stderr and "format_version 3" in res.stderr
    assert not (tmp_path / "out").exists()
    (tmp_path / "empty").mkdir()
    res = run_cli("fleet-report", "--results", str(tmp_path / "empty"), "--out", str(tmp_path))
    assert res.returncode == 8 and "no per-host result files" in res.stderr
    res = run_cli("fleet-report", "--results", str(results), "--out", str(results))
    assert res.returncode == 2 and "--out must differ" in res.stderr
    assert not (results / "fleet-report.json").exists()


def test_batch_check_output_is_a_results_file(tmp_path: Path) -> None:
    hosts_dir = REPO / "tests" / "fixtures" / "hosts"
    res = run_cli("check", "--json", "--root", str(hosts_dir / "seed002-before"),
                "--root", str(hosts_dir / "seed002-after"), "--root", str(hosts_dir / "broken"))
    (tmp_path / "snapshots.json").write_text(res.stdout)
    res = run_cli("fleet-report", "--results", str(tmp_path / "snapshots.json"),
                "--out", str(tmp_path / "o"), "--json")
    assert res.returncode == 5, res.stderr
    rep = json.loads((tmp_path / "o" / "fleet-report.json").read_text())
    assert {n: h["status"] for n, h in rep["hosts"].items()} == {
        "seed002-before": "drift", "seed002-after": "compliant", "broken": "failed"}
    single = tmp_path / "one.json"
    single.write_text(run_cli("check", "--json", "--root", str(hosts_dir / "seed002-after")).stdout)
    res = run_cli("fleet-report", "--results", str(single), "--out", str(tmp_path / "o3"))
    assert res.returncode == 8 and "<host>.json" in res.stderr
