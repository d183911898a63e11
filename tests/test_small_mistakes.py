"""Small mistakes answered truthfully: each names what is wrong, exits with its documented
code and changes nothing (issue 28)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support import HOSTS, REPO, python_runs_as_nobody, run_cli

SEED = str(HOSTS / "seed002-before")


def test_apply_names_an_interface_the_host_does_not_have() -> None:
    """It said "nothing to apply: no drift" (exit 4) for a typo."""
    res = run_cli("apply", "--root", SEED, "--interface", "eth9", "--dry-run")
    assert res.returncode == 3, res.stderr
    assert "--interface eth9: no such interface" in res.stderr and "enp1s0f0" in res.stderr
    res = run_cli("apply", "--root", SEED, "--interface", "enp1s0f0", "--dry-run")
    assert res.returncode == 0 and "enp1s0f0 ring.rx: 256 → 4096" in res.stdout


def test_apply_takes_checks_layer_words() -> None:
    """`check --layer setting` was accepted and `apply --layer setting` refused."""
    plans = {}
    for words in ("setting", "settings", "setting,sysctl", "settings,sysctls"):
        res = run_cli("apply", "--root", SEED, "--layer", words, "--dry-run", "--json")
        assert res.returncode == 0, (words, res.stderr)
        plans[words] = json.loads(res.stdout)["data"]["changes"]
    assert len({json.dumps(p) for p in plans.values()}) == 1 and plans["setting"]
    res = run_cli("apply", "--root", SEED, "--layer", "driver", "--dry-run")
    assert res.returncode == 2 and "hwmgr upgrade" in res.stderr
    assert run_cli("check", "--root", SEED, "--layer", "setting").returncode == 5


def test_snapshot_refuses_an_archive_name_it_would_not_write(tmp_path: Path) -> None:
    for name in ("x.zip", "x.tar.xz", "x.tar"):
        res = run_cli("snapshot", str(tmp_path / name))
        assert res.returncode == 2, res.stderr
        assert f"{name}: hwmgr writes a directory or a .tar.gz" in res.stderr
        assert not (tmp_path / name).exists()


def test_inventory_refuses_a_class_that_is_not_hex() -> None:
    res = run_cli("inventory", "--root", SEED, "--class", "zz")
    assert res.returncode == 2 and "--class zz: expected 1 to 6 hex digits" in res.stderr
    res = run_cli("inventory", "--root", SEED, "--class", "0x02", "--json")
    classes = {d["class"][:2] for d in json.loads(res.stdout)["data"]["devices"]}
    assert res.returncode == 0 and classes == {"02"}


def test_no_catalog_with_a_catalog_is_refused() -> None:
    res = run_cli("inventory", "--root", SEED, "--no-catalog", "--catalog", "x.json")
    assert res.returncode == 2 and "--no-catalog and --catalog" in res.stderr


def test_a_check_whose_prom_file_fails_is_not_recorded(tmp_path: Path) -> None:
    """The check history is what was checked and reported; a failed run is neither."""
    state = tmp_path / "state"
    ok = run_cli("check", "--state-dir", str(state), "--prom", str(tmp_path / "a.prom"))
    assert ok.returncode in (0, 5, 7, 11), ok.stderr
    db = state / "checks.sqlite"
    count = sqlite3.connect(str(db)).execute("SELECT count(*) FROM checks").fetchone()[0]
    res = run_cli("check", "--state-dir", str(state), "--prom",
                  str(tmp_path / "nosuch" / "b.prom"))
    assert res.returncode == 3 and "b.prom" in res.stderr, res.stderr
    after = sqlite3.connect(str(db)).execute("SELECT count(*) FROM checks").fetchone()[0]
    assert (count, after) == (1, 1)


@pytest.mark.skipif(os.geteuid() != 0 or not python_runs_as_nobody(),
                    reason="needs root to drop privileges to nobody")
@pytest.mark.parametrize("verb, says", [
    ("apply", "it sets NIC settings and sysctls and writes their persistence files"),
    ("revert", "it restores NIC settings, sysctls and their persistence files")])
def test_non_root_apply_and_revert_say_what_they_need(verb: str, says: str,
                                                      tmp_path: Path) -> None:
    """Both said "this command changes drivers", which they do not."""
    res = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
         "-m", "hwmgr", verb, "--yes", "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, cwd=REPO, check=False, timeout=120,
        env={**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(REPO)})
    assert res.returncode == 13, res.stderr
    assert f"must run as root: {says}" in res.stderr and "drivers" not in res.stderr


def test_mirror_sync_takes_json_after_dir_and_each_sub_action_has_examples(
        tmp_path: Path) -> None:
    res = run_cli("mirror", "sync", str(tmp_path / "m"), "--driver", "be2net", "--json")
    assert res.returncode == 3 and json.loads(res.stdout)["status"] == "error"
    for argv in (["mirror", "sync", "--help"], ["catalog", "show", "--help"],
                 ["catalog", "trust", "--help"], ["catalog", "update", "--help"]):
        res = run_cli(*argv)
        assert res.returncode == 0 and "examples:" in res.stdout, argv
        assert f"  hwmgr {argv[0]} {argv[1]} " in res.stdout, res.stdout
    res = run_cli("mirror", "--help")
    assert "--from FILE` places files the admin already has (no network)." in " ".join(
        res.stdout.split())
