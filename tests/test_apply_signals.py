"""Ctrl-C / SIGTERM during a real `hwmgr apply` in a namespace of our own: the transaction ends
rolled back (or, if the signal came after the last step, committed), never half-done, with one
line on stderr saying so; the live values and the persistence files are exactly the old ones.

The signal is sent by the engine's test hook (`HWMGR_TEST_CRASH_AT=seq:phase:INT`) at every step
boundary, and from outside at random moments (the outcome counts are printed with -s).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.apply_env import REPO, ApplyNs, tree_bytes

pytestmark = pytest.mark.root

CHANGES = [
    {"interface": "v0", "item": "features.gro", "current": "off", "wanted": "on"},
    {"interface": "v0", "item": "txqueuelen", "current": 1000, "wanted": 4242},
    {"interface": None, "item": "sysctl.net.ipv4.ip_forward", "current": 0, "wanted": 1},
]
STEPS = 5  # three settings, the .link file, the sysctl.d file
OLD = ("off", 1000, "0")
NEW = ("on", 4242, "1")


def _live(env: ApplyNs) -> tuple[str, int, str]:
    return env.gro(), env.qlen(), env.sysctl("net.ipv4.ip_forward")


def _nothing_open(env: ApplyNs) -> bool:
    rec = env.hwmgr("recover", "--state-dir", env.state, "--json")
    assert rec.returncode == 0 and json.loads(rec.stdout)["data"] == [], rec.stdout
    return True


def _verdicts(stderr: str) -> list[str]:
    """The result lines (the plan printed before the run goes to stderr too)."""
    return [ln for ln in stderr.splitlines() if ln.startswith("hwmgr ")]


def _one_rolled_back_line(stderr: str, sig: str) -> None:
    lines = _verdicts(stderr)
    assert len(lines) == 1, stderr
    assert "rolled back: interrupted by " + sig in lines[0], stderr
    assert "the host is as it was before" in lines[0]


def test_sigint_after_a_step_rolls_back_in_one_line(ns: ApplyNs) -> None:
    before = tree_bytes(ns.root)
    res = ns.apply(CHANGES, "--yes", env={"HWMGR_TEST_CRASH_AT": "1:after:INT"})
    assert res.returncode == 130, res.stderr
    _one_rolled_back_line(res.stderr, "SIGINT after step 'set v0:txqueuelen'")
    _answered(res.stderr, 2, False)
    assert _live(ns) == OLD and tree_bytes(ns.root) == before
    assert _nothing_open(ns)
    plan = ns.apply(CHANGES, "--dry-run")  # nothing open: the plan says nothing about it
    assert plan.returncode == 0 and "hwmgr recover" not in plan.stdout


PHASES = ("before", "saved", "after", "done")
# every step once, the four phases and both signals in turn, and the last step's "done" (a
# signal after every step ran, before the commit): each is a whole apply in a namespace
POINTS = [*(f"{i}:{PHASES[i % 4]}:{('INT', 'TERM')[i % 2]}" for i in range(STEPS)),
          f"{STEPS - 1}:done:INT"]


@pytest.mark.slow  # one apply per boundary
@pytest.mark.parametrize("point", POINTS)
def test_a_signal_at_every_boundary_leaves_the_old_state(ns: ApplyNs, point: str) -> None:
    before = tree_bytes(ns.root)
    res = ns.apply(CHANGES, "--yes", env={"HWMGR_TEST_CRASH_AT": point})
    assert res.returncode == 130, res.stderr
    _one_rolled_back_line(res.stderr, "SIG" + point.rsplit(":", 1)[1])
    _answered(res.stderr, int(point.split(":")[0]) + 1, point.endswith("TERM"))
    assert _live(ns) == OLD and tree_bytes(ns.root) == before
    assert _nothing_open(ns)


def _answered(stderr: str, step: int, term: bool) -> None:
    """The signal was answered at once, naming the step being undone, before the result."""
    who = "interrupted by SIGTERM" if term else "interrupted"
    lines = stderr.splitlines()
    at = [i for i, x in enumerate(lines) if x.startswith(f"hwmgr: {who}: undoing step {step} (")
          and x.endswith("); Ctrl-C again is ignored until the host is consistent")]
    assert len(at) == 1, stderr
    assert at[0] < lines.index(_verdicts(stderr)[0]), stderr


REVERT_STEPS = 5  # the three settings, the .link file, the sysctl.d file, put back


@pytest.mark.slow  # an apply and an interrupted revert per step
@pytest.mark.parametrize("seq", range(REVERT_STEPS))
def test_a_signal_at_each_revert_step_is_answered_and_undone(ns: ApplyNs, seq: int) -> None:
    """The revert stops, undoes what it had put back, exits 130: the applied state stands
    byte for byte, and the revert runs to the end afterwards."""
    before = tree_bytes(ns.root)
    assert ns.apply(CHANGES, "--yes").returncode == 0
    applied = tree_bytes(ns.root)
    sig = ("INT", "TERM")[seq % 2]
    res = ns.hwmgr("revert", "--state-dir", ns.state, "--yes",
                   env={"HWMGR_TEST_CRASH_AT": f"{seq}:before:{sig}"})
    assert res.returncode == 130, res.stderr
    _answered(res.stderr, seq + 1, sig == "TERM")
    assert "rolled back: interrupted by SIG" + sig in res.stderr, res.stderr
    assert _live(ns) == NEW and tree_bytes(ns.root) == applied and _nothing_open(ns)
    assert ns.hwmgr("revert", "--state-dir", ns.state, "--yes").returncode == 0
    assert _live(ns) == OLD and tree_bytes(ns.root) == before


@pytest.mark.slow
def test_a_signal_during_the_undo_of_a_failed_apply_finishes_the_undo(ns: ApplyNs) -> None:
    before = tree_bytes(ns.root)
    bad = [*CHANGES, {"interface": "v0", "item": "channels.rx", "wanted": 64}]  # refused
    res = ns.apply(bad, "--yes", env={"HWMGR_TEST_CRASH_AT": "1:undo:INT"})
    assert res.returncode == 130, res.stderr
    assert "rolled back: step 'set v0:channels.rx' failed" in res.stderr
    assert _live(ns) == OLD and tree_bytes(ns.root) == before and _nothing_open(ns)


def _wait_for_lock(lock: Path, proc: subprocess.Popen) -> None:
    """Until `proc` (ip netns exec execs it: same pid) holds the host lock, or ended."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if f'"pid": {proc.pid},' in lock.read_text():
                return
        except OSError:
            pass
        time.sleep(0.002)


