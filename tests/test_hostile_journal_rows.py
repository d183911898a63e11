"""Journal rows of the wrong type where reboot-pending reads them (issue 41 §4): a blob, a
number or an over-long text in a committed upgrade's kind, target or ended reached `check
--json` raw ("Object of type bytes is not JSON serializable", exit 70). Each variant is now
the journal's one-line damaged-file error (exit 8, naming the file, transaction and column,
with how to recover), in the library and through `check` on a snapshot; the journal is
left as it was."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from support import HOSTS, run_cli

from hwmgr.errors import BadInputError
from hwmgr.host.capture import BOOT_ID_PATH
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.transaction.engine import Step, Transaction
from hwmgr.transaction.journal import MAX_TEXT
from hwmgr.transaction.pending import reboot_pending
from hwmgr.transaction.state import StateDir

STATE = "/var/lib/hwmgr"
BOOT = "0b6f7d2e-1c4a-4b8e-9f3d-5a6b7c8d9e01"
# SQL literals a text column keeps as another type (a number there is stored as its text:
# SQLite's TEXT affinity; ended may be NULL: not listed)
WRONG = {"blob": "x'00ff80'", "json-blob": "x'7b7d'", "empty-blob": "x''",
         "utf8-blob": "CAST('be2net' AS BLOB)", "long": "'" + "x" * (MAX_TEXT + 1) + "'"}
COLUMNS = ("kind", "target", "ended")


def _host(root: Path) -> Host:
    p = root / BOOT_ID_PATH.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(BOOT + "\n")
    host = Host(root, SubprocessRunner())
    step = Step("write", lambda c: c.host.write_bytes("/etc/demo/x", b"x"),
                lambda c: c.host.remove("/etc/demo/x"), lambda c: c.host.exists("/etc/demo/x"))
    st = StateDir(host, STATE)
    with st.lock(command="test"):
        res = Transaction(st, {"upgrade": lambda p: [step]}, "upgrade", {"version": "2.0"},
                          target="be2net").run()
    st.close()
    assert res.ok, res.error
    return host


def _damage(root: Path, column: str, literal: str) -> bytes:
    db = root / STATE.lstrip("/") / "journal.sqlite"
    con = sqlite3.connect(db)
    con.execute(f"UPDATE transactions SET {column}={literal}")
    con.commit()
    con.close()
    return db.read_bytes()


def test_an_undamaged_journal_is_pending(tmp_path: Path) -> None:
    entries = reboot_pending(_host(tmp_path), STATE)
    assert [(e["target"], e["status"]) for e in entries] == [("be2net", "pending")]
    json.dumps(entries)


@pytest.mark.parametrize("column", COLUMNS)
def test_every_wrong_type_is_one_damaged_file_line(column: str, tmp_path: Path) -> None:
    for name, literal in WRONG.items():
        root = tmp_path / name
        host = _host(root)
        _damage(root, column, literal)
        with pytest.raises(BadInputError) as err:
            reboot_pending(host, STATE)
        msg = str(err.value)
        assert "\n" not in msg and "journal.sqlite" in msg and f"#1 {column}" in msg, msg
        assert "move it aside" in msg and err.value.exit_code == 8


@pytest.mark.parametrize("column,name", [(c, n) for c in COLUMNS for n in ("blob", "long")])
def test_check_on_a_snapshot_with_a_damaged_row(column: str, name: str, tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    shutil.copytree(HOSTS / "seed001-bnx2", snap, symlinks=True)
    _host(snap)
    before = _damage(snap, column, WRONG[name])
    for args in (["--json"], []):
        res = run_cli("check", *args, "--root", str(snap), env={"HWMGR_CONFIG": ""})
        lines = res.stderr.splitlines()
        assert res.returncode == 8, (res.returncode, res.stderr[-400:])
        assert len(lines) == 1 and "journal.sqlite" in lines[0] and column in lines[0], lines
        assert "Traceback" not in res.stderr + res.stdout
        if args:
            assert json.loads(res.stdout)["status"] == "error"
    assert (snap / STATE.lstrip("/") / "journal.sqlite").read_bytes() == before
