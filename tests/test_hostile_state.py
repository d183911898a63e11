"""The hostile state-dir corpus (issue 25 §1): a committed upgrade's journal, the check
history and the armed expectation, damaged one field at a time, read by `history`, `plan
rollback` and `verify`; every case held to the rules of tests/support/hostile.py (never exit 70, one
line naming the file and field, no hang). The whole corpus is slow; a sample of every kind
runs with the fast tests."""

from __future__ import annotations

from typing import Iterator

import pytest
from support.hostile import Case, Sandbox, run_kind, sandbox_dir
from support.hostile_state import state_kinds

KINDS = state_kinds()
SAMPLE_EVERY = 30  # the fast run: every 30th case of each kind (~1 s)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    with sandbox_dir(tmp_path_factory.mktemp("hostile-state")) as base:
        yield Sandbox(base)


def _report(kind: str, cases: list[Case], sandbox: Sandbox) -> None:
    n, failures = run_kind(cases, sandbox)
    assert not failures, f"{len(failures)} of {n} {kind} cases failed:\n" + "\n".join(
        failures[:30])


def test_corpus_covers_every_state_file() -> None:
    counts = {k: len(v) for k, v in KINDS.items()}
    assert set(counts) == {"state-journal", "state-params", "state-expect", "state-checks"}
    assert all(n >= 20 for n in counts.values()), counts
    names = [c.name for cases in KINDS.values() for c in cases]
    assert len(names) == len(set(names)), "case names must be unique"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_hostile_state_sample(kind: str, sandbox: Sandbox) -> None:
    _report(kind, KINDS[kind][::SAMPLE_EVERY], sandbox)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_hostile_state(kind: str, sandbox: Sandbox) -> None:
    _report(kind, KINDS[kind], sandbox)


def test_damaged_journal_line_names_field_and_recovery(sandbox: Sandbox) -> None:
    """The exact line a user sees for a damaged row: file, transaction, column, the remedy."""
    case = next(c for c in KINDS["state-journal"] if c.name == "state-journal/params=int/plan")
    from support.hostile import run_inproc, sandboxed_env

    with sandboxed_env(sandbox):
        work = sandbox.scratch / "one"
        work.mkdir(exist_ok=True)
        res = run_inproc(case.build(work, sandbox))
    assert res.rc == 8, res
    line, = res.stderr.splitlines()
    assert "journal.sqlite: transaction 1 params: expected a JSON object, got an integer" in line
    assert "restore it from a backup, or move it aside" in line


def test_damaged_upgrade_record_names_field(sandbox: Sandbox) -> None:
    case = next(c for c in KINDS["state-params"]
                if c.name == "state-params/backup.saved#4/plan")
    from support.hostile import run_inproc, sandboxed_env

    with sandboxed_env(sandbox):
        work = sandbox.scratch / "two"
        work.mkdir(exist_ok=True)
        res = run_inproc(case.build(work, sandbox))
    assert res.rc == 8, res
    assert "transaction 1 step backup saved.6.1.0-56-amd64.hwmgrtest.version: expected a " \
        "string or null, got an integer" in res.stderr


def test_recover_refuses_a_damaged_journal(sandbox: Sandbox) -> None:
    """recover reads the open transactions first: a damaged one is exit 8 with the remedy,
    and nothing is settled (the journal is unchanged)."""
    import shutil
    import sqlite3

    from support.hostile import run_inproc, sandboxed_env
    from support.hostile_state import JOURNAL_FIXTURE

    state = sandbox.scratch / "recover-state"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir()
    shutil.copy(JOURNAL_FIXTURE, state / "journal.sqlite")
    con = sqlite3.connect(state / "journal.sqlite")
    con.execute("UPDATE transactions SET params=5")
    con.commit()
    con.close()
    before = (state / "journal.sqlite").read_bytes()
    with sandboxed_env(sandbox):
        res = run_inproc(["recover", "--state-dir", str(state)])
    assert res.rc == 8, res
    line, = res.stderr.splitlines()
    assert "transaction 1 params: expected a JSON object" in line and "restore it" in line
    assert (state / "journal.sqlite").read_bytes() == before