@pytest.mark.slow  # 12 applies, each interrupted at a random moment from outside
def test_sigint_at_random_moments_ends_old_or_new(ns: ApplyNs) -> None:
    before = tree_bytes(ns.root)
    path = ns.tmp / "changes.json"
    path.write_text(json.dumps(CHANGES))
    argv = ["ip", "netns", "exec", ns.ns, sys.executable, "-m", "hwmgr", "apply", "--changes",
            str(path), "--persist-root", str(ns.root), "--state-dir", ns.state, "--yes"]
    rng = random.Random(27)
    counts = {"rolled back": 0, "committed (signal after the commit)": 0}
    for _ in range(12):
        env = dict(os.environ)
        env.pop("SSH_CONNECTION", None)
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        _wait_for_lock(Path(ns.state) / "lock", proc)  # the run is past start-up and planning
        time.sleep(rng.uniform(0, 0.2))  # an apply's transaction takes about 0.1 s here
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        out, err = proc.communicate(timeout=60)
        if proc.returncode == 0:
            counts["committed (signal after the commit)"] += 1
            assert _live(ns) == NEW
            assert ns.hwmgr("revert", "--state-dir", ns.state, "--yes").returncode == 0
        else:
            assert proc.returncode == 130, (proc.returncode, err)
            assert len(_verdicts(err)) == 1, err
            assert "interrupted" in err and "hwmgr recover" not in err, err
            counts["rolled back"] += 1
        assert _live(ns) == OLD and tree_bytes(ns.root) == before and _nothing_open(ns)
    print(f"\nSIGINT at random moments of apply: {counts}")
    assert sum(counts.values()) == 12


@pytest.mark.slow  # check on this machine takes tens of seconds
def test_an_open_transaction_is_named_by_dry_run_and_check_until_recovered(
        ns: ApplyNs, tmp_path: Path) -> None:
    """SIGKILL cannot be deferred: the transaction stays open; apply --dry-run and check say
    so until `hwmgr recover`, whose line says what happened once."""
    res = ns.apply(CHANGES, "--yes", env={"HWMGR_TEST_CRASH_AT": "1:done"})
    assert res.returncode in (-9, 137)
    note = "is still running: the host may be half-changed; run `hwmgr recover`"
    plan = ns.apply(CHANGES, "--dry-run")
    assert plan.returncode == 0 and "transaction #1 (apply sysctl,v0) " + note in plan.stdout
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps({
        "schema_version": 2, "catalog_version": "2026.11.0", "released": "2026-11-23",
        "drivers": {"veth": {
            "description": "veth", "version_scheme": "driver", "devices": [], "versions": {},
            "netdev_drivers": ["veth"], "settings": {"txqueuelen": {"min": 1}, "evidence": "t"}}}}))
    check = ns.hwmgr("check", "--catalog", str(cat), "--state-dir", ns.state,
                     "--layer", "settings")
    assert note in check.stdout, (check.returncode, check.stdout, check.stderr)
    rec = ns.hwmgr("recover", "--state-dir", ns.state)
    assert rec.returncode == 0, rec.stderr
    assert rec.stdout.strip().splitlines() == [
        "transaction #1 apply sysctl,v0: rolled-back (interrupted after step "
        "'set v0:txqueuelen', before the point of no return)"]
    assert _live(ns) == OLD
    assert "hwmgr recover" not in ns.apply(CHANGES, "--dry-run").stdout
