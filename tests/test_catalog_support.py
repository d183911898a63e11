"""End of support (hwmgr/catalog/support.py): the lifecycle table's rules, and the verdict
on an in-tree version string the catalog cannot place to a kernel build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwmgr.catalog.load import Catalog, load_catalog
from hwmgr.catalog.support import Support, last_month
from hwmgr.config import config_from
from hwmgr.host.snapshot import open_host
from hwmgr.inventory.scan import Inventory

REPO = Path(__file__).resolve().parent.parent
FIELD = REPO / "tests" / "fixtures" / "field"
TABLE = {"as_of": "2026-11",
         "longterm": {"4.19": "2024-12", "5.4": "2025-12", "5.10": "supported"},
         "releases": {"rhel-7": "2024-06", "rhel-8": "supported", "rhel-8.1": "2021-11",
                      "debian-12": "supported", "ubuntu-20.04": "2025-06",
                      "debian-11": "2026-11"}}


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog([REPO / "catalogs"], config=config_from(None))


def test_series_longterm_and_non_longterm() -> None:
    s = Support.from_table(TABLE)
    assert s.series("4.19") and s.series("4.19").month == "2024-12"
    assert s.series("5.10") is None  # still supported
    assert s.series("4.20") and s.series("4.20").month is None  # non-longterm, over
    assert s.series("6.7") is None  # newer than the table knows: not claimed


def test_release_minor_then_major_and_rebuilds() -> None:
    s = Support.from_table(TABLE)
    assert s.release("rhel-8.1").month == "2021-11"
    assert s.release("rhel-8.10") is None  # the major's row: supported
    assert s.release("centos-7.3").month == "2024-06"  # a rebuild reads as RHEL
    assert s.release("alma-8.1").month == "2021-11"
    assert s.release("debian-11") is None  # ends in the as_of month: not yet over
    assert s.release("sles-15") is None  # a line the table does not know


def test_all_over_needs_every_line() -> None:
    s = Support.from_table(TABLE)
    ends = s.all_over(["rhel-7.9", "ubuntu-20.04"], ["4.19", "5.4"])
    assert ends and last_month(ends) == "2025-12"
    assert s.all_over(["rhel-7.9", "debian-12"], ["4.19"]) is None
    assert s.all_over([], []) is None
    assert Support.from_table(None).all_over(["rhel-7.9"], []) is None


def test_the_shipped_table_is_validated_and_dated(cat: Catalog) -> None:
    s = cat.support()
    assert s.as_of and s.release("debian-10") and s.series("4.9")
    assert s.release("debian-12") is None and s.series("6.1") is None


def _device(cat: Catalog, host: str) -> dict:
    h, cleanup = open_host(str(FIELD / host / "snapshot"))
    try:
        scan = Inventory(h, verdict=cat.verdict).scan()
    finally:
        if cleanup:
            cleanup()
    return next(d for d in scan.devices if str(d.get("class"))[:2] in ("01", "02")
                and d.get("driver_version"))


def test_an_unplaced_build_past_support_is_outdated_without_naming_lines(cat: Catalog) -> None:
    dev = _device(cat, "ethq14-bnx2-bcm5709")  # bnx2 2.2.6 from ethtool, no kernel recorded
    got = dev["catalog"]
    assert got["status"] == "outdated", got
    reason = got["reason"].lower()
    assert "end of support" in reason
    for name in ("rhel", "centos", "debian", "ubuntu", "alma"):
        assert name not in reason, reason


def test_modinfo_only_lines_count_when_the_version_is_not_from_ethtool(cat: Catalog) -> None:
    """RHEL 8.4-8.10 print bnx2 2.2.6 only in modinfo: a version read there may come from a
    still supported RHEL 8.10, so the string is not outdated by itself."""
    dev = dict(_device(cat, "ethq14-bnx2-bcm5709"))
    dev["driver_version_source"] = "module"
    dev.pop("catalog", None)
    got = cat.verdict(dev)
    assert got is not None and got["status"] == "uncatalogued", got


def test_upstream_series_are_filled_from_evidence() -> None:
    """catalog-src/upstream_series.py has been run over the shipped driver files."""
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("upstream_series", REPO / "catalog-src" / "upstream_series.py")
    assert spec and spec.loader
    mod = module_from_spec(spec)
    spec.loader.exec_module(mod)
    for path in sorted((REPO / "catalogs" / "drivers").glob("*.json")):
        assert not mod.fill(json.loads(path.read_text())), path.name
