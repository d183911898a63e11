"""The hostile snapshot corpus (issue 9 §5): over a thousand damaged snapshot directories and
archives, each through a `--root` verb in-process, each held to the rules of tests/hostile.py;
one case of every kind also through the real `python -m hwmgr` entry point."""

from __future__ import annotations

import subprocess
from typing import Iterator

import pytest
from hostile import (
    CASE_TIMEOUT,
    Case,
    CaseTimeout,
    Outcome,
    Sandbox,
    run_case,
    run_kind,
    sandbox_dir,
)
from hostile_snap import dir_kinds
from hostile_tar import tar_kinds
from support import run_cli


def _kinds() -> dict[str, list[Case]]:
    kinds = {**dir_kinds(), **dir_kinds(tar=True)}
    tars = tar_kinds()
    assert not set(kinds) & set(tars)
    return {**kinds, **tars}


KINDS = _kinds()


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    with sandbox_dir(tmp_path_factory.mktemp("hostile-snap")) as base:
        yield Sandbox(base)


def test_corpus_is_big_enough() -> None:
    counts = {k: len(v) for k, v in KINDS.items()}
    assert sum(counts.values()) >= 1000, counts
    assert all(n > 0 for n in counts.values()), counts
    names = [c.name for cases in KINDS.values() for c in cases]
    assert len(names) == len(set(names)), "case names must be unique"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_hostile_snapshots(kind: str, sandbox: Sandbox) -> None:
    n, failures = run_kind(KINDS[kind], sandbox)
    assert not failures, f"{len(failures)} of {n} {kind} cases failed:\n" + "\n".join(
        failures[:30])


def _subprocess(sb: Sandbox) -> object:
    env = {"TMPDIR": str(sb.tmp), "XDG_CACHE_HOME": str(sb.scratch / "cache"),
           "HWMGR_STATE_DIR": "", "HWMGR_CONFIG": "", "HWMGR_CATALOG_DIR": "", "COLUMNS": "150"}

    def run(argv: list[str]) -> Outcome:
        try:
            res = run_cli(*argv, env=env, timeout=3 * CASE_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise CaseTimeout(f"no answer within {exc.timeout:g}s") from None
        return Outcome(res.returncode, res.stdout, res.stderr)

    return run


def test_one_case_per_kind_through_the_real_cli(sandbox: Sandbox) -> None:
    """The entry point a user runs (a fresh process, real pipes) behaves like main()."""
    failures = []
    for _kind, cases in sorted(KINDS.items()):
        case = cases[len(cases) // 2]
        problems = run_case(case, sandbox, sandbox.scratch / "sub", _subprocess(sandbox))
        if problems:
            failures.append(f"{case.name}: " + "; ".join(problems))
    assert not failures, "\n".join(failures)
