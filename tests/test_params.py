"""A driver change's journaled params are read back through one edge (lifecycle/params.py):
what a plan journals passes as it is, older journals' "settings" still count, and a field the
steps index with the wrong JSON type is one line naming it, never a KeyError in a step."""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from support import FIXTURES, run_cli

from hwmgr.errors import EXIT_BAD_INPUT, BadInputError
from hwmgr.lifecycle import params, steps
from hwmgr.transaction.state import backup_record

JOURNAL = FIXTURES / "journals" / "upgrade-interrupted-at-arm.sqlite"  # hwmgr <= 2026.11


def _journaled() -> dict[str, object]:
    db = sqlite3.connect(f"file:{JOURNAL}?mode=ro", uri=True)
    try:
        raw: dict[str, object] = json.loads(
            db.execute("SELECT params FROM transactions WHERE id=1").fetchone()[0])
    finally:
        db.close()
    return raw


def _rollback() -> dict[str, object]:
    rec = {"path": "/lib/modules/K/kernel/m.ko", "version": "1.0", "sha256": "ab" * 32}
    return {"driver": "m", "version": "1.0", "modules": ["m"], "kernels": ["K"],
            "remove_versions": ["2.0"], "undo_upgrade": 3, "restore": {"K": {"m": rec}}}


def test_an_old_journals_params_pass_as_they_are_and_its_settings_still_count() -> None:
    raw = _journaled()
    assert "settings" in raw and "cache_dir" not in raw  # the old layout
    assert params.upgrade(raw) is raw  # checked, not copied: the steps see the journal's values
    assert params.text_setting(raw, "cache_dir") == "/srv/hwmgr-fixture/cache"
    assert params.text_setting(raw, "sign_key") == "/srv/hwmgr-fixture/keys/mok.key"
    assert params.setting(raw, "offline") is False and params.setting(raw, "nope") is None
    names = [s.name for s in steps.REGISTRY["upgrade"](raw)]
    assert names == ["fetch", "unpack", "dkms-add", "dkms-build", "backup", "install",
                     "initramfs", "arm"]
    assert [s.name for s in steps.REGISTRY["rollback"](_rollback())] == [
        "backup", "restore", "arm"]


@pytest.mark.parametrize("kind,key,value,field", [
    ("upgrade", "modules", ["ok", 3], "journaled upgrade params.modules[1]"),
    ("upgrade", "kernels", "6.1.0", "journaled upgrade params.kernels"),
    ("upgrade", "source", None, "journaled upgrade params.source"),
    ("upgrade", "driver", ["m"], "journaled upgrade params.driver"),
    ("upgrade", "package", "file.deb", "journaled upgrade params.package"),
    ("rollback", "undo_upgrade", "3", "journaled rollback params.undo_upgrade"),
    ("rollback", "restore", {"K": {"m": {"path": 5}}},
     "journaled rollback params.restore.K.m.path"),
    ("rollback", "remove_versions", None, "journaled rollback params.remove_versions"),
])
def test_a_damaged_field_is_one_line_naming_it(kind: str, key: str, value: object,
                                               field: str) -> None:
    raw = copy.deepcopy(_journaled() if kind == "upgrade" else _rollback())
    if value is None:
        del raw[key]
    else:
        raw[key] = value
    with pytest.raises(BadInputError) as e:
        steps.REGISTRY[kind](raw)
    assert e.value.exit_code == EXIT_BAD_INPUT
    assert str(e.value).startswith(f"{field}: expected ") and "\n" not in str(e.value)


def test_a_site_value_of_the_wrong_type_counts_as_not_set() -> None:
    raw = {**_journaled(), "mirror": 7, "cache_dir": ["/x"]}
    assert params.text_setting(raw, "mirror") is None  # not the "settings" copy either
    assert params.text_setting(raw, "cache_dir") is None


def test_a_journaled_backup_record_is_checked_before_a_restore_trusts_it() -> None:
    good = {"path": "/etc/x", "existed": True, "backup": "/s/backups/1/etc/x", "sha256": "ab"}
    assert backup_record(good, "step install backup:/etc/x") is good
    with pytest.raises(Exception, match=r"^step install backup:/etc/x: not a backup record"):
        backup_record({**good, "existed": "yes"}, "step install backup:/etc/x")


def test_recover_names_the_damaged_field_and_keeps_the_transaction_open(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(JOURNAL, state / "journal.sqlite")
    db = sqlite3.connect(state / "journal.sqlite")
    raw = _journaled()
    raw["kernels"] = {"6.1.0-56-amd64": True}  # a hand edit
    db.execute("UPDATE transactions SET params=? WHERE id=1", (json.dumps(raw),))
    db.commit()
    db.close()
    res = run_cli("recover", "--json", env={"HWMGR_STATE_DIR": str(state)}, timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    (txn,) = json.loads(res.stdout)["data"]
    assert txn["state"] != "committed" and txn["state"] != "rolled-back"
    assert "journaled upgrade params.kernels: expected a list" in txn["error"]
