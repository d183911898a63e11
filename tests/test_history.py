"""`hwmgr history`: readable before → after throughput and verify results."""

from __future__ import annotations

from pathlib import Path

from support import run_cli

from hwmgr.commands.history import results_text


def test_results_text_shows_the_before_after_pair() -> None:
    text = results_text({"verify": {"status": "verified"},
                         "throughput_before": {"send_mbps": 95.2, "receive_mbps": 96},
                         "throughput_after": {"send_mbps": 612.0},
                         "auto_rollback": {"txn": 4}, "other": 1})
    assert text == ("verify verified, throughput 95.2/96 → 612 Mbit/s, auto-rollback #4, "
                    "other=1")
    assert results_text({}) == "-"
    assert results_text({"throughput_after": {"send_mbps": None}}) == "-"


def test_history_on_an_empty_state_dir(tmp_path: Path) -> None:
    res = run_cli("history", "--state-dir", str(tmp_path / "none"))
    assert res.returncode == 0 and "no transactions recorded" in res.stdout
    assert not (tmp_path / "none").exists(), "reading history creates nothing"
