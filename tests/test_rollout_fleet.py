"""Issue 42's proof: a settings rollout through the real ansible-playbook over 20 hosts.

Each host is a network namespace whose `v0` (txqueuelen 500: drifting from the site
layer's 1000) is a veth to a peer namespace of its own; the peer serves iperf3 on a
loopback address of its own (10.250.N.1), routed over that veth. Every `v0` is shaped with tc
(300 Mbit/s, so that iperf3 costs little CPU), one host's to 10 Mbit/s, under the gate's
floor. The rollout runs with batches 1,3,8 and a budget of 1: ansible-playbook is
interrupted (SIGINT to its process group, as Ctrl-C) once the canary is done and the
second batch is in flight, and the same command run again resumes; the shaped host fails its
throughput gate, is reverted exactly and gated again, the rollout halts, and the hosts
after its batch never start. Every host's journal shows at most one committed apply.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import ansible_fleet as af  # noqa: E402
from support.rollout_fleet import RolloutFleet  # noqa: E402

pytestmark = [
    pytest.mark.slow,  # real ansible-playbook, 40 namespaces, iperf3
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not (af.BIN / "ansible-playbook").exists(),
                       reason="ansible-core is not installed (pip install -e '.[dev]')"),
    pytest.mark.skipif(not Path("/usr/bin/iperf3").exists(), reason="iperf3 is not installed"),
    pytest.mark.timeout(600),
]
PLAYBOOK = Path("ansible_collections/hwmgr/fleet/playbooks/rollout.yml")
HOSTS = 20
SHAPED = "web-08"  # in the third batch (hosts 5-12 of batches 1,3,8)
BATCHES = [1, 3, 8]
LAST_STARTED = 12  # hosts 13-20 are the fourth batch: never started once the budget is spent


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory):
    f = RolloutFleet(tmp_path_factory.mktemp("rollout"))
    try:
        for i in range(1, HOSTS + 1):
            f.peered(f"web-{i:02d}", i, shaped=f"web-{i:02d}" == SHAPED)
        yield f
    finally:
        f.stop()
        assert af.leftover_namespaces(f.prefix) == []


@pytest.fixture(scope="module")
def collections(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return af.build_collection(tmp_path_factory.mktemp("galaxy"))


def _argv(fleet: RolloutFleet, cols: Path) -> list[str]:
    extra = {"hwmgr_rollout_change": "apply --layer settings", "hwmgr_rollout_batches": BATCHES,
             "hwmgr_rollout_budget": "1", "hwmgr_rollout_record": str(fleet.tmp / "r.json"),
             "hwmgr_rollout_report_dir": str(fleet.tmp / "report"),
             "hwmgr_rollout_reboot": False}  # local connection: a reboot would be this machine's
    return [str(af.BIN / "ansible-playbook"), "-i", str(fleet.inventory()), "-f", "8",
            "-e", json.dumps(extra), str(cols / PLAYBOOK)]


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _record(fleet: RolloutFleet) -> dict[str, Any]:
    return _json(fleet.tmp / "r.json")


@pytest.fixture(scope="module")
def rollout(fleet: RolloutFleet, collections: Path):
    """Run 1 interrupted (Ctrl-C) with the second batch in flight; run 2, the same command."""
    env = fleet.env(collections)
    first = subprocess.Popen(_argv(fleet, collections), cwd=fleet.tmp, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        hosts = _record(fleet).get("hosts", {})
        if any(h["state"] == "in-flight" and h["batch"] == 2 for h in hosts.values()):
            break
        time.sleep(0.2)
    interrupted_at = {n: h["state"] for n, h in _record(fleet).get("hosts", {}).items()}
    if first.poll() is None:
        os.killpg(first.pid, signal.SIGINT)
    try:
        out1, _ = first.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(first.pid, signal.SIGKILL)  # only this test's own session
        out1, _ = first.communicate()
    second = subprocess.run(_argv(fleet, collections), cwd=fleet.tmp, env=env,
                            capture_output=True, text=True, timeout=500, check=False)
    return {"interrupted_at": interrupted_at, "first": out1, "first_rc": first.returncode,
            "second": second, "record": _record(fleet),
            "report": _json(fleet.tmp / "report" / "rollout-report.json")}


def test_the_canary_ran_before_the_interrupt_and_the_rerun_resumed(rollout) -> None:
    at = rollout["interrupted_at"]
    assert at.get("web-01") == "done" and rollout["first_rc"] != 0, rollout["first"][-3000:]
    assert [at[f"web-{i:02d}"] for i in (2, 3, 4)] == ["in-flight"] * 3
    assert all(at[f"web-{i:02d}"] == "pending" for i in range(5, HOSTS + 1))
    hosts = rollout["record"]["hosts"]  # handed out again, as resumes, and finished
    assert [hosts[f"web-{i:02d}"]["resumed"] for i in (1, 2, 3, 4)] == [0, 1, 1, 1]
    second = rollout["second"]
    assert "hwmgr rollout" in second.stdout and second.returncode != 0, second.stdout[-3000:]


def test_the_shaped_host_fails_its_throughput_gate_and_halts_the_rollout(rollout) -> None:
    rec = rollout["record"]
    shaped = rec["hosts"][SHAPED]
    assert shaped["state"] == "rolled-back", json.dumps(shaped)[:2000]
    assert shaped["gate"]["failed_steps"] == ["throughput"]
    assert rec["halted"]["reason"] == "failure budget reached: 1 failed gate(s), limit 1"
    batch_of = {n: h["batch"] for n, h in rec["hosts"].items()}
    states = {n: h["state"] for n, h in rec["hosts"].items()}
    # the hosts of the shaped host's batch were in flight and finished; none after it started
    same = [n for n in states if batch_of[n] == batch_of[SHAPED] and n != SHAPED]
    assert same and all(states[n] == "done" for n in same)
    later = [f"web-{i:02d}" for i in range(LAST_STARTED + 1, HOSTS + 1)]
    assert all(states[n] == "pending" for n in later), states
    assert all(states[n] == "done" for n in (f"web-{i:02d}" for i in range(1, LAST_STARTED + 1))
               if n != SHAPED), states


def test_the_failed_host_is_reverted_exactly_and_gated_again(fleet: RolloutFleet,
                                                              rollout) -> None:
    rb = rollout["record"]["hosts"][SHAPED]["rollback"]
    assert rb["action"] == "revert" and rb["error"] is None and isinstance(rb["txn"], int)
    assert rb["gate"]["steps"] and "throughput" in rb["gate"]["failed_steps"]  # still shaped
    assert fleet.txqueuelen(SHAPED) == af.TXQ_DRIFTED  # the value it had, back
    persist = Path(fleet.hosts[SHAPED]["hwmgr_persist_root"])
    link = persist / "etc/systemd/network/10-hwmgr-v0.link"
    assert not link.exists()  # the file the apply wrote is gone, as before
    assert fleet.txqueuelen("web-01") == af.TXQ_WANTED
    assert fleet.txqueuelen(f"web-{HOSTS:02d}") == af.TXQ_DRIFTED  # never started


def _transactions(fleet: RolloutFleet, name: str) -> list[tuple[str, str]]:
    """(kind, state) of every transaction in the host's journal, read by SQLite itself."""
    db = Path(fleet.hosts[name]["hwmgr_state_dir"]) / "journal.sqlite"
    if not db.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        return list(con.execute("SELECT kind, state FROM transactions ORDER BY id"))


def test_nothing_was_applied_twice(fleet: RolloutFleet, rollout) -> None:
    for name, h in rollout["record"]["hosts"].items():
        txns = _transactions(fleet, name)
        applied = [t for t in txns if t == ("apply", "committed")]
        reverts = [t for t in txns if t == ("revert", "committed")]
        assert len(applied) == (0 if h["state"] == "pending" else 1), (name, h["state"], txns)
        assert len(reverts) == (1 if h["state"] == "rolled-back" else 0), (name, txns)


def test_the_report_shows_the_rollback(fleet: RolloutFleet, rollout) -> None:
    report = rollout["report"]
    assert report["counts"]["rolled-back"] == 1 and report["budget"]["spent"] is True
    page = (fleet.tmp / "report" / "rollout-report.html").read_text()
    assert SHAPED in page and "Halted" in page and "throughput: failed" in page
