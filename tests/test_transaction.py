"""Transaction engine: journaling order, rollback, crash recovery at every boundary, host lock.

Crash tests run tests/support/helpers_crash.py as a real subprocess on a temporary host root,
SIGKILL it at a step boundary (HWMGR_TEST_CRASH_AT), recover in a fresh process and compare
every file.
"""

from __future__ import annotations

import hashlib
import importlib.util
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

from hwmgr.errors import (
    EXIT_INTERNAL,
    EXIT_LOCKED,
    BadInputError,
    HwmgrError,
    LockedError,
    RefusedError,
)
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.transaction.engine import Ctx, Step, Transaction, TransactionError
from hwmgr.transaction.state import BACKUP_RECORD, StateDir, history

HERE = Path(__file__).resolve().parent
HELPER = HERE / "support" / "helpers_crash.py"
REPO = HERE.parent


def _load_helper() -> Any:
    spec = importlib.util.spec_from_file_location("helpers_crash", HELPER)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["helpers_crash"] = mod
    spec.loader.exec_module(mod)
    return mod


H = _load_helper()


# ---------------------------------------------------------------------------- helpers
def tree(root: Path) -> dict[str, str]:
    """sha256 of every host file, except the state dir and the download cache."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith(("var/lib/hwmgr/", "var/cache/")):
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def spawn(
    root: Path, *args: str, crash: str | None = None, **env: str
) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items()
            if k not in ("HWMGR_TEST_CRASH_AT", H.FAIL_UNDO_ENV)}
    full["PYTHONPATH"] = str(REPO)
    full.update(env)
    if crash:
        full["HWMGR_TEST_CRASH_AT"] = crash
    return subprocess.run(
        [sys.executable, str(HELPER), str(root), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=30,
        check=False,
    )


def state_of(root: Path) -> StateDir:
    return StateDir(Host(root, SubprocessRunner()), H.STATE)


@pytest.fixture(scope="module")
def old_new(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], dict[str, str]]:
    """Checksums of the tree before and after an uninterrupted demo run."""
    root = tmp_path_factory.mktemp("reference")
    H.make_old_tree(str(root))
    old = tree(root)
    st = state_of(root)
    with st.lock(command="test"):
        res = Transaction(st, H.REGISTRY, "demo", H.PARAMS).run()
    assert res.ok, res.error
    new = tree(root)
    assert old != new and set(new) - set(old) == {"etc/demo/armed"}
    return old, new


@pytest.fixture
def root(tmp_path: Path) -> Path:
    H.make_old_tree(str(tmp_path))
    return tmp_path


def assert_closed_and_backups_intact(root: Path, old: dict[str, str]) -> list[dict[str, Any]]:
    st = state_of(root)
    with st.lock(command="test"):
        assert st.journal().open_transactions() == []
    hist = history(st)
    for meta in sorted(st.host.path(st.backups).rglob("*" + BACKUP_RECORD)):
        rec = json.loads(meta.read_text())
        assert st.verify_backup(rec), rec
        if rec["existed"]:
            assert rec["sha256"] == old[rec["path"].lstrip("/")], "backup is not the old file"
    for txn in hist:  # every backup the journal names is still there and intact
        for step in txn["steps"]:
            for key, rec in step["data"].items():
                if key.startswith("backup:"):
                    assert st.verify_backup(rec), (txn["id"], step["name"], rec)
    return hist


# ---------------------------------------------------------------------------- basics
def test_run_journals_started_before_do_and_done_after(tmp_path: Path) -> None:
    st = StateDir(Host(tmp_path, SubprocessRunner()), "/state")
    seen: list[tuple[str, list[tuple[str, str, str]]]] = []

    def peek(ctx: Ctx) -> list[tuple[str, str, str]]:
        # a separate connection sees only what was committed to disk
        db = sqlite3.connect(str(tmp_path / "state/journal.sqlite"))
        rows = db.execute(
            "SELECT name, state, data FROM steps WHERE txn_id=? ORDER BY seq", (ctx.txn_id,)
        ).fetchall()
        db.close()
        return rows

    def do(ctx: Ctx) -> dict[str, Any]:
        seen.append((ctx.step, peek(ctx)))
        ctx.save(partial=1)
        assert peek(ctx)[ctx.seq][2] == json.dumps({"partial": 1})
        ctx.host.write_bytes(f"/out/{ctx.step}", b"x")
        return {"made": f"/out/{ctx.step}"}

    def steps(params: dict[str, Any]) -> list[Step]:
        return [
            Step(n, do, lambda c: None, lambda c: c.host.exists(f"/out/{c.step}"))
            for n in ("one", "two")
        ]

    with st.lock(command="test"):
        assert st.journal().synchronous() == 2  # FULL
        res = Transaction(st, {"k": steps}, "k", {"x": 1}, target="t").run()
    assert res.ok and res.state == "committed"
    assert seen[0] == ("one", [("one", "started", "{}"), ("two", "pending", "{}")])
    made = json.dumps({"partial": 1, "made": "/out/one"})
    assert seen[1] == ("two", [("one", "done", made), ("two", "started", "{}")])
    [txn] = history(st)
    assert [s["state"] for s in txn["steps"]] == ["done", "done"]
    assert txn["steps"][1]["data"] == {"partial": 1, "made": "/out/two"}
    assert txn["params"] == {"x": 1} and txn["pid"] == os.getpid() and txn["ended"]


def test_step_failure_undoes_in_reverse_and_restores_files(root: Path, old_new: Any) -> None:
    old, _ = old_new
    st = state_of(root)
    with st.lock(command="test"):
        res = Transaction(st, H.REGISTRY, "demo", dict(H.PARAMS, fail="arm:do")).run()
    assert res.state == "rolled-back" and not res.ok and res.closed
    assert res.error == "step 'arm' failed: RuntimeError: demo failure in arm"
    assert [s["state"] for s in res.steps] == ["kept", "undone", "undone", "undone"]
    assert tree(root) == old
    assert (root / H.FETCHED.lstrip("/")).exists()  # irreversible step's effect is kept
    [txn] = history(st, events=True)
    undo_order = [
        txn["steps"][e["seq"]]["name"] for e in txn["events"] if e["event"] == "undo-started"
    ]
    assert undo_order == ["arm", "replace-ko", "write-a"]
    assert txn["state"] == "rolled-back" and txn["direction"] == "back"
    assert not res.ok and "step 'arm' failed" in (res.error or "")


def test_check_must_confirm_do(tmp_path: Path) -> None:
    st = StateDir(Host(tmp_path, SubprocessRunner()), "/s")
    reg = {"k": lambda p: [Step("liar", lambda c: None, lambda c: None, lambda c: False)]}
    with st.lock(command="test"):
        res = Transaction(st, reg, "k").run()
    assert res.state == "rolled-back"
    assert res.error == "step 'liar' failed: do() finished but check() says the effect is absent"


def test_undo_failure_leaves_txn_open_until_recover(
    root: Path, old_new: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, _ = old_new
    st = state_of(root)
    monkeypatch.setenv(H.FAIL_UNDO_ENV, "write-a")
    with st.lock(command="test"):
        res = Transaction(st, H.REGISTRY, "demo", dict(H.PARAMS, fail="arm:do")).run()
        assert res.state == "failed" and not res.closed
        cause = res.error.split("; then")[0]
        assert cause.startswith("step 'arm' failed")
        assert res.error.startswith(cause + "; then the undo of step 'write-a' failed: Runtime")
        assert res.error.endswith(f"transaction {res.id} left open, run `hwmgr recover`")
        assert [t["id"] for t in st.journal().open_transactions()] == [res.id]
        with pytest.raises(RefusedError, match=rf"transaction {res.id} \(demo\) is still failed"):
            Transaction(st, H.REGISTRY, "demo", H.PARAMS).run()
        assert tree(root) != old  # a.conf still new: the failed undo did not restore it
        [again] = Transaction.recover(st, H.REGISTRY)  # the undo fails again: said once
        assert again.state == "failed" and again.error == res.error
        monkeypatch.delenv(H.FAIL_UNDO_ENV)
        [rec] = Transaction.recover(st, H.REGISTRY)
    assert rec.recovered and rec.state == "rolled-back" and rec.id == res.id
    assert rec.error == cause  # what happened, without "left open" once it is closed
    assert tree(root) == old
    assert_closed_and_backups_intact(root, old)


def test_run_without_lock_and_bad_steps_are_refused(tmp_path: Path) -> None:
    st = StateDir(Host(tmp_path, SubprocessRunner()), "/s")
    with pytest.raises(HwmgrError, match="without the host lock") as err:
        Transaction(st, H.REGISTRY, "demo", H.PARAMS).run()
    assert err.value.exit_code == EXIT_INTERNAL
    with pytest.raises(TransactionError, match="no steps are registered for transaction kind 'x'"):
        Transaction(st, H.REGISTRY, "x")
    with pytest.raises(TransactionError, match="not JSON-serialisable"):
        Transaction(st, H.REGISTRY, "demo", {"when": object()})
    with pytest.raises(TransactionError, match="undo must be callable or None"):
        Step("s", lambda c: None, "nope", lambda c: True)  # type: ignore[arg-type]
    dup = {"d": lambda p: [Step("a", lambda c: None, None, lambda c: True)] * 2}
    with pytest.raises(TransactionError, match="two steps named 'a'"):
        Transaction(st, dup, "d")
    with pytest.raises(BadInputError, match="expected an absolute path"):
        StateDir(st.host, "relative/dir")


# ---------------------------------------------------------------------------- crashes
ROLL_BACK = [
    "fetch:before",
    "fetch:after",
    "fetch:done",
    "write-a:before",
    "write-a:saved",
    "write-a:after",
    "write-a:done",
    "replace-ko:before",
    "replace-ko:saved",
]
ROLL_FORWARD = [
    "replace-ko:after",
    "replace-ko:done",
    "arm:before",
    "arm:after",
    "arm:done",
    "3:before",
]


@pytest.mark.parametrize("point", ROLL_BACK + ROLL_FORWARD)
def test_crash_at_every_boundary_recovers_old_or_new(root: Path, old_new: Any, point: str) -> None:
    old, new = old_new
    run = spawn(root, "run", crash=point)
    assert run.returncode == -signal.SIGKILL, (run.stdout, run.stderr)
    st = state_of(root)
    with st.lock(command="test"):
        [open_txn] = st.journal().open_transactions()
    assert open_txn["state"] == "running"
    st.close()
    rec = spawn(root, "recover")
    assert rec.returncode == 0, rec.stderr
    [res] = json.loads(rec.stdout)
    expect_forward = point in ROLL_FORWARD
    assert res["state"] == ("committed" if expect_forward else "rolled-back"), res
    assert res["recovered"] is True
    assert tree(root) == (new if expect_forward else old)
    hist = assert_closed_and_backups_intact(root, old)
    assert hist[0]["state"] == res["state"]
    if not expect_forward:
        step = point.split(":")[0]
        assert hist[0]["error"] in (
            f"interrupted at step '{step}'",
            f"interrupted after step '{step}', before the point of no return",
        )


@pytest.mark.parametrize("point", ["arm:undo", "replace-ko:undo", "write-a:undo", "fetch:undo"])
def test_crash_during_rollback_is_finished_by_recover(root: Path, old_new: Any, point: str) -> None:
    old, _ = old_new
    run = spawn(root, "run", json.dumps({"fail": "arm:do"}), crash=point)
    assert run.returncode == -signal.SIGKILL or point == "fetch:undo", run.stderr
    rec = spawn(root, "recover")
    assert rec.returncode == 0, rec.stderr
    results = json.loads(rec.stdout)
    if point == "fetch:undo":  # irreversible step: no undo runs, so no crash point either
        assert results == [] and json.loads(run.stdout)["state"] == "rolled-back"
    else:
        assert [r["state"] for r in results] == ["rolled-back"]
        assert results[0]["error"] == "step 'arm' failed: RuntimeError: demo failure in arm"
    assert tree(root) == old
    assert_closed_and_backups_intact(root, old)


@pytest.mark.parametrize(
    ("first", "second", "forward"),
    [("replace-ko:saved", "write-a:undo", False), ("replace-ko:done", "arm:after", True)],
)
def test_crash_during_recovery_then_recover_again(
    root: Path, old_new: Any, first: str, second: str, forward: bool
) -> None:
    old, new = old_new
    assert spawn(root, "run", crash=first).returncode == -signal.SIGKILL
    assert spawn(root, "recover", crash=second).returncode == -signal.SIGKILL
    with state_of(root).lock(command="test") as lk:
        [txn] = lk.state.journal().open_transactions()
        assert txn["state"] == "interrupted"
    rec = spawn(root, "recover")
    assert [r["state"] for r in json.loads(rec.stdout)] == [
        "committed" if forward else "rolled-back"
    ]
    assert tree(root) == (new if forward else old)
    assert_closed_and_backups_intact(root, old)


def test_recover_with_unknown_kind_keeps_txn_open(root: Path, old_new: Any) -> None:
    old, _ = old_new
    assert spawn(root, "run", crash="write-a:saved").returncode == -signal.SIGKILL
    st = state_of(root)
    with st.lock(command="test"):
        [res] = Transaction.recover(st, {})
        assert not res.closed and res.state == "interrupted"
        assert "cannot be recovered: no steps are registered for transaction kind 'demo'" in (
            res.error or ""
        )
        assert len(st.journal().open_transactions()) == 1
        [res] = Transaction.recover(st, H.REGISTRY)
    assert res.state == "rolled-back" and tree(root) == old


# ---------------------------------------------------------------------------- lock
def test_lock_names_the_holding_process_and_waits(tmp_path: Path) -> None:
    st = state_of(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, str(HELPER), str(tmp_path), "hold", "20"],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockedError) as err:
            st.lock(command="upgrade x").acquire()
        msg = str(err.value)
        assert f"locked by pid {holder.pid} (hwmgr upgrade be2net) since 20" in msg
        assert err.value.exit_code == EXIT_LOCKED and "\n" not in msg
        start = time.monotonic()
        with pytest.raises(LockedError, match=r"\(waited 0\.[5-9]s\)|\(waited [1-9]"):
            st.lock(command="upgrade x", wait=0.5).acquire()
        assert 0.5 <= time.monotonic() - start < 3
    finally:
        holder.kill()
        holder.wait()
    # the dead holder's info is still in the file, but flock died with it
    assert f'"pid": {holder.pid}' in (tmp_path / "var/lib/hwmgr/lock").read_text()
    with st.lock(command="after") as lk:
        assert lk.holder()["pid"] == os.getpid() and st.locked
        with st.lock(command="nested"):  # re-entrant for the same StateDir
            assert st.locked
        assert st.locked
    assert not st.locked


def test_second_process_waits_for_release(tmp_path: Path) -> None:
    st = state_of(tmp_path)
    with st.lock(command="upgrade be2net"):
        busy = spawn(tmp_path, "try", "0")
        assert busy.returncode == EXIT_LOCKED
        assert f"locked by pid {os.getpid()} (hwmgr upgrade be2net)" in busy.stderr
        waiter = subprocess.Popen(
            [sys.executable, str(HELPER), str(tmp_path), "try", "10"],
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        # the waiter's clock starts before it prints "trying"; release only after that line,
        # so the wait it reports is causally at least the sleep, however slow its start-up
        assert waiter.stdout is not None and waiter.stdout.readline().strip() == "trying"
        time.sleep(0.6)
    out, _ = waiter.communicate(timeout=15)
    assert waiter.returncode == 0
    assert 0.6 <= float(out.split()[2].rstrip("s")) < 10


# ---------------------------------------------------------------------------- history, backups
def test_history_newest_first_with_notes_and_results(tmp_path: Path) -> None:
    st = StateDir(Host(tmp_path, SubprocessRunner()), "/srv/state")
    assert history(st) == [] and not (tmp_path / "srv").exists()  # reading creates nothing

    def do(ctx: Ctx) -> None:
        ctx.note(before={"mbps": 100})
        ctx.host.write_bytes("/f", ctx.params["v"].encode())

    reg = {"up": lambda p: [Step("w", do, None, lambda c: c.host.exists("/f"))]}
    with st.lock(command="test"):
        ids = [Transaction(st, reg, "up", {"v": v}, target=v).run().id for v in ("1", "2")]
    st.journal().add_results(ids[0], after={"mbps": 780})
    hist = history(st)
    assert [t["id"] for t in hist] == ids[::-1] and [t["target"] for t in hist] == ["2", "1"]
    assert hist[1]["notes"] == {"before": {"mbps": 100}}
    assert hist[1]["results"] == {"after": {"mbps": 780}} and hist[0]["results"] == {}
    assert [t["id"] for t in history(st, limit=1)] == [ids[1]]
    assert [t["id"] for t in history(st, target="1")] == [ids[0]]


def test_backup_is_taken_once_and_checked_on_restore(tmp_path: Path) -> None:
    st = StateDir(Host(tmp_path, SubprocessRunner()), "/state")
    st.host.write_bytes("/lib/m.ko", b"original")
    first = st.backup_file("/lib/m.ko", 7)
    st.host.write_bytes("/lib/m.ko", b"half-written")
    again = st.backup_file("/lib/m.ko", 7)  # a re-run step must not back up the new file
    assert again == first and first["sha256"] == hashlib.sha256(b"original").hexdigest()
    st.restore_file(first)
    assert (tmp_path / "lib/m.ko").read_bytes() == b"original"
    absent = st.backup_file("/lib/new.ko", 7)
    st.host.write_bytes("/lib/new.ko", b"x")
    st.restore_file(absent)
    assert not (tmp_path / "lib/new.ko").exists() and absent["existed"] is False
    (tmp_path / first["backup"].lstrip("/")).write_bytes(b"corrupt")
    st.host.write_bytes("/lib/m.ko", b"new")
    with pytest.raises(HwmgrError, match="sha256 does not match the journal; refusing"):
        st.restore_file(first)
    assert (tmp_path / "lib/m.ko").read_bytes() == b"new"


def test_corrupt_journal_is_a_one_line_error(tmp_path: Path) -> None:
    st = StateDir(Host(tmp_path, SubprocessRunner()), "/state")
    (tmp_path / "state").mkdir()
    (tmp_path / "state/journal.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BadInputError, match=r"journal.sqlite: not a usable hwmgr journal"):
        history(st)


def test_a_signal_after_the_transaction_ended_is_held_until_the_command_ends(
        tmp_path: Path) -> None:
    """A Ctrl-C between a commit and the command's result (the lock's release, the outcome)
    made a committed apply exit 130, "interrupted" (test_apply_signals caught it): the
    transaction's handlers stay, noting the signal, until cli.main calls release()."""
    st = StateDir(Host(tmp_path, SubprocessRunner()), "/state")
    step = Step("one", lambda c: c.host.write_bytes("/out/one", b"x") and None,
                lambda c: None, lambda c: c.host.exists("/out/one"))
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a command has it
    try:
        _held_then_released(st, step)
    finally:
        signal.signal(signal.SIGINT, outer)  # pytest-xdist's worker has its own


def _held_then_released(st: StateDir, step: Step) -> None:
    from hwmgr.transaction import interrupt

    before = signal.getsignal(signal.SIGINT)
    with st.lock(command="test"):  # outside a command: the handler is back at once
        assert Transaction(st, {"k": lambda p: [step]}, "k", {}, target="t").run().ok
    assert signal.getsignal(signal.SIGINT) is before
    interrupt.command()  # as cli.main opens one
    try:
        with st.lock(command="test"):
            res = Transaction(st, {"k": lambda p: [step]}, "k", {}, target="t").run()
        assert res.ok and res.state == "committed"
        os.kill(os.getpid(), signal.SIGINT)  # after the commit: noted, not raised
        time.sleep(0.05)
    finally:
        late = interrupt.release()
    assert late == ["SIGINT"]
    assert signal.getsignal(signal.SIGINT) is before  # the command's own handler is back
    assert interrupt.release() == []
    with pytest.raises(KeyboardInterrupt):  # and a signal now interrupts as usual
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
