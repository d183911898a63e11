"""Catalog layering (contract "Layering"): merge rules, provenance, partial site files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shipped import SHIPPED, driver_file

from hwmgr.catalog.layers import Provenance, merge
from hwmgr.catalog.load import load_catalog
from hwmgr.config import config_from
from hwmgr.errors import BadInputError

REPO = Path(__file__).resolve().parent.parent


def test_merge_rules_and_provenance() -> None:
    a, b = Path("base.json"), Path("site.json")
    doc = {"drivers": {"x": {"settings": {"ring": "max", "pause": "off"}, "notes": ["n1"]}},
           "sysctl": [{"name": "net.a", "value": 1}, {"name": "net.b", "min": 5}],
           "conditional_settings": [{"id": "c1", "when": {"qdisc": ["htb"]},
                                     "settings": {"features": {"tso": "off"}}}]}
    prov = Provenance()
    prov.record((), a)
    merge(doc, {"drivers": {"x": {"settings": {"pause": None, "txqueuelen": 10000},
                                  "notes": ["n2"]}},
                "sysctl": [{"name": "net.b", "max": 9}, {"name": "net.c", "value": 0}],
                "conditional_settings": [{"id": "c1", "enabled": False}]}, b, prov)
    x = doc["drivers"]["x"]
    assert x["settings"] == {"ring": "max", "txqueuelen": 10000}  # null deleted pause
    assert x["notes"] == ["n2"]  # lists replace
    assert doc["sysctl"] == [{"name": "net.a", "value": 1}, {"name": "net.b", "max": 9},
                             {"name": "net.c", "value": 0}]  # by name, whole rule
    assert doc["conditional_settings"][0]["enabled"] is False  # by id, key by key
    assert doc["conditional_settings"][0]["when"] == {"qdisc": ["htb"]}
    assert prov.of(("drivers", "x", "settings", "ring")) == a
    assert prov.of(("drivers", "x", "settings", "txqueuelen")) == b
    assert prov.of(("sysctl", "net.b")) == b and prov.of(("sysctl", "net.a")) == a


def test_partial_site_layer_amends_entry(tmp_path: Path) -> None:
    site = tmp_path / "10-site.json"
    site.write_text(json.dumps({"drivers": {"be2net": {"versions": {"10.2.470.14": {
        "kernels": ["2.6.32-*.el6.x86_64", "6.1.0-*-amd64"], "status": "known-good"}}}}}))
    cat = load_catalog([SHIPPED, site], config=config_from(None))
    ve = cat.entry("be2net")["versions"]["10.2.470.14"]
    assert ve["kernels"][-1] == "6.1.0-*-amd64" and ve["status"] == "known-good"
    assert ve["evidence"][0]["observed"].startswith("seed 000")  # kept from the base
    rows = {r["path"]: r["file"] for r in cat.effective("be2net")}
    assert rows["$.drivers.be2net.versions['10.2.470.14'].status"] == str(site)
    assert rows["$.drivers.be2net.versions['10.2.470.14'].reason"] == str(driver_file("be2net"))


@pytest.mark.parametrize("layer, where", [
    ({"drivers": {"be2net": {"versions": {"9.9": {"status": "recommended"}}}}},
     "merged catalog: $.drivers.be2net.versions['9.9']: 'evidence' is a required property"),
    ({"drivers": {"be2net": {"versionz": {}}}}, "$.drivers.be2net: Additional properties"),
    ({"drivers": {"be2net": {"versions": {"10.2.470.14": {"status": "great"}}}}},
     ".status: 'great' is not one of"),
])
def test_bad_site_layer_named(tmp_path: Path, layer: dict, where: str) -> None:
    site = tmp_path / "20-bad.json"
    site.write_text(json.dumps(layer))
    with pytest.raises(BadInputError) as exc:
        load_catalog([SHIPPED, site], config=config_from(None))
    assert where in str(exc.value)
    if "merged" in where:
        assert str(site) in str(exc.value)


def test_site_dir_from_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "catalog.d"
    site.mkdir()
    (site / "90-desc.json").write_text('{"drivers": {"be2net": {"description": "ours"}}}')
    (site / "10-desc.json").write_text('{"drivers": {"be2net": {"description": "first"}}}')
    monkeypatch.setenv("HWMGR_SITE_CATALOG_DIR", str(site))
    monkeypatch.setenv("HWMGR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("HWMGR_CATALOG_DIR", raising=False)
    cat = load_catalog(config=config_from(None))
    assert cat.entry("be2net")["description"] == "ours"  # lexical order: 90 after 10
    names = [f.path.name for f in cat.files]
    assert names[0] == "hwmgr-catalog.json" and names[-2:] == ["10-desc.json", "90-desc.json"]
