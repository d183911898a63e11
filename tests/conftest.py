"""Shared pytest fixtures: paths to the repo, bundled host snapshots and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
HOSTS = FIXTURES / "hosts"
HWMGR = [sys.executable, "-m", "hwmgr"]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """Run the real CLI in a subprocess; returns CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [*HWMGR, *args], capture_output=True, text=True, timeout=timeout, env=full_env,
        cwd=REPO, check=False,
    )


def run_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    """Run the CLI with --json and parse its one JSON object."""
    res = run_cli(*args, "--json", env=env)
    try:
        doc = json.loads(res.stdout)
    except json.JSONDecodeError as exc:  # pragma: no cover - shows the output on failure
        raise AssertionError(f"not JSON: {res.stdout!r} {res.stderr!r}") from exc
    return res.returncode, doc


@pytest.fixture
def hosts_dir() -> Path:
    return HOSTS


@pytest.fixture
def copy_host(tmp_path: Path):
    """Copy a bundled snapshot to a temp dir so a test may damage it."""

    def _copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(HOSTS / name, dest, symlinks=True)
        return dest

    return _copy
