"""Known-bad kernel log signatures: the matcher on real lines from public bug reports
(tests/fixtures/kernellog/README.md cites each), hostile log text, and the `check` item."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import run_cli

from hwmgr.catalog import kernellog

FIX = Path(__file__).resolve().parent / "fixtures" / "kernellog"
LINES = json.loads((FIX / "lines.json").read_text())


@pytest.mark.parametrize("case", LINES, ids=[c["line"][:60] for c in LINES])
def test_real_line_matches_its_signature_and_names_its_driver(case: dict) -> None:
    hits = kernellog.scan(case["line"])
    assert [(h.signature.id, h.driver) for h in hits] == (
        [(case["signature"], case["driver"])] if case["signature"] else [])
    assert case["source"].startswith("https://github.com/")


def test_every_signature_has_a_real_line_and_a_source() -> None:
    matched = {c["signature"] for c in LINES if c["signature"]}
    sigs = kernellog.shipped()
    assert {s.id for s in sigs} == matched
    for s in sigs:
        assert s.urls and all(u.startswith("https://") for u in s.urls), s.id
        assert s.fix and s.symptom and s.severity in ("medium", "high", "critical")


def test_stamp_and_device_are_read_and_since_filters_by_boot_seconds() -> None:
    text = (FIX / "dmesg-e1000e-hang.txt").read_text()
    hits = kernellog.scan(text)
    assert [(h.seconds, h.device, h.interface) for h in hits] == [
        (9327.470501, "0000:00:19.0", "eth0"), (9329.469310, "0000:00:19.0", "eth0")]
    assert [h.seconds for h in kernellog.scan(text, after=9328.0)] == [9329.469310]
    assert kernellog.scan(text, after=9329.469310) == []
    assert kernellog.for_drivers(hits, ["veth"]) == []
    assert len(kernellog.for_drivers(hits, ["e1000e"])) == 2


def test_hostile_log_is_bounded_and_escaped() -> None:
    evil = "[ 1.0] e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang: \x1b[31mred\x07"
    (hit,) = kernellog.scan(evil)
    assert "\x1b" not in hit.line and "\x07" not in hit.line
    long = "[ 2.0] e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang:" + "A" * 100_000
    (hit,) = kernellog.scan(long)
    assert len(hit.line) <= kernellog.MAX_LINE
    many = "\n".join(["[ 3.0] e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang:"] * 500)
    assert len(kernellog.scan(many)) == kernellog.MAX_HITS
    junk = "\x00\xff[[[[" * 10_000 + "\n" + "]" * 50_000
    assert kernellog.scan(junk) == []


def test_a_bad_signature_file_names_the_signature(tmp_path: Path) -> None:
    bad = tmp_path / "sigs.json"
    bad.write_text(json.dumps({"signatures": [{"id": "x", "drivers": [], "pattern": "tx",
                                               "severity": "high", "symptom": "s", "fix": "f",
                                               "sources": [{"url": "https://e"}]}]}))
    with pytest.raises(ValueError, match=re.escape("signatures[0] (x)")):
        kernellog.load(bad)


def _with_dmesg(copy_host, text: str | None) -> Path:
    snap = copy_host("seed000-ustor")
    if text is not None:
        (snap / "commands" / "dmesg.txt").write_text(text)
        index = json.loads((snap / "commands" / "index.json").read_text())
        index.append({"argv": ["dmesg"], "rc": 0, "stdout": "commands/dmesg.txt"})
        (snap / "commands" / "index.json").write_text(json.dumps(index))
    return snap


@pytest.mark.slow  # a whole check of a snapshot (~0.8 s here)
def test_check_reports_a_known_bad_line_of_a_driver_the_host_runs(copy_host) -> None:
    """seed 000 runs e1000e and megaraid_sas: the e1000e hang is a finding with its source
    and fix; an mlx5 line (no such driver there) is not."""
    mlx5 = next(c["line"] for c in LINES if c["signature"] == "mlx5-health-compromised")
    snap = _with_dmesg(copy_host, (FIX / "dmesg-e1000e-hang.txt").read_text() + mlx5 + "\n")
    res = run_cli("check", "--json", "--root", str(snap), "--layer", "driver")
    data = json.loads(res.stdout)["data"]
    logs = [f for f in data["findings"] if f["item"].startswith("kernel_log.")]
    assert [(f["item"], f["status"], f["device"], f["interface"]) for f in logs] == [
        ("kernel_log.e1000e-hardware-unit-hang", "drift", "0000:00:19.0", "eth0")]
    (f,) = logs
    assert f["actual"]["count"] == 2
    assert f["actual"]["last"].startswith("[ 9329.469310] e1000e")
    assert f["source"] == {"ref": "kernel_log:e1000e-hardware-unit-hang",
                           "url": "https://github.com/gislab-npo/gislab/issues/407"}
    assert "tso off" in f["fix"] and res.returncode == 5


def test_check_of_a_snapshot_without_a_log_has_no_item_and_no_note(copy_host) -> None:
    snap = _with_dmesg(copy_host, None)
    res = run_cli("check", "--json", "--root", str(snap), "--layer", "driver")
    data = json.loads(res.stdout)["data"]
    assert not [f for f in data["findings"] if f["item"].startswith("kernel_log.")]
    assert "kernel log" not in json.dumps(data.get("notes", []))
