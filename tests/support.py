"""Helpers shared by the test modules (import from here, not from conftest: tests/lab has
its own conftest.py and both would be imported as the module `conftest`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
