"""`hwmgr catalog validate LAYER` from any directory: a site layer is checked over the catalog
in force (it was checked alone, failing with the whole catalog's required properties, unless
the shipped directory was named by a path that exists only in a checkout); `--alone` checks
the layer's own shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli

pytestmark = pytest.mark.slow  # the whole shipped catalog checked without a remembered verdict

LAYER = {"schema_version": 3, "drivers": {"igb": {"versions": {"5.18.7": {
    "status": "recommended", "reason": "our fleet's standard", "kernels": ["6.1.0-*-amd64"],
    "evidence": [{"title": "Intel igb 5.18.7 release",
                  "url": "https://github.com/intel/ethernet-linux-igb/releases/tag/v5.18.7",
                  "observed": "the release our SRPM is built from"}],
    "source": {"type": "srpm", "url": "https://mirror.example.com/igb-5.18.7-1.src.rpm",
               "verified": False}}}}}}
# a driver the catalog in force does not have: fine as a layer's shape, wrong where it applies
NEW_DRIVER = {"schema_version": 3, "drivers": {"nosuchdrv": {"versions": {"1.0": {
    "status": "known-good", "reason": "r",
    "evidence": LAYER["drivers"]["igb"]["versions"]["5.18.7"]["evidence"]}}}}}


def _write(tmp_path: Path, name: str, doc: dict) -> str:
    (tmp_path / name).write_text(json.dumps(doc))
    return name  # relative: the run's cwd is tmp_path, outside the checkout


def test_a_layer_is_checked_over_the_catalog_in_force(tmp_path: Path) -> None:
    name = _write(tmp_path, "20-igb.json", LAYER)
    env = {"HWMGR_SITE_CATALOG_DIR": str(tmp_path / "no-site")}
    res = run_cli("catalog", "validate", name, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert "20-igb.json: OK" in res.stdout and "over the catalog in force" in res.stdout
    res = run_cli("catalog", "validate", name, "--json", cwd=tmp_path, env=env)
    over = json.loads(res.stdout)["data"]["over"]
    assert over and any(Path(p).name == "hwmgr-catalog.json" for p in over)
    alone = run_cli("catalog", "validate", "--alone", name, cwd=tmp_path, env=env)
    assert alone.returncode == 0, alone.stderr  # no "required property" of a whole catalog
    assert "over the catalog" not in alone.stdout


def test_only_the_catalog_beneath_finds_what_the_layer_lacks(tmp_path: Path) -> None:
    name = _write(tmp_path, "30-new.json", NEW_DRIVER)
    env = {"HWMGR_SITE_CATALOG_DIR": str(tmp_path / "no-site")}
    alone = run_cli("catalog", "validate", "--alone", name, cwd=tmp_path, env=env)
    assert alone.returncode == 0, alone.stderr
    res = run_cli("catalog", "validate", name, cwd=tmp_path, env=env)
    assert res.returncode == 8, res.stdout
    assert "nosuchdrv" in res.stderr and "required property" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.splitlines()) <= 4, res.stderr
