"""The field hosts (tests/fixtures/field/, issue 22 item 5): the committed snapshot trees are
what make_field_hosts.py makes of their descriptions, `hwmgr inventory --json --root` reads
every one without errors and shows every described function with the driver, version and
firmware its source printed, and bench/coverage counts them."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest

REPO = Path(__file__).resolve().parent.parent
FIELD = REPO / "tests" / "fixtures" / "field"
NAMES = sorted(p.parent.name for p in FIELD.glob("*/host.json"))


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_field_hosts", REPO / "tests" / "fixtures" / "make_field_hosts.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tree(root: Path) -> Iterator[Tuple[str, str, bytes]]:
    """(relative path, kind, content or link target) of everything under root, sorted."""
    for dirpath, dirnames, filenames in os.walk(root):  # links are not followed
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                yield rel, "link", os.readlink(p).encode()
            elif p.is_file():
                yield rel, "file", p.read_bytes()


def _ethtool_fields(lines: list) -> Dict[str, str]:
    out = {}
    for line in lines:
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def _hwmgr(*argv: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cache)}
    return subprocess.run([sys.executable, "-m", "hwmgr", *argv], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=120, check=False)


def test_there_are_field_hosts_with_sources() -> None:
    assert len(NAMES) >= 15
    for name in NAMES:
        doc = json.loads((FIELD / name / "host.json").read_text())
        readme = (FIELD / name / "README.md").read_text()
        assert doc["source"]["url"] in readme, name  # every host names its source


def test_committed_trees_equal_a_regeneration(tmp_path: Path) -> None:
    written = _generator().generate(tmp_path)
    assert written == NAMES
    for name in NAMES:
        fresh = list(_tree(tmp_path / name / "snapshot"))
        committed = list(_tree(FIELD / name / "snapshot"))
        assert [e[:2] for e in fresh] == [e[:2] for e in committed], name
        assert fresh == committed, name


def test_a_bad_description_is_one_line_naming_the_field(tmp_path: Path) -> None:
    gen = _generator()
    bad = tmp_path / "field" / "bad"
    bad.mkdir(parents=True)
    doc = json.loads((FIELD / NAMES[0] / "host.json").read_text())
    doc["functions"][0]["device"] = "XYZ"
    (bad / "host.json").write_text(json.dumps(doc))
    with pytest.raises(gen.DescriptionError) as err:
        gen.generate(tmp_path / "out", field=tmp_path / "field")
    want = f"{bad / 'host.json'}.functions[0].device: expected 4 lowercase hex digits"
    assert str(err.value) == want
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.slow  # one inventory per host, in a process of its own
@pytest.mark.parametrize("name", NAMES)
def test_inventory_reads_every_described_function(name: str, tmp_path: Path) -> None:
    doc = json.loads((FIELD / name / "host.json").read_text())
    res = _hwmgr("inventory", "--json", "--root", str(FIELD / name / "snapshot"), cache=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["errors"] == [] and out["status"] == "ok", out
    data = out["data"]
    assert data["host"] == {"hostname": doc["hostname"], "kernel": doc["kernel"]}
    devices = {d["address"]: d for d in data["devices"]}
    assert set(devices) == {f["address"] for f in doc["functions"]}
    for fn in doc["functions"]:
        dev = devices[fn["address"]]
        assert dev["class"] == fn["class"][:4] and dev["prog_if"] == fn["class"][4:]
        for key in ("vendor", "device", "subsystem_vendor", "subsystem_device"):
            assert dev[f"{key}_id"] == fn.get(key), (fn["address"], key)
        assert dev["pci_driver"] == fn.get("driver")
        assert dev["interfaces"] == fn.get("interfaces", [])
        printed = fn.get("ethtool_i")
        if printed:  # what ethtool printed wins: driver, version, firmware as printed
            eth = _ethtool_fields(next(iter(printed.values())))
            assert (dev["driver"], dev["driver_version"], dev["driver_version_source"]) == (
                eth["driver"], eth["version"], "ethtool")
            assert dev["firmware_version"] == (eth.get("firmware-version") or None)
        elif fn.get("driver") in doc.get("modules", {}):
            assert (dev["driver"], dev["driver_version"], dev["driver_version_source"]) == (
                fn["driver"], doc["modules"][fn["driver"]], "sysfs")
        else:  # nothing printed a version: inventory must not find one
            assert dev["driver_version"] is None


@pytest.mark.heavy
def test_coverage_counts_readable_versions(tmp_path: Path) -> None:
    """bench/coverage on one host with two i40e functions (versions from sysfs) and one whose
    RAID function shows no version (not counted)."""
    res = subprocess.run(
        [sys.executable, "bench/coverage", str(FIELD / "pfring780-i40e-x710" / "snapshot"),
         str(FIELD / "omv959-hpsa-p420i" / "snapshot")],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    rows = {ln.split("|")[1].strip(): ln for ln in res.stdout.splitlines() if ln.startswith("| ")}
    assert rows["pfring780-i40e-x710"].split("|")[3].strip() == "2"
    assert rows["omv959-hpsa-p420i"].split("|")[3].strip() == "0"
    total = next(ln for ln in res.stdout.splitlines() if ln.startswith("total: "))
    assert " of 2 NIC/storage functions" in total
