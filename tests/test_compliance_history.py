"""Check history: checks recorded in the state dir (bounded), and `hwmgr history --checks`
explaining each item's drift by the real transactions committed between two checks."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from support import run_cli, run_json

from hwmgr.compliance import history
from hwmgr.compliance.history import CHECKS_FILE, record_check
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.transaction.engine import Step, Transaction
from hwmgr.transaction.state import StateDir

PCI, IF = "0000:01:00.0", "enp1s0f0"


def finding(layer: str, item: str, status: str, actual: object = None, device: str | None = PCI,
            iface: str | None = IF) -> dict:
    return {"layer": layer, "device": device, "interface": iface, "item": item,
            "expected": 4096, "actual": actual, "status": status, "reason": "r",
            "fix": None, "evidence": None}


def data(ring: str, mtu: str, rmem: str) -> dict:
    f = [finding("setting", "ring.rx", ring, 512 if ring == "drift" else 4096),
         finding("setting", "mtu", mtu, 1500),
         finding("sysctl", "sysctl.net.core.rmem_max", rmem, 212992, None, None),
         finding("firmware", "firmware_version", "unknown")]
    drift = sum(x["status"] == "drift" for x in f)
    return {"compliant": drift == 0, "catalog_version": "2026.11.0", "reboot_pending": [],
            "summary": {"ok": 3 - drift, "drift": drift, "unknown": 1, "unsupported": 0},
            "host": {"hostname": "h", "kernel": "k"}, "findings": f}


@pytest.fixture
def live(tmp_path: Path) -> tuple[Host, str]:
    return Host("/", SubprocessRunner()), str(tmp_path / "state")


def commit(host: Host, state_dir: str, kind: str, target: str) -> int:
    out = f"{state_dir}/out-{kind}"
    reg = {kind: lambda p: [Step("write", lambda c: c.host.write_bytes(out, b"x"),
                                 lambda c: c.host.remove(out), lambda c: c.host.exists(out))]}
    st = StateDir(host, state_dir)
    with st.lock(command="test"):
        res = Transaction(st, reg, kind, {}, target=target).run()
    st.close()
    assert res.ok
    return int(res.id or 0)


def check(host: Host, state_dir: str, d: dict) -> int:
    time.sleep(0.01)  # journal times have millisecond resolution: keep the order strict
    cid = record_check(host, state_dir, d)
    time.sleep(0.01)
    assert cid is not None
    return cid


def test_drift_explained_by_the_transactions_between_checks(live: tuple[Host, str]) -> None:
    host, sd = live
    check(host, sd, data(ring="ok", mtu="drift", rmem="ok"))
    up = commit(host, sd, "upgrade", "be2net")
    check(host, sd, data(ring="drift", mtu="drift", rmem="ok"))
    check(host, sd, data(ring="drift", mtu="drift", rmem="ok"))
    apply = commit(host, sd, "apply", IF)
    check(host, sd, data(ring="ok", mtu="drift", rmem="drift"))
    check(host, sd, data(ring="ok", mtu="drift", rmem="ok"))
    rc, doc = run_json("history", "--checks", "--state-dir", sd)
    assert rc == 0, doc
    found = doc["data"]
    assert found["checks"] == 5
    eps = {e["item"]: e for e in found["episodes"]}
    assert set(eps) == {"ring.rx", "mtu", "sysctl.net.core.rmem_max"}
    ring = eps["ring.rx"]
    assert (ring["layer"], ring["device"], ring["interface"]) == ("setting", PCI, IF)
    assert [t["txn"] for t in ring["started_by"]] == [up]
    assert ring["started_by"][0]["kind"] == "upgrade" and ring["actual"] == 512
    assert ring["ended_as"] == "ok" and [t["txn"] for t in ring["stopped_by"]] == [apply]
    mtu = eps["mtu"]
    assert mtu["first_check"] and mtu["until"] is None and mtu["started_by"] == []
    rmem = eps["sysctl.net.core.rmem_max"]
    assert [t["txn"] for t in rmem["started_by"]] == [apply]
    assert rmem["ended_as"] == "ok" and rmem["stopped_by"] == []  # changed outside hwmgr
    res = run_cli("history", "--checks", "--state-dir", sd, env={"COLUMNS": "250"})
    assert res.returncode == 0
    assert "upgrade #" in res.stdout and "still drifting" in res.stdout
    assert "outside hwmgr" in res.stdout, res.stdout
    rc, doc = run_json("history", "--checks", "eth9", "--state-dir", sd)
    assert rc == 0 and doc["data"]["episodes"] == []


def test_compact_and_bounded(live: tuple[Host, str], monkeypatch: pytest.MonkeyPatch) -> None:
    host, sd = live
    monkeypatch.setattr(history, "KEEP", 3)
    for i in range(5):
        d = data("ok", "ok", "ok")
        d["findings"].append(finding("setting", f"gone.{i}", "drift", "x" * 1000))
        record_check(host, sd, d)
    db = sqlite3.connect(Path(sd) / CHECKS_FILE)
    assert [r[0] for r in db.execute("SELECT id FROM checks ORDER BY id")] == [3, 4, 5]
    items = {r[0] for r in db.execute("SELECT item FROM items")}
    assert "gone.0" not in items and {"gone.2", "gone.4", "ring.rx"} <= items
    actual = db.execute("SELECT actual FROM check_items WHERE actual IS NOT NULL"
                        " AND length(actual) > 100").fetchone()[0]
    assert len(actual) == history.MAX_ACTUAL
    oks = db.execute("SELECT count(*) FROM check_items WHERE status=0 AND actual IS NOT NULL")
    assert oks.fetchone()[0] == 0  # ok items keep only their status code
    db.close()


def test_snapshots_are_not_recorded_and_reading_creates_nothing(tmp_path: Path) -> None:
    snap = Host(tmp_path, SubprocessRunner(), meta={"format": "hwmgr-snapshot"})
    assert record_check(snap, "/var/lib/hwmgr", data("ok", "ok", "ok")) is None
    assert not (tmp_path / "var").exists()
    res = run_cli("history", "--checks", "--state-dir", str(tmp_path / "none"))
    assert res.returncode == 0 and "no checks recorded" in res.stdout
    assert not (tmp_path / "none").exists()


def test_damaged_history_is_one_line(tmp_path: Path) -> None:
    sd = tmp_path / "state"
    sd.mkdir()
    (sd / CHECKS_FILE).write_bytes(b"not sqlite " * 50)
    rc, doc = run_json("history", "--checks", "--state-dir", str(sd))
    assert rc == 8 and CHECKS_FILE in doc["errors"][0] and len(doc["errors"]) == 1
    (sd / CHECKS_FILE).unlink()
    db = sqlite3.connect(sd / CHECKS_FILE)
    db.execute("CREATE TABLE other (x)")
    db.commit()
    db.close()
    rc, doc = run_json("history", "--checks", "--state-dir", str(sd))
    assert rc == 8 and "check history" in doc["errors"][0]


def test_hostile_findings_are_skipped(live: tuple[Host, str]) -> None:
    host, sd = live
    d = {"findings": ["x", {"status": "bogus"}, {"layer": ["l"], "status": "drift",
                                                  "actual": {"a": object()}}], "summary": 3}
    cid = record_check(host, sd, d)
    db = sqlite3.connect(Path(sd) / CHECKS_FILE)
    rows = db.execute("SELECT layer, status FROM check_items JOIN items ON item_id=items.id"
                      " WHERE check_id=?", (cid,)).fetchall()
    assert rows == [("['l']", 1)]
    assert json.loads(db.execute("SELECT summary FROM checks").fetchone()[0]) == {}
    db.close()


def test_uncatalogued_is_recorded_apart_and_ranks_below_unknown(live: tuple[Host, str]) -> None:
    """An item's worst finding decides its row: drift > unknown > uncatalogued; codes 0-3 keep
    their meaning (rows of older checks), uncatalogued is 4 and ends a drift episode."""
    host, sd = live
    drv = "driver_version"
    check(host, sd, {**data(ring="ok", mtu="ok", rmem="ok"),
                     "findings": [finding("driver", drv, "drift", "4.1", iface=None)]})
    check(host, sd, {**data(ring="ok", mtu="ok", rmem="ok"), "findings": [
        finding("driver", drv, "uncatalogued", "4.2", iface=None),
        finding("driver", "other", "uncatalogued", "4.2", iface=None),
        finding("driver", "other", "unknown", None, iface=None)]})
    db = sqlite3.connect(f"{sd}/{CHECKS_FILE}")
    rows = dict(db.execute("SELECT i.item, c.status FROM check_items c JOIN items i "
                           "ON i.id = c.item_id WHERE c.check_id = 2").fetchall())
    db.close()
    assert rows == {drv: 4, "other": 2}
    assert history.STATUS[4] == "uncatalogued"
    assert [history.CODES[s] for s in ("ok", "drift", "unknown", "unsupported")] == [0, 1, 2, 3]
    db = history.open_history(host, sd)
    assert db is not None
    eps = history.drift_episodes(db, [])["episodes"]
    db.close()
    assert [(e["item"], e["ended_as"]) for e in eps] == [(drv, "uncatalogued")]
