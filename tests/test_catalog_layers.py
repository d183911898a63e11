"""Catalog layering (contract "Layering"): merge rules, provenance, partial site files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.shipped import SHIPPED, driver_file

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
    assert x["notes"] == ["n2"]  # notes replace (prose: no key)
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


# ------------------------------------------------------------------ lists that merge by key
NEW_DEVICE = {"vendor": "8086", "device": "1fff", "name": "a site's new ixgbe PCI ID"}
SEED002 = REPO / "tests" / "fixtures" / "hosts" / "seed002-before"


def _site(tmp_path: Path, layer: dict, name: str = "20-ixgbe.json") -> Path:
    """A catalog.d holding one layer file; returns the file."""
    site = tmp_path / "catalog.d"
    site.mkdir(exist_ok=True)
    (site / name).write_text(json.dumps(layer))
    return site / name


def _env(tmp_path: Path, site: Path | None, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The variables that make the shipped catalog the base and `site` the layer dir."""
    monkeypatch.delenv("HWMGR_CATALOG_DIR", raising=False)
    return {"HWMGR_SITE_CATALOG_DIR": str(site or tmp_path / "no-site"),
            "HWMGR_STATE_DIR": str(tmp_path / "state"),
            "XDG_CACHE_HOME": str(tmp_path / "cache")}


def test_devices_and_value_lists_merge_by_key() -> None:
    a, b = Path("base.json"), Path("site.json")
    doc = {"drivers": {"x": {
        "devices": [{"vendor": "8086", "device": "0001", "name": "one"},
                    {"vendor": "8086", "device": "0002", "name": "two"},
                    {"vendor": "8086", "device": "0003", "name": "three"},
                    {"class": "0200", "name": "any NIC"}],
        "versions": {"1.0": {"kernels": ["3.10.0-*", "4.18.0-*"], "applies_to": ["8086:0001"]}},
        "pci_drivers": ["x"]}}}
    prov = Provenance()
    prov.record((), a)
    merge(doc, {"drivers": {"x": {
        "devices": [{"vendor": "8086", "device": "0002", "name": "two, renamed"},
                    {"vendor": "8086", "device": "0004", "name": "four"},
                    {"8086:0001": None},
                    {"vendor": "8086", "device": "0003", "remove": True},
                    {"class 0200": None},
                    {"9999:0009": None}],  # not there: changes nothing
        "versions": {"1.0": {"kernels": ["6.1.0-*", {"3.10.0-*": None}]}},
        "pci_drivers": ["x_pci"]}}}, b, prov)
    x = doc["drivers"]["x"]
    assert x["devices"] == [{"vendor": "8086", "device": "0002", "name": "two, renamed"},
                            {"vendor": "8086", "device": "0004", "name": "four"}]
    assert x["versions"]["1.0"]["kernels"] == ["4.18.0-*", "6.1.0-*"]
    assert x["versions"]["1.0"]["applies_to"] == ["8086:0001"]  # untouched: kept
    assert x["pci_drivers"] == ["x", "x_pci"]
    assert prov.of(("drivers", "x", "devices", "8086:0004")) == b
    assert prov.of(("drivers", "x", "versions", "1.0", "kernels", "4.18.0-*")) == a
    assert set(prov.removed) == {("drivers", "x", "devices", k) for k in
                                 ("8086:0001", "8086:0003", "class 0200")} | {
        ("drivers", "x", "versions", "1.0", "kernels", "3.10.0-*")}


def test_site_layer_adding_a_device_keeps_the_others(tmp_path: Path) -> None:
    shipped = load_catalog([SHIPPED], config=config_from(None))
    base = shipped.entry("ixgbe")["devices"]
    assert shipped.match({"vendor_id": "8086", "device_id": "1fff"}) is None  # a new ID
    layer = _site(tmp_path, {"drivers": {"ixgbe": {"devices": [NEW_DEVICE]}}})
    cat = load_catalog([SHIPPED, layer], config=config_from(None))
    assert cat.entry("ixgbe")["devices"] == [*base, NEW_DEVICE]
    hit = cat.match({"vendor_id": "8086", "device_id": "1fff"})
    assert hit is not None and (hit.driver, hit.level) == ("ixgbe", "device")


