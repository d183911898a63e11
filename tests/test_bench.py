"""The bench scripts still run against today's code (they are not part of the suite's timing:
one tiny round each, no numbers asserted beyond their own sanity checks)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the benchmarks

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv", [["bench/fetch", "--size-mb", "2", "--runs", "1",
                                   "--cut-mb", "1", "--warmup", "0"],
                                  ["bench/inventory", "--runs", "1"],
                                  ["bench/fleet", "--report", "200"],
                                  ["bench/fleet", "--snapshots", "5"],
                                  ["bench/fleet", "--contacted", "4"]],
                         ids=["fetch", "inventory", "fleet-report", "fleet-snapshots",
                              "fleet-contacted"])
def test_bench_script_runs(argv: list[str]) -> None:
    if os.geteuid() != 0:
        pytest.skip("the benches run as root (make bench)")
    res = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    if argv[1:2] == ["--snapshots"]:  # the playbook, then the batch check alone
        assert "of which check --roots-from" in res.stdout, res.stdout
    elif argv[1:2] == ["--contacted"]:  # the playbook's ratio to ping, cold then warm, its
        # hosts checked, each with a cache of its own that the cold night filled
        assert "compliant 3, drift 1" in res.stdout and "(4 of 4 filled" in res.stdout, \
            res.stdout
        for night in ("cold", "warm"):
            assert re.search(rf"fleet-check.yml, {night} cache: .* = \d+\.\d\dx ping",
                             res.stdout), res.stdout
    elif argv[0] == "bench/fleet":  # each goal printed with its ratio
        for what in ("fleet-report    ", "fleet-report peak RSS", "fleet-report CPU"):
            line = next((ln for ln in res.stdout.splitlines() if what in ln), "")
            assert "x the goal" in line, (what, res.stdout)
    if argv[0] == "bench/inventory":  # every row with a baseline, with a ratio
        for what in ("inventory --json, live ", "--root, 17 functions", "--root, 1,024 functions",
                     "--root, 4,096 functions", "hwmgr --help",
                     "1,024 functions, "):  # the row of the big synthetic catalog
            line = next((ln for ln in res.stdout.splitlines() if what in ln), "")
            assert line.count("x |") == 1, (what, res.stdout)
