"""Catalog: schema, shipped data, validation errors with JSON paths, matching, verdicts,
the validation cache, discovery, the `catalog` verb, and fuzzed catalogs."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.shipped import SHIPPED, shipped_doc, shipped_files

from hwmgr.catalog import load as catmod
from hwmgr.catalog import schema as schemamod
from hwmgr.catalog.load import Catalog
from hwmgr.catalog.verdict import source_refusal
from hwmgr.cli import main
from hwmgr.config import config_from
from hwmgr.errors import BadInputError, NotFoundError

REPO = Path(__file__).resolve().parent.parent
SHIPPED_VERSION = json.loads((SHIPPED / "hwmgr-catalog.json").read_text())["catalog_version"]

FIX = Path(__file__).resolve().parent / "fixtures" / "catalogs"
MINI = FIX / "good" / "mini.json"
BAD = FIX / "bad"
EXPECTED: dict[str, list[str]] = json.loads((BAD / "expected.json").read_text())
EL6 = "2.6.32-279.el6.x86_64"
DEB12 = "6.1.0-56-amd64"


@pytest.fixture(scope="module")
def _module_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg")


@pytest.fixture(autouse=True)
def _isolated(_module_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This module's own cache dir (the shipped catalog's schema verdict is then checked
    once, not per test); no catalog dir from the caller's environment."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(_module_cache))
    monkeypatch.delenv(catmod.ENV_DIR, raising=False)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty cache dir for a test that counts the remembered verdicts."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-fresh"))


def load_catalog(paths: list[Any] | None = None) -> Catalog:
    """The loader with the Config this test's environment gives (as the CLI builds it)."""
    return catmod.load_catalog(paths, config=config_from(None))


def dev(vendor: str, device: str, driver: str | None, version: str | None, **kw: Any) -> dict:
    d = {"vendor_id": vendor, "device_id": device, "subsystem_vendor_id": None,
         "subsystem_device_id": None, "class": "0200", "driver": driver, "pci_driver": driver,
         "driver_version": version, "firmware_version": None}
    d.update(kw)
    return d