@pytest.mark.heavy
def test_check_with_a_device_layer_judges_as_without(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: a site layer adding one PCI ID to ixgbe leaves check's findings and exit
    code exactly as they are without it (it used to exit 8 on every host)."""
    from support import run_cli

    plain = run_cli("check", "--json", "--root", str(SEED002),
                    env=_env(tmp_path, None, monkeypatch))
    site = _site(tmp_path, {"drivers": {"ixgbe": {"devices": [NEW_DEVICE]}}}).parent
    layered = run_cli("check", "--json", "--root", str(SEED002),
                      env=_env(tmp_path, site, monkeypatch))
    before, after = json.loads(plain.stdout), json.loads(layered.stdout)
    assert plain.returncode == 5 and before["data"]["findings"], plain.stderr
    assert layered.returncode == plain.returncode, layered.stderr
    assert after["errors"] == [] and after["data"]["findings"] == before["data"]["findings"]
    assert after["data"]["summary"] == before["data"]["summary"]


@pytest.mark.parametrize("removal", [{"8086:10fb": None},
                                     {"vendor": "8086", "device": "10fb", "remove": True}])
def test_site_layer_removes_a_device(tmp_path: Path, removal: dict) -> None:
    base = load_catalog([SHIPPED], config=config_from(None)).entry("ixgbe")["devices"]
    layer = _site(tmp_path, {"drivers": {"ixgbe": {"devices": [removal, NEW_DEVICE]}}})
    cat = load_catalog([SHIPPED, layer], config=config_from(None))
    got = cat.entry("ixgbe")["devices"]
    assert got == [d for d in base if d.get("device") != "10fb"] + [NEW_DEVICE]
    assert len(got) == len(base)


@pytest.mark.parametrize("removal", [{"8086:1528": None},
                                     {"vendor": "8086", "device": "1528", "remove": True}])
def test_removal_that_breaks_applies_to_names_the_layer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, removal: dict) -> None:
    from support import run_cli

    layer = _site(tmp_path, {"drivers": {"ixgbe": {"devices": [removal]}}})
    res = run_cli("check", "--root", str(SEED002),
                  env=_env(tmp_path, layer.parent, monkeypatch))
    assert res.returncode == 8  # EXIT_BAD_INPUT: a bad catalog (docs/exit-codes.md)
    assert res.stdout == "" and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    assert (f"merged catalog: {layer} removed device 8086:1528 of ixgbe, which "
            f"$.drivers.ixgbe.versions['5.1.0-k-rh7.6'].applies_to[0] names") in res.stderr


def test_error_names_the_layer_that_set_the_value(tmp_path: Path) -> None:
    layer = _site(tmp_path, {"drivers": {"ixgbe": {"versions": {"5.1.0-k-rh7.6": {
        "applies_to": ["8086:0bad"]}}}}})
    with pytest.raises(BadInputError) as exc:
        load_catalog([SHIPPED, layer], config=config_from(None))
    assert ("$.drivers.ixgbe.versions['5.1.0-k-rh7.6'].applies_to[1]: 8086:0bad is not one "
            f"of the devices of 'ixgbe' ({layer} set $.drivers.ixgbe.versions"
            "['5.1.0-k-rh7.6'].applies_to['8086:0bad'])") in str(exc.value)


@pytest.mark.parametrize("layer, where", [
    ({"drivers": {"ixgbe": {"devices": [NEW_DEVICE, {**NEW_DEVICE, "name": "again"}]}}},
     "$.drivers.ixgbe.devices[1]: device 8086:1fff is listed twice"),
    ({"drivers": {"ixgbe": {"devices": [{"vendor": "8086", "device": "1fff", "remove": 1}]}}},
     "$.drivers.ixgbe.devices[0].remove: True was expected"),
])
def test_bad_keyed_layer_names_its_file(tmp_path: Path, layer: dict, where: str) -> None:
    path = _site(tmp_path, layer)
    with pytest.raises(BadInputError) as exc:
        load_catalog([SHIPPED, path], config=config_from(None))
    assert f"{path}: {where}" in str(exc.value)


def test_complete_catalog_takes_nothing_out(tmp_path: Path) -> None:
    from support.shipped import shipped_doc

    doc = shipped_doc()
    doc["drivers"]["ixgbe"]["devices"].append({**NEW_DEVICE, "remove": True})
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(doc))
    with pytest.raises(BadInputError) as exc:
        load_catalog([whole], config=config_from(None))
    assert "a complete catalog takes nothing out" in str(exc.value)
    assert f"{whole}: $.drivers.ixgbe.devices[" in str(exc.value)


@pytest.mark.heavy
def test_show_effective_names_each_devices_layer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from support import run_cli

    layer = _site(tmp_path, {"drivers": {"ixgbe": {"devices": [NEW_DEVICE]}}})
    env = _env(tmp_path, layer.parent, monkeypatch)
    res = run_cli("catalog", "show", "ixgbe", "--effective", "--json", env=env)
    assert res.returncode == 0, res.stderr
    rows = {r["path"]: r for r in json.loads(res.stdout)["data"]["effective"]}
    mine = rows["$.drivers.ixgbe.devices['8086:1fff']"]
    assert mine["file"] == str(layer) and mine["value"] == NEW_DEVICE
    assert rows["$.drivers.ixgbe.devices['8086:1528']"]["file"] == str(driver_file("ixgbe"))
    text = run_cli("catalog", "show", "ixgbe", "--effective", env=env)
    assert f"$.drivers.ixgbe.devices['8086:1fff'] = {json.dumps(NEW_DEVICE)}  <- {layer}" in \
        text.stdout


def test_trust_doc_layer_example_merges(tmp_path: Path) -> None:
    """The keyed-list example of docs/catalog-trust.md layers over the shipped catalog: one
    device added, two taken out (by null and by remove), the rest kept."""
    text = (REPO / "docs" / "catalog-trust.md").read_text()
    block = text.split("Merging:", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    layer = tmp_path / "20-ixgbe.json"
    layer.write_text(block)
    base = load_catalog([SHIPPED], config=config_from(None)).entry("ixgbe")["devices"]
    got = load_catalog([SHIPPED, layer], config=config_from(None)).entry("ixgbe")["devices"]
    assert [d for d in base if d["device"] not in ("10b6", "10c6")] == got[:-1]
    assert got[-1]["device"] == "1fff" and len(got) == len(base) - 1


def test_schema_error_of_a_merged_member_names_its_layer(tmp_path: Path) -> None:
    layer = _site(tmp_path, {"drivers": {"ixgbe": {"devices": [
        {"vendor": "8086", "device": "1fff"}]}}})
    with pytest.raises(BadInputError) as exc:
        load_catalog([SHIPPED, layer], config=config_from(None))
    assert "'name' is a required property" in str(exc.value)
    assert str(exc.value).endswith(f"(layers: {layer})")
