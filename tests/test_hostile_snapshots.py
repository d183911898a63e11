"""The hostile snapshot corpus (issue 9 §5): damaged snapshot directories and archives, each
through a `--root` verb in-process and held to the rules of tests/support/hostile.py; the
middle case of every kind also through the real `python -m hwmgr` entry point."""

from __future__ import annotations

from typing import Iterator

import pytest
from support.hostile import Case, Sandbox, run_kind, sample_through_cli, sandbox_dir
from support.hostile_snap import dir_kinds
from support.hostile_tar import tar_kinds

pytestmark = pytest.mark.slow  # hundreds of hostile snapshots through the real CLI


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


def test_one_case_per_kind_through_the_real_cli(sandbox: Sandbox) -> None:
    """The entry point a user runs (a fresh process, real pipes) behaves like main()."""
    failures = sample_through_cli(KINDS, sandbox)
    assert not failures, "\n".join(failures)
