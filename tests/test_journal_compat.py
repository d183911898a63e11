"""Journals an older hwmgr wrote (params with a whole `settings` copy) still recover."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support import FIXTURES, run_cli
from support.lifecycle_env import MODULE

JOURNALS = FIXTURES / "journals"


def _state_with(tmp_path: Path, name: str) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(JOURNALS / name, state / "journal.sqlite")
    return state


def _recover(state: Path) -> tuple[int, list[dict]]:
    res = run_cli("recover", "--json", env={"HWMGR_STATE_DIR": str(state)}, timeout=300)
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, json.loads(res.stdout)["data"]


def test_old_journal_interrupted_before_the_commit_point_rolls_back(tmp_path: Path) -> None:
    state = _state_with(tmp_path, "upgrade-interrupted-at-dkms-add.sqlite")
    work = state / "work" / "1" / "src" / f"{MODULE}-1.0"  # what unpack left
    work.mkdir(parents=True)
    rc, data = _recover(state)
    assert rc == 0, data
    assert [(r["id"], r["kind"], r["state"]) for r in data] == [(1, "upgrade", "rolled-back")]
    assert [s["state"] for s in data[0]["steps"]][:3] == ["kept", "undone", "undone"]
    assert not (state / "work" / "1").exists(), "unpack's undo removed its work dir"
    rc, data = _recover(state)
    assert (rc, data) == (0, []), "nothing is left open"


def test_old_journal_past_the_commit_point_rolls_forward(tmp_path: Path) -> None:
    state = _state_with(tmp_path, "upgrade-interrupted-at-arm.sqlite")
    rc, data = _recover(state)
    assert rc == 0, data
    assert [(r["id"], r["state"], r["direction"]) for r in data] == [(1, "committed", "forward")]
    exp = json.loads((state / "expectations" / f"{MODULE}.json").read_text())
    assert (exp["txn"], exp["driver"], exp["expected_version"]) == (1, MODULE, "1.0")
