"""`hwmgr history`: readable before → after throughput and verify results."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
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


def _journal(state_dir: Path, target: str = "be2net", params: str | None = None,
             fetched: dict | None = None) -> Path:
    """A real journal with one transaction (raw SQL for the hostile bits)."""
    from hwmgr.transaction.journal import Journal

    state_dir.mkdir(parents=True, exist_ok=True)
    db = state_dir / "journal.sqlite"
    j = Journal(db, lambda **kw: sqlite3.connect(str(db), **kw))
    txn = j.begin("upgrade", target, {"version": "1.0"}, [("fetch", True, False)])
    if params is not None:
        j.db.execute("UPDATE transactions SET params=? WHERE id=?", (params, txn))
    if fetched is not None:
        j.save_data(txn, 0, fetched)
    j.close()
    return state_dir / "journal.sqlite"


def test_steps_say_where_the_package_came_from(tmp_path: Path) -> None:
    """An auditor asks which copy was installed: the fetch step's origin is in --steps."""
    _journal(tmp_path / "state", fetched={"origin": "mirror", "sha256": "ab" * 32})
    res = run_cli("history", "--steps", "--json", "--state-dir", str(tmp_path / "state"))
    (txn,) = json.loads(res.stdout)["data"]["transactions"]
    assert txn["steps"][0]["name"] == "fetch"
    assert txn["steps"][0]["data"] == {"origin": "mirror", "sha256": "ab" * 32}
    res = run_cli("history", "--steps", "--state-dir", str(tmp_path / "state"))
    assert "from mirror" in res.stdout, res.stdout


def test_history_reads_without_writing(tmp_path: Path) -> None:
    journal = _journal(tmp_path / "state")
    before = journal.read_bytes()
    os.chmod(tmp_path / "state", 0o555)  # root ignores modes: the bytes are the real check
    try:
        res = run_cli("history", "--state-dir", str(tmp_path / "state"))
    finally:
        os.chmod(tmp_path / "state", 0o755)
    assert res.returncode == 0 and "be2net" in res.stdout, res.stderr
    assert journal.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["journal.sqlite"]


def test_history_never_migrates_a_foreign_database(tmp_path: Path) -> None:
    import sqlite3

    (tmp_path / "state").mkdir()
    db = sqlite3.connect(tmp_path / "state/journal.sqlite")
    db.execute("CREATE TABLE other(x)")
    db.commit()
    db.close()
    before = (tmp_path / "state/journal.sqlite").read_bytes()
    res = run_cli("history", "--state-dir", str(tmp_path / "state"))
    assert res.returncode == 8 and "not a hwmgr journal" in res.stderr, res.stderr
    assert (tmp_path / "state/journal.sqlite").read_bytes() == before


def test_history_state_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("x")
    res = run_cli("history", "--state-dir", str(tmp_path / "state"))
    assert res.returncode == 8, res.stderr
    assert res.stderr.count("\n") == 1 and "is not a directory" in res.stderr
    assert (tmp_path / "state").read_text() == "x"


@pytest.mark.timeout(20)
def test_history_journal_that_is_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    os.mkfifo(tmp_path / "state/journal.sqlite")
    res = run_cli("history", "--state-dir", str(tmp_path / "state"), timeout=15)
    assert res.returncode == 8 and "not a regular file" in res.stderr, res.stderr


def test_hostile_journal_json_is_exit_8(tmp_path: Path) -> None:
    _journal(tmp_path / "state", params="[" * 100_000 + "]" * 100_000)
    res = run_cli("history", "--state-dir", str(tmp_path / "state"))
    assert res.returncode == 8 and "nested" in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1


def test_journal_text_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    _journal(tmp_path / "state", target="be2\x1b[2Jnet[bold]x[/]")
    res = run_cli("history", "--state-dir", str(tmp_path / "state"))
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout and "be2\\x1b[2Jnet[bold]x[/]" in res.stdout


def test_a_snapshots_state_dir_link_is_resolved_inside_it(tmp_path: Path) -> None:
    """var/lib/hwmgr -> an outside state dir: its journal is not the snapshot's history."""
    _journal(tmp_path / "outside")
    snap = tmp_path / "snap"
    (snap / "var/lib").mkdir(parents=True)
    (snap / "snapshot.json").write_text(
        '{"format": "hwmgr-snapshot", "version": 1, "records": ["state"]}')
    os.symlink(str(tmp_path / "outside"), snap / "var/lib/hwmgr")
    res = run_cli("history", "--root", str(snap))
    assert res.returncode == 0, res.stderr
    assert "no transactions recorded" in res.stdout and "be2net" not in res.stdout


