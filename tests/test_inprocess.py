"""tests/support/__init__.py's in-process `run_cli`: the same results as a real `python -m hwmgr`,
and nothing of one run (environment, cwd, signals, module globals) left for the next."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import (
    HOSTS,
    HWMGR,
    PURE_GLOBALS,
    REPO,
    RESET_GLOBALS,
    run_cli,
    run_cli_process,
    run_json,
)

PKG = REPO / "hwmgr"


def rebound_globals() -> dict[str, set[str]]:
    """{module: names} of every `global` statement in hwmgr (module state set at run time)."""
    out: dict[str, set[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        mod = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Global):
                out.setdefault(mod, set()).update(node.names)
    return out


def test_every_rebound_global_is_reset_or_pure() -> None:
    known = {m: set(RESET_GLOBALS.get(m, {})) | PURE_GLOBALS.get(m, set())
             for m in set(RESET_GLOBALS) | set(PURE_GLOBALS)}
    found = rebound_globals()
    unknown = {m: sorted(n - known.get(m, set())) for m, n in found.items()
               if n - known.get(m, set())}
    assert not unknown, ("module state an in-process run would leak: add it to "
                         f"tests/support/__init__.py RESET_GLOBALS (or PURE_GLOBALS): {unknown}")
    stale = {m: sorted(n - found.get(m, set())) for m, n in known.items()
             if n - found.get(m, set())}
    assert not stale, f"no longer rebound in hwmgr, drop from tests/support/__init__.py: {stale}"


@pytest.mark.parametrize("argv", [
    ("inventory", "--root", str(HOSTS / "seed000-ustor"), "--json"),
    ("check", "--root", str(HOSTS / "seed002-before"), "--json"),
    ("inventory", "--root", "/nonexistent/root"),
    ("no-such-verb",),
])
def test_in_process_run_matches_a_real_process(argv: tuple[str, ...]) -> None:
    inproc, proc = run_cli(*argv), run_cli_process(*argv)
    assert (inproc.returncode, inproc.stderr) == (proc.returncode, proc.stderr)
    if "--json" in argv:
        assert json.loads(inproc.stdout) == json.loads(proc.stdout)
    else:
        assert inproc.stdout == proc.stdout


def test_a_run_leaves_nothing_behind(tmp_path: Path) -> None:
    before = (dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGTERM), sys.stdout)
    os.chdir(tmp_path)
    try:
        rc, doc = run_json("inventory", "--root", str(HOSTS / "seed000-ustor"),
                           env={"HWMGR_TEST_MARK": "1", "COLUMNS": "99"})
        assert rc == 0 and doc["command"] == "inventory"
        assert os.getcwd() == str(tmp_path)
    finally:
        os.chdir(before[1])
    assert "HWMGR_TEST_MARK" not in os.environ and dict(os.environ) == before[0]
    assert (signal.getsignal(signal.SIGTERM), sys.stdout) == before[2:]
    pciids = sys.modules.get("hwmgr.catalog.pciids")
    assert pciids is None or pciids._default is None


def test_a_run_over_its_time_raises_timeout_expired() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli("check", "--root", str(HOSTS / "seed002-before"), timeout=0.001)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert run_cli("--version").stdout.startswith("hwmgr ")  # and the next run is whole


def test_a_crash_point_runs_in_its_own_process() -> None:
    """HWMGR_TEST_CRASH_AT makes hwmgr SIGKILL itself: run_cli must not run that in pytest."""
    res = run_cli("--version", env={"HWMGR_TEST_CRASH_AT": "nothing:before"})
    assert res.returncode == 0 and res.stdout.startswith("hwmgr ")
    assert res.args[:3] == HWMGR and run_cli("--version").args[0] == "hwmgr.cli.main"