# ------------------------------------------------------------------------------ schema + data
def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    import jsonschema

    schema = json.loads(schemamod.SCHEMA_PATH.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    if hasattr(jsonschema, "Draft202012Validator"):
        jsonschema.Draft202012Validator.check_schema(schema)
    else:  # jsonschema 3.2 (RHEL 9, the 3.9 leg): the draft 7 form hwmgr validates with
        draft7 = schemamod.as_draft7(schema)
        assert "dependentRequired" not in json.dumps(draft7)
        jsonschema.Draft7Validator.check_schema(draft7)


@pytest.mark.heavy
def test_shipped_catalog_is_valid_and_complete() -> None:
    assert Catalog.check_files(shipped_files())[0] == []
    cat = load_catalog([SHIPPED])
    assert cat.version == SHIPPED_VERSION  # the base file's own, as written
    for name in ("be2net", "ixgbe", "megaraid_sas", "e1000e", "igb", "bnx2", "i40e",
                 "virtio_net"):
        assert name in cat.names()
    be = cat.entry("be2net")
    ids = {(d["vendor"], d["device"]) for d in be["devices"]}
    assert {("19a2", x) for x in ("0700", "0710", "0211", "0221")} <= ids
    assert {("10df", x) for x in ("0720", "0728", "e220", "e228")} <= ids
    rec = be["versions"]["10.2.470.14"]
    assert rec["source"]["url"].startswith("http://www-dl.emulex.com/")
    assert rec["source"]["allow_http"] is True and rec["source"]["verified"] is False
    assert rec["firmware"]["min"] == "10.0.803.19"
    assert source_refusal(rec["source"]) and "not verified" in source_refusal(rec["source"])
    ix = cat.entry("ixgbe")["settings"]
    assert ix["pause"] == {"rx": "on", "tx": "on"} and ix["txqueuelen"] == {"min": 10000}
    assert cat.entry("virtio_net")["pci_drivers"] == ["virtio-pci"]


def test_shipped_catalog_knows_every_device_of_the_kernel_reference_tables() -> None:
    """The drivers the lkddb excerpts cover (kernel 4.8 pci_device_id tables) list every device
    those tables bind: a rack's 4.8-era card is never 'no entry' for want of an ID."""
    ref = FIX.parent / "reference" / "13_lkddb_4.8_pci_ids_target_drivers.txt"
    sources = {"e1000e/": "e1000e", "benet/": "be2net", "ixgbe/": "ixgbe", "bnx2.c": "bnx2",
               "megaraid_sas": "megaraid_sas", "i40e/": "i40e", "mlx4/": "mlx4_core",
               "mlx5/": "mlx5_core"}
    cat = load_catalog([SHIPPED])
    known = {name: {(d.get("vendor"), d.get("device")) for d in cat.entry(name)["devices"]}
             for name in sources.values()}
    checked = 0
    for line in ref.read_text().splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[0] != "pci" or parts[3] != "....":
            continue
        drv = next((d for frag, d in sources.items() if frag in parts[-1]), None)
        if drv:
            assert (parts[1], parts[2]) in known[drv], (drv, parts[1], parts[2])
            checked += 1
    assert checked > 150


def test_source_refusal_rules() -> None:
    ok = {"type": "srpm", "url": "https://x/y.src.rpm", "sha256": "a" * 64, "size": 1}
    assert source_refusal(ok) is None
    assert "plain http" in source_refusal({**ok, "url": "http://x/y.src.rpm"})
    assert source_refusal({**ok, "url": "http://x/y", "allow_http": True}) is None
    assert "not verified" in source_refusal({**ok, "verified": False})
    assert source_refusal(None)


# ------------------------------------------------------------------------------ bad samples
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_sample_rejected_with_path(name: str) -> None:
    path = BAD / name
    errors = Catalog.check_files([path])[0]
    assert errors, f"{name} was accepted"
    for want in EXPECTED[name]:
        # jsonschema 3.2 (RHEL 9's) words minItems 1 as "is too short"; 4.x "should be non-empty"
        spellings = (want, want.replace("should be non-empty", "is too short"))
        assert any(e.startswith(f"{path}: {w}") for e in errors for w in spellings), (want, errors)
    assert all("\n" not in e for e in errors)
    with pytest.raises(BadInputError) as exc:
        load_catalog([path])
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_every_bad_sample_is_listed() -> None:
    files = {p.name for p in BAD.glob("*.json")} - {"expected.json"}
    assert files == set(EXPECTED)


def test_good_fixture_valid() -> None:
    assert Catalog.check_files([MINI])[0] == []


# ------------------------------------------------------------------------------ matching
@pytest.fixture()
def mini() -> Catalog:
    return load_catalog([MINI])


def test_match_specificity(mini: Catalog) -> None:
    m = mini.match(dev("1000", "0079", "megaraid_sas", None, subsystem_vendor_id="1000",
                       subsystem_device_id="9261", **{"class": "0104"}))
    assert (m.driver, m.level) == ("megaraid_sas", "subsystem")
    m = mini.match(dev("1000", "0079", "megaraid_sas", None, subsystem_vendor_id="1028",
                       subsystem_device_id="1f0a", **{"class": "0104"}))
    assert (m.driver, m.level) == ("megaraid_sas_generic", "device")
    m = mini.match(dev("1000", "0079", None, None, **{"class": "0104"}))
    assert (m.driver, m.level) == ("megaraid_sas_generic", "device")
    m = mini.match(dev("1d0f", "ec20", "ethclass", None, **{"class": "020000"}))
    assert (m.driver, m.level) == ("ethclass", "class")
    assert mini.match(dev("1d0f", "ec20", None, None, **{"class": "0108"})) is None
    assert mini.match(dev("19a2", "0710", None, None)).driver == "be2net"
    assert mini.match(dev("0X19A2", "0x0710", None, None)).driver == "be2net"
    assert mini.match(dev("abcd", "ef01", None, None, **{"class": "0300"})) is None
    assert mini.match({}) is None
    assert mini.verdict(dev("abcd", "ef01", "foo", "1.0"), EL6) is None


CASES = [
    # (vendor, device, driver, version, kernel) -> (status, recommended, listed)
    (("19a2", "0710", "be2net", "4.1.307r", EL6), ("known-bad", "10.2.470.14", "known-bad")),
    (("19a2", "0700", "be2net", "4.1.307r", EL6), ("outdated", "10.2.470.14", None)),
    (("19a2", "0710", "be2net", "4.6.62.0u", EL6), ("outdated", "10.2.470.14", "deprecated")),
    (("19a2", "0710", "be2net", "8.0.16.0", EL6), ("outdated", "10.2.470.14", "known-good")),
    (("19a2", "0710", "be2net", "9.1.0", EL6), ("outdated", "10.2.470.14", None)),
    (("19a2", "0710", "be2net", "10.2.470.14", EL6), ("ok", "10.2.470.14", "recommended")),
    (("19a2", "0710", "be2net", "11.0.0.0", EL6), ("ok", "10.2.470.14", None)),
    (("19a2", "0710", "be2net", "8.0.16.0", "3.10.0-957.el7.x86_64"), ("ok", None, "known-good")),
    # read, but no verdict: not listed and nothing recommended to compare with
    (("19a2", "0710", "be2net", "11.0.0.0", "3.10.0-957.el7.x86_64"),
     ("uncatalogued", None, None)),
    (("19a2", "0710", "be2net", DEB12, DEB12), ("uncatalogued", None, None)),  # no inbox policy
    (("19a2", "0710", "be2net", None, EL6), ("unknown", "10.2.470.14", None)),  # not read
    (("8086", "10d3", "e1000e", DEB12, DEB12), ("ok", None, "known-good")),
    (("8086", "10d3", "e1000e", "5.10.0-20-amd64", "5.10.0-20-amd64"),
     ("uncatalogued", None, None)),  # the inbox policy covers another kernel
    (("8086", "10d3", "e1000e", "3.2.6-k", DEB12), ("uncatalogued", None, None)),
    (("1d0f", "ec20", "ethclass", "1.5", None), ("outdated", "2.0", None)),
]


@pytest.mark.parametrize(("args", "want"), CASES)
def test_verdicts(mini: Catalog, args: tuple, want: tuple) -> None:
    vendor, device, driver, version, kernel = args
    v = mini.verdict(dev(vendor, device, driver, version), kernel)
    assert {"entry", "status", "recommended_version", "reason"} <= set(v)
    assert (v["status"], v["recommended_version"], v.get("listed_status")) == want, v
    assert v["status"] in catmod.VERDICTS and v["reason"]


def test_uncatalogued_is_no_opinion_unknown_is_not_read(mini: Catalog) -> None:
    """The two statuses say different things: the catalog has no verdict on a version that
    was read, or the version (or the driver) could not be read at all."""
    el7 = "3.10.0-957.el7.x86_64"
    v = mini.verdict(dev("19a2", "0710", "be2net", "11.0.0.0"), el7)
    assert (v["status"], v["reason"]) == ("uncatalogued", "be2net 11.0.0.0 is not in the catalog")
    v = mini.verdict(dev("19a2", "0710", "be2net", DEB12), DEB12)
    assert v["status"] == "uncatalogued" and "uncatalogued kernel build" in v["reason"]
    v = mini.verdict(dev("8086", "10d3", "e1000e", "5.10.0-20-amd64"), "5.10.0-20-amd64")
    assert v["status"] == "uncatalogued" and "uncatalogued kernel build" in v["reason"]
    v = mini.verdict(dev("19a2", "0710", "be2net", "  "), EL6)
    assert (v["status"], v["reason"]) == ("unknown", "be2net version is unknown")


def test_newer_than_every_listed_version_is_not_outdated(mini: Catalog) -> None:
    for version in ("10.2.470.15", "10.3", "11.0.0.0", "100.0"):
        v = mini.verdict(dev("19a2", "0710", "be2net", version), EL6)
        assert v["status"] == "ok", v


def test_known_bad_only_hits_listed_devices(mini: Catalog) -> None:
    assert mini.verdict(dev("19a2", "0710", "be2net", "4.1.307r"), EL6)["status"] == "known-bad"
    assert mini.verdict(dev("19a2", "0700", "be2net", "4.1.307r"), EL6)["status"] != "known-bad"


def test_driver_binding(mini: Catalog) -> None:
    v = mini.verdict(dev("19a2", "0710", "vfio-pci", "4.1.307r"), EL6)
    assert v["status"] == "unknown" and "vfio-pci" in v["reason"]
    v = mini.verdict(dev("19a2", "0710", None, None), EL6)
    assert v["status"] == "unknown" and "no driver" in v["reason"]
    virt = dev("1af4", "1041", "virtio_net", "1.0.0", pci_driver="virtio-pci")
    assert mini.verdict(virt, "6.18.44")["status"] == "ok"
    no_netdev = dev("1af4", "1041", "virtio-pci", "1", pci_driver="virtio-pci")
    assert mini.verdict(no_netdev, "6.18.44")["status"] == "unknown"


def test_firmware_requirement(mini: Catalog) -> None:
    v = mini.verdict(dev("19a2", "0710", "be2net", "4.1.307r", firmware_version="4.9.416.0"), EL6)
    assert v["firmware"] == {"min": "10.0.803.19", "current": "4.9.416.0", "ok": False}
    v = mini.verdict(dev("19a2", "0710", "be2net", "4.1.307r",
                         firmware_version="10.0.803.19"), EL6)
    assert v["firmware"]["ok"] is True
    v = mini.verdict(dev("19a2", "0710", "be2net", "4.1.307r",
                         firmware_version="bc 5.2.3 NCSI 2.0.12"), EL6)
    assert v["firmware"]["ok"] is None and "different shapes" in v["firmware"]["note"]


def test_applies_to_subsystem_narrows_a_device_rule(tmp_path: Path) -> None:
    data = json.loads(MINI.read_text())
    data["drivers"]["megaraid_sas_generic"]["versions"]["06.506.00.00-rc1"] = {
        "status": "known-bad", "reason": "test", "evidence": "test data",
        "applies_to": ["1000:0079:1028:1f0a"]}
    f = tmp_path / "c.json"
    f.write_text(json.dumps(data))
    cat = load_catalog([f])
    hit = dev("1000", "0079", "megaraid_sas_generic", "06.506.00.00-rc1",
              subsystem_vendor_id="1028", subsystem_device_id="1f0a")
    assert cat.verdict(hit, DEB12)["status"] == "known-bad"
    miss = {**hit, "subsystem_device_id": "1f0b"}
    assert cat.verdict(miss, DEB12)["status"] == "uncatalogued"


def test_recommended_lookup(mini: Catalog) -> None:
    ver, entry = mini.recommended(dev("19a2", "0710", "be2net", "4.1.307r"), EL6)
    assert ver == "10.2.470.14" and entry["source"]["verified"] is False
    assert mini.recommended(dev("19a2", "0710", "be2net", "x"), "3.10.0-957.el7.x86_64") is None


# ------------------------------------------------------------------------------ seeds + host
def test_seed_000_verdict_with_shipped_catalog() -> None:
    cat = load_catalog([SHIPPED])
    eth2 = dev("19a2", "0710", "be2net", "4.1.307r", firmware_version="10.0.803.19")
    v = cat.verdict(eth2, EL6)
    assert v["entry"] == "be2net"
    assert v["status"] == "known-bad"
    assert v["recommended_version"] == "10.2.470.14"
    assert "100 MB/s" in v["reason"]
    assert v["firmware"]["ok"] is True
    after = cat.verdict({**eth2, "driver_version": "10.2.470.14"}, EL6)
    assert after["status"] == "ok"


def test_seed_002_and_lab_verdicts_with_shipped_catalog() -> None:
    cat = load_catalog([SHIPPED])
    x540 = dev("8086", "1528", "ixgbe", "5.1.0-k-rh7.6")
    assert cat.verdict(x540, "3.10.0-957.5.1.el7.x86_64")["status"] == "ok"
    raid = dev("1000", "0079", "megaraid_sas", "07.719.03.00-rc1", subsystem_vendor_id="1000",
               subsystem_device_id="9261", **{"class": "0104"})
    v = cat.verdict(raid, DEB12)
    assert (v["status"], v["match"]) == ("ok", "subsystem")
    e1k = dev("8086", "10d3", "e1000e", DEB12)
    assert cat.verdict(e1k, DEB12)["status"] == "ok"
    # RHEL 7.7-8.3's in-tree igb: judged on RHEL 8.1's kernel, never on Debian's
    igb = cat.verdict(dev("8086", "1533", "igb", "5.6.0-k"), "4.18.0-147.el8.x86_64")
    assert (igb["status"], igb["listed_status"]) == ("ok", "baseline")
    said = igb["reason"].lower().replace("-", " ")
    assert "rhel 8.1" in said and "no known issue" in said and "rhel 7.7" not in said
    assert cat.verdict(dev("8086", "1533", "igb", "5.6.0-k"), "3.10.0-957.el7.x86_64")[
        "status"] == "uncatalogued"  # RHEL 7.6 is not among the releases that ship it
    assert cat.verdict(dev("8086", "1533", "igb", "5.6.0.1-k"), DEB12)["status"] == "uncatalogued"


def test_realtek_rtl8125_judged_by_the_driver_bound_to_it() -> None:
    """10ec:8125 is claimed by Realtek's out-of-tree r8125 and the in-tree r8169: a function
    bound to r8125 gets r8125's listed release (with or without a device ID read); one bound
    to r8169 keeps r8169's in-tree verdict."""
    cat = load_catalog([SHIPPED])
    for device in ("8125", "3000"):
        v = cat.verdict(dev("10ec", device, "r8125", "9.015.00-NAPI"), DEB12)
        assert (v["entry"], v["match"], v["status"]) == ("r8125", "device", "ok")
        assert "9.015.00" in v["reason"]
    noid = dev("10ec", None, "r8125", "9.013.02-NAPI", interfaces=["eth0"])
    v = cat.verdict(noid, "6.8.0-58-generic")
    assert (v["entry"], v["match"], v["status"]) == ("r8125", "driver", "ok")
    assert cat.verdict(dev("10ec", "8125", "r8125", "9.099.00-NAPI"), DEB12)["entry"] == "r8125"
    in_tree = cat.verdict(dev("10ec", "8125", "r8169", DEB12), DEB12)
    assert (in_tree["entry"], in_tree["match"]) == ("r8169", "device")
    assert in_tree["status"] == cat.verdict(dev("10ec", "8168", "r8169", DEB12), DEB12)["status"]


def test_this_machine_virtio_nic() -> None:
    """The real inventory of the build host: its virtio NIC gets a catalog verdict."""
    from hwmgr.host.snapshot import open_host
    from hwmgr.inventory.scan import collect

    host, cleanup = open_host(None)
    scan = collect(host, [str(SHIPPED)], config=config_from(None))
    virtio = [d for d in scan.devices
              if (d["vendor_id"], d["device_id"]) in (("1af4", "1000"), ("1af4", "1041"))]
    if not virtio:
        pytest.skip("no virtio-net PCI function on this machine")
    nics = [d for d in virtio if d["driver"] == "virtio_net"]
    assert nics, "virtio_net NIC not found by the inventory"
    assert nics[0]["catalog"]["entry"] == "virtio_net"
    assert nics[0]["catalog"]["status"] == "ok"


# ------------------------------------------------------------------------------ cache
def _load_in_subprocess(path: Path, env: dict[str, str]) -> dict[str, Any]:
    code = ("import json, sys; from hwmgr.catalog.load import load_catalog; "
            "from hwmgr.config import config_from; "
            "c = load_catalog([sys.argv[1]], config=config_from(None)); "
            "print(json.dumps({'jsonschema': 'jsonschema' in sys.modules, 'n': len(c.names())}))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def _verdicts() -> list[str]:
    path = Path(config_from(None).user_cache_dir) / schemamod.VERDICTS_FILE
    return json.loads(path.read_text()) if path.exists() else []


@pytest.mark.heavy
def test_cache_second_load_does_not_import_jsonschema(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = _load_in_subprocess(SHIPPED, env)
    second = _load_in_subprocess(SHIPPED, env)
    n = len(shipped_doc()["drivers"])
    assert first == {"jsonschema": True, "n": n}  # checked against the schema once
    assert second == {"jsonschema": False, "n": n}  # the remembered verdict
    verdicts = json.loads((tmp_path / "cache" / "hwmgr" / schemamod.VERDICTS_FILE).read_text())
    files = len(load_catalog([SHIPPED]).files)
    assert len(verdicts) == files + 1  # each file's own checks, and the layered whole


def test_remembered_verdict_spares_the_value_walk_and_the_semantic_rules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_cache: None) -> None:
    """Issue 26: they are two thirds of a catalog load on every fleet host's check. Counted
    on the real functions: run on the first load, not on the second, again on changed bytes;
    a changed file with an error is still caught. The JSON hooks that find duplicate keys
    and unusable numbers are spared too (plain `json` parses remembered bytes), and a
    changed file with a duplicate key is still caught."""
    from hwmgr.catalog import validate

    calls = {"values": 0, "semantic": 0}
    values, semantic, pairs = validate._value_errors, catmod.semantic_errors, validate._pairs
    hooked: list[int] = []

    def count_pairs(*a: Any, **kw: Any) -> Any:
        hooked.append(1)
        return pairs(*a, **kw)

    monkeypatch.setattr(validate, "_pairs", count_pairs)

    def count_values(*a: Any, **kw: Any) -> Any:
        calls["values"] += 1
        return values(*a, **kw)

    def count_semantic(*a: Any, **kw: Any) -> Any:
        calls["semantic"] += 1
        return semantic(*a, **kw)

    monkeypatch.setattr(validate, "_value_errors", count_values)
    monkeypatch.setattr(catmod, "semantic_errors", count_semantic)
    f = tmp_path / "c.json"
    shutil.copy(MINI, f)
    first = load_catalog([f])
    assert calls["values"] == 1 and calls["semantic"] == 1
    assert hooked
    hooked.clear()
    second = load_catalog([f])
    assert calls == {"values": 1, "semantic": 1}  # the remembered verdict
    assert not hooked  # parsed by json alone
    assert second.names() == first.names() and second.doc == first.doc
    data = json.loads(f.read_text())
    data["drivers"]["be2net"]["versions"]["4.1.307r"]["reason"] = "bad \u0007 bell"
    f.write_text(json.dumps(data))
    with pytest.raises(BadInputError, match="control character"):
        load_catalog([f])
    assert calls["values"] == 2
    f.write_text(MINI.read_text().replace('{', '{"drivers": {}, ', 1))  # "drivers" twice
    with pytest.raises(BadInputError, match="duplicate key 'drivers'"):
        load_catalog([f])


def test_changed_file_is_revalidated(tmp_path: Path, fresh_cache: None) -> None:
    f = tmp_path / "c.json"
    shutil.copy(MINI, f)
    load_catalog([f])
    assert len(_verdicts()) == 2  # the file's own checks and the set of one file
    data = json.loads(f.read_text())
    data["drivers"]["be2net"]["versions"]["4.1.307r"]["status"] = "bogus"
    f.write_text(json.dumps(data))
    with pytest.raises(BadInputError, match=r"\.status: 'bogus' is not one of"):
        load_catalog([f])
    assert len(_verdicts()) == 2  # a failed check is never remembered
    data["drivers"]["be2net"]["versions"]["4.1.307r"]["status"] = "deprecated"
    f.write_text(json.dumps(data))
    load_catalog([f])
    assert len(_verdicts()) == 4


def test_remembered_verdict_is_per_layer_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             fresh_cache: None) -> None:
    """The same base with and without a site layer: a key per file and per set; over a base
    checked before, a new layer costs its own schema walk and the merged one, not the base's
    again; a bad layer is still caught."""
    site = tmp_path / "site.json"
    site.write_text('{"drivers": {"be2net": {"description": "site"}}}')
    load_catalog([MINI])
    walks: list[bool] = []
    findings = catmod.findings

    def counted(data: Any, partial: bool = False) -> Any:
        walks.append(partial)
        return findings(data, partial)

    monkeypatch.setattr(catmod, "findings", counted)
    load_catalog([MINI, site])
    assert sorted(walks) == [False, True]  # the merged whole, the layer; not the base
    assert len(_verdicts()) == 4
    site.write_text('{"drivers": {"be2net": {"description": 7}}}')
    with pytest.raises(BadInputError, match=r"description: 7 is not of type 'string'"):
        load_catalog([MINI, site])


def test_cache_keyed_by_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               fresh_cache: None) -> None:
    load_catalog([MINI])
    schema = tmp_path / "schema.json"
    doc = json.loads(schemamod.SCHEMA_PATH.read_text())
    doc["description"] += " (changed)"
    schema.write_text(json.dumps(doc))
    monkeypatch.setattr(schemamod, "SCHEMA_PATH", schema)
    load_catalog([MINI])
    assert len(_verdicts()) == 4