def test_a_snapshot_carries_the_journal_or_history_refuses(tmp_path: Path) -> None:
    """`hwmgr snapshot` copies the state dir's journal (and check history and expectations),
    so `history --root` shows the host's transactions; a snapshot without them (older
    hwmgr, the collector) is refused in one line instead of "no transactions recorded"."""
    state = tmp_path / "state"
    _journal(state)
    env = {"HWMGR_STATE_DIR": str(state)}
    assert run_cli("snapshot", str(tmp_path / "snap"), env=env).returncode == 0
    (state / "journal.sqlite").unlink()  # what is shown below comes from the snapshot
    res = run_cli("history", "--json", "--root", str(tmp_path / "snap"), env=env)
    assert res.returncode == 0, res.stderr
    (txn,) = json.loads(res.stdout)["data"]["transactions"]
    assert (txn["kind"], txn["driver"]) == ("upgrade", "be2net")
    meta = json.loads((tmp_path / "snap/snapshot.json").read_text())
    assert "state" in meta["records"]
    old = tmp_path / "old"
    old.mkdir()
    (old / "snapshot.json").write_text(json.dumps({**meta, "records": ["sysctl"]}))
    res = run_cli("history", "--root", str(old), env=env)
    assert res.returncode == 3 and res.stderr.count("\n") == 1, res.stderr
    assert "carries no hwmgr journal" in res.stderr and "no transactions" not in res.stdout


def test_the_state_copy_takes_the_lock_without_waiting(tmp_path: Path) -> None:
    """copy_state, the snapshot's copy of the state dir: with the lock held elsewhere it reads
    nothing and names the holder; free, it copies while holding the lock itself."""
    from hwmgr.commands.snapshot import copy_state
    from hwmgr.host.runner import SubprocessRunner
    from hwmgr.host.seam import Host
    from hwmgr.host.snapshot import recording_host
    from hwmgr.transaction.state import StateDir

    state = tmp_path / "state"
    _journal(state)
    live = Host("/", SubprocessRunner())
    live.allow_writes(str(state))
    host, rec, _ = recording_host()
    with StateDir(live, str(state)).lock("upgrade be2net"):
        why = copy_state(host, live, str(state))
    assert why is not None and why.startswith(
        f"state dir {state} locked by pid {os.getpid()} (hwmgr upgrade be2net) since ")
    assert not rec.files
    assert copy_state(host, live, str(state)) is None
    assert f"{state}/journal.sqlite" in rec.files
    assert copy_state(host, live, str(tmp_path / "none")) is None  # nothing to copy
    assert not (tmp_path / "none").exists(), "a snapshot creates no state dir"


@pytest.mark.slow  # two live snapshots
def test_snapshot_copies_the_journal_under_the_lock_or_says_who_holds_it(
        tmp_path: Path) -> None:
    """The journal is copied under the host lock: while another hwmgr holds it (a transaction
    writing the journal), `snapshot` does not wait and does not copy a half-written SQLite
    file; it says who holds the lock, and the snapshot does not claim the state record."""
    from hwmgr.host.runner import SubprocessRunner
    from hwmgr.host.seam import Host
    from hwmgr.transaction.state import StateDir

    state = tmp_path / "state"
    _journal(state)
    env = {"HWMGR_STATE_DIR": str(state)}
    live = Host("/", SubprocessRunner())
    live.allow_writes(str(state))
    with StateDir(live, str(state)).lock("upgrade be2net"):
        res = run_cli("snapshot", str(tmp_path / "busy"), env=env)
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "busy/var").exists()
    note = res.stdout.splitlines()[1]
    assert note.startswith(f"note: state dir {state} locked by pid {os.getpid()} "
                           "(hwmgr upgrade be2net) since ")
    assert note.endswith("not copied (take the snapshot again when it is done); history "
                         "and verify --root will refuse this snapshot")
    meta = json.loads((tmp_path / "busy/snapshot.json").read_text())
    assert "state" not in meta["records"]
    # released: the snapshot takes the lock itself and copies
    assert run_cli("snapshot", str(tmp_path / "free"), env=env).returncode == 0
    assert (tmp_path / "free" / str(state).lstrip("/") / "journal.sqlite").is_file()
    assert "state" in json.loads((tmp_path / "free/snapshot.json").read_text())["records"]