def test_verdicts_file_is_bounded_and_damage_is_a_miss(tmp_path: Path) -> None:
    cache = schemamod.VerdictCache(tmp_path / "c")
    for i in range(schemamod.KEEP + 5):
        cache.remember(f"k{i}")
    assert not cache.passed("k0") and cache.passed(f"k{schemamod.KEEP + 4}")
    assert len(json.loads(cache.path.read_text())) == schemamod.KEEP
    cache.path.write_text("{not json")
    assert not cache.passed(f"k{schemamod.KEEP + 4}")
    cache.remember("again")  # rewritten whole
    assert json.loads(cache.path.read_text()) == ["again"]


def test_unwritable_cache_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert len(load_catalog([MINI]).names()) == 6
    assert len(load_catalog([MINI]).names()) == 6


# ------------------------------------------------------------------------------ discovery
def test_discovery_env_dir_merges_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "cats"
    d.mkdir()
    data = json.loads(MINI.read_text())
    a = {k: v for k, v in data.items() if k != "drivers"}
    b = copy.deepcopy(a)
    a["drivers"] = {k: data["drivers"][k] for k in ("be2net", "e1000e")}
    b["drivers"] = {k: data["drivers"][k] for k in ("virtio_net",)}
    (d / "a.json").write_text(json.dumps(a))
    (d / "b.json").write_text(json.dumps(b))
    (d / "README.txt").write_text("ignored")
    monkeypatch.setenv(catmod.ENV_DIR, str(d))
    cat = load_catalog()
    assert cat.names() == ["be2net", "e1000e", "virtio_net"]
    assert cat.origin["virtio_net"] == d / "b.json"
    assert [f.path.name for f in cat.files] == ["a.json", "b.json"]


def test_discovery_later_file_layers_over_earlier(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "cats"
    d.mkdir()
    shutil.copy(MINI, d / "a.json")
    (d / "b.json").write_text(json.dumps({"drivers": {"be2net": {"description": "site"}}}))
    monkeypatch.setenv(catmod.ENV_DIR, str(d))
    cat = load_catalog()
    assert cat.entry("be2net")["description"] == "site"  # the later layer wins
    assert cat.origin["be2net"] == d / "a.json"  # the entry was defined there


def test_discovery_defaults_and_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert catmod.discover(None, config_from(None)) == shipped_files()
    monkeypatch.setenv(catmod.ENV_DIR, str(tmp_path / "nope"))
    with pytest.raises(NotFoundError, match="is not a directory"):
        load_catalog()
    with pytest.raises(NotFoundError, match="does not exist"):
        load_catalog([tmp_path / "missing.json"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotFoundError, match=f"no catalog found \\(looked in {empty}\\): "):
        load_catalog([empty])
    monkeypatch.setenv(catmod.ENV_DIR, str(empty))  # used alone: no fallback to the checkout
    monkeypatch.setenv("HWMGR_SITE_CATALOG_DIR", str(tmp_path / "no-site"))
    with pytest.raises(NotFoundError) as err:
        load_catalog()
    assert str(err.value) == (
        f"no catalog found (looked in {catmod.ENV_DIR}={empty}, {tmp_path / 'no-site'}): "
        "install hwmgr's catalog, name one with --catalog FILE, or install a signed one with "
        "'hwmgr catalog update URL'")


NO_CATALOG = [["check", "--root"], ["inventory", "--root"],
              ["plan", "upgrade", "be2net", "--to", "12.0.0.0", "--root"]]


@pytest.mark.parametrize("argv", NO_CATALOG, ids=lambda a: a[0])
def test_no_catalog_at_all_refuses(argv: list[str], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 21: with nothing to compare with, check, inventory and plan refuse (exit 3, one
    line naming where they looked), never 'compliant' or an empty verdict."""
    empty = tmp_path / "no-catalogs"
    empty.mkdir()
    monkeypatch.setenv(catmod.ENV_DIR, str(empty))
    monkeypatch.setenv("HWMGR_SITE_CATALOG_DIR", str(tmp_path / "no-site"))
    monkeypatch.setenv("HWMGR_STATE_DIR", str(tmp_path / "state"))
    root = REPO / "tests" / "fixtures" / "hosts" / "seed002-before"
    assert main([*argv, str(root)]) == 3
    out, err = capsys.readouterr()
    assert "compliant" not in out + err and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no catalog found" in lines[0], err
    assert f"{catmod.ENV_DIR}={empty}" in lines[0] and "--catalog FILE" in lines[0]
    assert main([*argv, str(root), "--json"]) == 3
    env = json.loads(capsys.readouterr().out)
    assert env["status"] == "error" and "no catalog found" in env["errors"][0]


def test_inventory_no_catalog_flag_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "no-catalogs"
    empty.mkdir()
    monkeypatch.setenv(catmod.ENV_DIR, str(empty))
    root = REPO / "tests" / "fixtures" / "hosts" / "seed002-before"
    assert main(["inventory", "--no-catalog", "--root", str(root), "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)["data"]["devices"]
    assert devices and all(d["catalog"] is None for d in devices)


# ------------------------------------------------------------------------------ the verb
@pytest.mark.heavy
def test_cli_validate_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "validate", str(SHIPPED), str(MINI)]) == 0  # MINI layers over it
    capsys.readouterr()
    assert main(["catalog", "validate", str(SHIPPED)]) == 0
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()  # one per file: the header, then one per driver
    assert len(lines) == len(shipped_files()) > 25
    assert lines[0].startswith(f"{SHIPPED / 'hwmgr-catalog.json'}: OK (catalog {SHIPPED_VERSION}")
    assert all(": OK (" in line for line in lines)
    assert err == ""


def test_cli_validate_counts_a_layer_that_deletes(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    """A site layer's `"be2net": null` (delete that entry) validates and is not counted as
    one of its drivers; the counts come from the documents validation parsed."""
    layer = tmp_path / "site.json"
    layer.write_text(json.dumps({"drivers": {"be2net": None, "ixgbe": {"description": "x"}}}))
    assert main(["catalog", "validate", "--json", str(SHIPPED), str(layer)]) == 0
    got = json.loads(capsys.readouterr().out)["data"]["files"]
    shipped, site = got[:-1], got[-1]
    doc = shipped_doc()
    assert sum(f["drivers"] for f in shipped) == len(doc["drivers"]) > 1
    assert sum(f["devices"] for f in shipped) == sum(len(d.get("devices", [])) for d in
                                                     doc["drivers"].values())
    assert {k: site[k] for k in ("ok", "catalog_version", "drivers", "devices")} == {
        "ok": True, "catalog_version": "site layer", "drivers": 1, "devices": 0}


def test_cli_validate_bad(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(BAD / "status_bogus.json"), str(BAD / "typo_key.json"), str(MINI)]
    assert main(["catalog", "validate", *files]) == 8
    out, err = capsys.readouterr()
    errs = err.strip().splitlines()
    assert len(errs) == 3
    assert errs[0] == (f"hwmgr catalog: {files[0]}: $.drivers.be2net.versions['4.1.307r'].status:"
                       " 'bogus' is not one of ['recommended', 'known-good', 'known-bad', "
                       "'deprecated', 'baseline']")
    assert out.strip().splitlines() == [
        f"{MINI}: OK (catalog 2026.11.1, 6 drivers, 7 device rules, 7 versions)"]
    assert main(["catalog", "validate", "--json", files[0]]) == 8
    env = json.loads(capsys.readouterr().out)
    assert env["status"] == "error" and env["data"]["files"][0]["ok"] is False


def test_cli_validate_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["catalog", "validate", str(tmp_path / "x.json")]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err


def test_cli_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "be2net", "--catalog", str(SHIPPED), "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["command"] == "catalog" and env["status"] == "ok"
    assert env["data"]["driver"] == "be2net"
    assert env["data"]["entry"]["versions"]["4.1.307r"]["status"] == "known-bad"
    assert main(["catalog", "--json", "show", "19a2:0710", "--catalog", str(SHIPPED)]) == 0
    assert json.loads(capsys.readouterr().out)["data"]["driver"] == "be2net"
    assert main(["catalog", "show", "ixgbe"]) == 0
    out = capsys.readouterr().out
    for word in ("8086:1528", "5.1.0-k-rh7.6", "known-good", "txqueuelen", "channels"):
        assert word in out
    assert main(["catalog", "show", "be2net"]) == 0
    out = capsys.readouterr().out
    assert "UNVERIFIED" in out and "known-bad" in out and "recommended" in out


def test_cli_show_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "nosuchdriver"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no driver 'nosuchdriver'" in err
    assert main(["catalog", "show", "ffff:ffff"]) == 3
    capsys.readouterr()
    assert main(["catalog", "show", "be2net", "--catalog", str(BAD / "truncated.json")]) == 8
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid JSON" in err
    assert main(["catalog"]) == 2
    assert main(["catalog", "frobnicate"]) == 2
    capsys.readouterr()


# ------------------------------------------------------------------------------ fuzzing
GOOD_DATA = json.loads(MINI.read_text())
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids,
                                                              max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


ALL_PATHS = _paths(GOOD_DATA)[1:]


def _mutate(data: Any, path: tuple, op: str, value: Any) -> Any:
    data = copy.deepcopy(data)
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    if op == "drop":
        del parent[key]
    else:
        parent[key] = value
    return data


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["drop", "replace", "garbage", "truncate", "dup"]))
    text = json.dumps(GOOD_DATA, indent=1)
    if kind in ("drop", "replace"):
        path = draw(st.sampled_from(ALL_PATHS))
        text = json.dumps(_mutate(GOOD_DATA, path, kind, draw(JSON_VALUES)), indent=1)
    elif kind == "dup":
        path = draw(st.sampled_from(ALL_PATHS))
        text = json.dumps(_mutate(GOOD_DATA, path, "replace", copy.deepcopy(GOOD_DATA)))
    raw = text.encode()
    if kind == "garbage":
        pos = draw(st.integers(0, len(raw)))
        raw = raw[:pos] + draw(st.binary(min_size=1, max_size=8)) + raw[pos:]
    elif kind == "truncate":
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    return raw


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=mutated_bytes())
def test_fuzzed_catalog_loads_or_raises_bad_input(tmp_path: Path, raw: bytes) -> None:
    f = tmp_path / "fuzz.json"
    f.write_bytes(raw)
    try:
        cat = load_catalog([f])
    except BadInputError as exc:
        assert "\n" not in str(exc) and str(f) in str(exc)
        return
    for d in (dev("19a2", "0710", "be2net", "4.1.307r"), dev("1d0f", "0001", "ethclass", "1"),
              dev("1000", "0079", "megaraid_sas", "07.719.03.00-rc1")):
        v = cat.verdict(d, EL6)
        assert v is None or v["status"] in catmod.VERDICTS


# strings rich in what the escape scan looks at: backslashes, letters escapes use, controls
TRICKY_TEXT = st.text(st.sampled_from("\\nbrtfu0179dD8\x00\x1b\x7f\x85\x9f\u00e9 \"/") |
                      st.characters(), max_size=12)


@settings(max_examples=300, deadline=None)
@given(value=TRICKY_TEXT, ascii_only=st.booleans())
def test_control_characters_are_found_however_the_json_writes_them(value: str,
                                                                   ascii_only: bool) -> None:
    """The strict parse skips its per-string scan only when the raw text holds no escape
    that could decode to a control character: a string value or key holding one is refused
    whether it was written raw or escaped, and one without is accepted (an escaped
    backslash before a letter is only a false alarm)."""
    from hwmgr.catalog.validate import _CONTROL, parse

    for doc in ({"k": [value]}, {value: 1}):
        raw = json.dumps(doc, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
        _data, found = parse(raw)  # a raw lone surrogate is not UTF-8: refused too
        assert bool(found) == (_CONTROL.search(value) is not None), (value, found)


@pytest.mark.heavy
def test_docs_site_layer_example_validates(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The site layers docs/catalog.md shows are accepted layered over the shipped catalog:
    the first makes its version the recommended one, the second adds a kernel to a listed
    version (naming only that one: kernels merge by value); the third (the offline path) names
    a file obtained by hand instead of a URL."""
    text = (REPO / "docs" / "catalog.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    assert len(blocks) == 3
    layer, kernels = tmp_path / "20-igb.json", tmp_path / "60-kernels.json"
    layer.write_text(blocks[0])
    kernels.write_text(blocks[1])
    offline = tmp_path / "21-igb-offline.json"
    offline.write_text(blocks[2])
    assert main(["catalog", "validate", str(SHIPPED), str(layer), str(kernels)]) == 0
    assert main(["catalog", "validate", str(SHIPPED), str(offline)]) == 0
    cat = load_catalog([SHIPPED, layer, kernels])
    assert cat.entry("igb")["versions"]["5.18.7"]["status"] == "recommended"
    shipped = load_catalog([SHIPPED]).entry("be2net")["versions"]["10.2.470.14"]["kernels"]
    assert cat.entry("be2net")["versions"]["10.2.470.14"]["kernels"] == [
        *shipped, "6.1.0-56-amd64"]
