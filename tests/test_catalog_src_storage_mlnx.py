"""catalog-src miners for NVIDIA MLNX bug-fix tables, the megaraid_sas ChangeLog and the smartpqi
changelog, run on short real excerpts (tests/fixtures/catalog-src/storage-mlnx/); no network."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from hwmgr.catalog import versions

# the miners run by hand on fetched sources, not on a host: make test runs these, make
# check (the editing lane) leaves them out
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "catalog-src"
FIX = ROOT / "tests" / "fixtures" / "catalog-src" / "storage-mlnx"


@pytest.fixture(scope="module", autouse=True)
def _catalog_src_on_path() -> Iterator[None]:
    sys.path.insert(0, str(SRC))
    yield
    sys.path.remove(str(SRC))


def test_mlnx_rows_one_field_per_line() -> None:
    import mlnx_bugfixes as mb

    rows = mb.parse_page(FIX / "mlnx-5.8-3.0.7.0.101-excerpt.txt")
    got = {r.ref: (r.discovered, r.fixed) for r in rows}
    assert got == {
        "3569695": ("5.8-3.0.7.0.101", "5.8-3.0.7.0.101"),
        # "5.8- 1.0.1.1" on the page: the stray space is not part of the release
        "3484175": ("5.8-1.0.1.1", "5.8-3.0.7.0"),
        "3440491": ("5.0-1.0.0.0", "5.8-3.0.7.0"),
    }
    assert {r.url for r in rows} == {
        "https://docs.nvidia.com/networking/display/MLNXOFEDv583070101/"
        "Bug+Fixes+in+This+Version"}


def test_mlnx_rows_pipe_table_repeated_ref_and_cut_row() -> None:
    import mlnx_bugfixes as mb

    rows = mb.parse_page(FIX / "mlnx-en-4.9-5.1.0.0-excerpt.txt")
    got = {r.ref: (r.discovered, r.fixed) for r in rows}
    assert got == {
        "2944030": (None, "4.9-5.1.0.0"),
        "3037901": ("4.9-0.1.7.0", "4.9-5.1.0.0"),
        "2976200": ("4.9-0.1.7.0", "4.9-5.1.0.0"),
        "2802401": (None, None),  # the excerpt ends inside this row
    }


def test_mlnx_reported_version() -> None:
    import mlnx_bugfixes as mb

    table = {"5.9-0.5.6.0": "5.9-0.5.5"}
    assert mb.reported_version("5.4-3.0.3.0", table) == "5.4-3.0.3"
    assert mb.reported_version("5.9-0.5.6.0", table) == "5.9-0.5.5"
    assert mb.reported_version("24.10-1.1.4.0.105", table) == "24.10-1.1.4.0.105"


def test_mlnx_build_ranges_and_left_out_rows() -> None:
    import mlnx_bugfixes as mb

    manual: Dict[str, Any] = {"rows": {
        "3484175": {"drivers": ["mlx5_core"], "severity": "crash", "symptom": "recovery crash"},
        "2944030": {"drivers": ["mlx5_core"], "severity": "cosmetic", "symptom": "renames"},
        "3037901": {"drivers": ["mlx5_core", "mlx4_core"], "severity": "link-down",
                    "symptom": "RDMA traffic fails"},
    }}
    pages = [FIX / "mlnx-5.8-3.0.7.0.101-excerpt.txt", FIX / "mlnx-en-4.9-5.1.0.0-excerpt.txt"]
    by_driver, notes = mb.build(pages, manual, {})
    assert sorted(by_driver) == ["mlx4_core", "mlx5_core"]
    e = {x["id"]: x for x in by_driver["mlx5_core"]}
    assert sorted(e) == ["mlx5_core-3037901", "mlx5_core-3484175"]
    assert e["mlx5_core-3484175"]["affected"]["driver_versions"] == [
        {"introduced": "5.8-1.0.1", "fixed": "5.8-3.0.7"}]
    assert e["mlx5_core-3484175"]["sources"][0]["kind"] == "bug-fix-table"
    assert any(n.startswith("2944030: no 'Discovered") for n in notes)
    # what the drivers report: in-tree builds sit below the range, the fixed release at its end
    for inbox in ("3.0-1 (January 2015)", "5.0-0"):
        assert versions.compare(inbox, "5.8-1.0.1", "driver") < 0
    assert versions.compare("5.8-2.0.3", "5.8-3.0.7", "driver") < 0
    assert versions.compare("5.8-3.0.7", "5.8-3.0.7", "driver") == 0
    assert versions.compare("4.0-0", "4.9-0.1.7", "driver") < 0


# the lines of knneth/mlnx-ofa_kernel's import of MLNX_OFED 4.0-2.0.0.1 (commit 2f5a30d8):
# https://github.com/knneth/mlnx-ofa_kernel/blob/2f5a30d889b37af51f29d66381360a1ab51a5e61/
# drivers/net/ethernet/mellanox/mlx4/{mlx4.h,mlx4_en.h,en_ethtool.c}
MLX4_4_0 = {
    "mlx4.h": '#define DRV_VERSION\t"4.0-2.0.0"\n',
    "mlx4_en.h": '#define DRV_NAME\t"mlx4_en"\n#define DRV_VERSION\t"4.0-2.0.0"\n'
                 '#define DRV_RELDATE\t"28 Mar 2017"\n',
    "en_ethtool.c": '\tstrlcpy(drvinfo->version, DRV_VERSION " (" DRV_RELDATE ")",\n',
}


def test_mlnx_mlx4_strings_of_a_tree() -> None:
    import mlnx_bugfixes as mb

    got = mb._mlx4_strings(lambda path: MLX4_4_0[path.rsplit("/", 1)[1]])
    assert got == {"mlx4_core": "4.0-2.0.0", "mlx4_en": "4.0-2.0.0",
                   "mlx4_en_ethtool": "4.0-2.0.0 (28 Mar 2017)"}


def test_mlnx_mlx4_versions_committed() -> None:
    """Every release read in the tree: mlx4_core and mlx4_en report mlx5_core's string."""
    doc = json.loads((SRC / "manual" / "mlnx_driver_versions.json").read_text(encoding="utf-8"))
    mlx4 = doc["mlx4"]
    assert {"4.0-2.0.0.1", "4.9-0.1.7.0", "4.9-5.1.0.0", "5.0-2.1.8.0"} <= set(mlx4)
    for release, got in mlx4.items():
        assert got["mlx4_core"] == got["mlx4_en"] == doc["reported"].get(
            release, got["mlx4_en"]), release
    # MLNX_OFED 3.4-1.0.0.0's tree (gpudirect/mlnx-ofa_kernel): the string a field host's
    # mlx4_en printed (ntop/ntopng#1793)
    assert mlx4["3.4-1.0.0.0"]["mlx4_en_ethtool"] == "3.4-1.0.0 (25 Sep 2016)"
    # ethtool -i of mlx4_en carries the date up to 4.1 only
    assert mlx4["4.1-1.0.2.0"]["mlx4_en_ethtool"] == "4.1-1.0.2 (27 Jun 2017)"
    assert mlx4["4.2-1.0.0.0"]["mlx4_en_ethtool"] == "4.2-1.0.0"


def test_mlnx_mlx4_reported_version_and_ranges() -> None:
    import mlnx_bugfixes as mb

    mlx4 = {"4.9-0.1.7.0": {"mlx4_core": "4.9-0.1.7", "mlx4_en": "4.9-0.1.7"},
            "4.9-5.1.0.0": {"mlx4_core": "4.9-5.1.0", "mlx4_en": "4.9-5.1.0"}}
    assert mb.reported_version("4.9-5.1.0.0", {}, "mlx4_en", mlx4) == "4.9-5.1.0"
    assert mb.reported_version("4.9-5.1.0.0", {"4.9-5.1.0.0": "x"}, "mlx5_core", mlx4) == "x"
    # a release in no tree read drops its fourth number (3.4-1.0.0.0's tree says the same)
    assert mb.reported_version("3.4-2.0.0.0", {}, "mlx4_en", mlx4) == "3.4-2.0.0"
    manual: Dict[str, Any] = {"rows": {
        "3037901": {"drivers": ["mlx4_core", "mlx4_en"], "severity": "link-down",
                    "symptom": "RDMA traffic fails"}}}
    by_driver, _ = mb.build([FIX / "mlnx-en-4.9-5.1.0.0-excerpt.txt"], manual, {}, mlx4)
    for driver in ("mlx4_core", "mlx4_en"):
        (e,) = by_driver[driver]
        assert e["affected"]["driver_versions"] == [
            {"introduced": "4.9-0.1.7", "fixed": "4.9-5.1.0"}]
    # the date mlx4_en appends in ethtool -i does not get in the way of comparing
    field = "3.4-1.0.0 (25 Sep 2016)"
    assert versions.compare(field, "3.4-1.0.0", "driver") == 0
    assert versions.compare(field, "4.9-0.1.7", "driver") < 0
    assert versions.compare("4.0-2.0.0 (28 Mar 2017)", "4.0-2.0.0", "driver") == 0
    assert versions.compare("4.0-2.0.0 (28 Mar 2017)", "4.1-1.0.2", "driver") < 0


def test_smartpqi_bullets_and_entries() -> None:
    import smartpqi_notes as sp

    text = (FIX / "smartpqi-README-excerpt.md").read_text(encoding="utf-8")
    bullets = [(b.version, b.number) for b in sp.parse_changelog(text)]
    # sub-bullets (Root cause / Fix / Risk), even a misplaced "- Fix:", are not items
    assert bullets == [("2.1.28-025", 1), ("2.1.28-025", 2), ("2.1.16-030", 1),
                       ("2.1.16-030", 2), ("2.1.12-055", 1), ("2.1.12-055", 2)]
    manual = {"url": "https://github.com/Smart-Storage/smartpqi/blob/x/README.md",
              "title": "smartpqi changelog",
              "entries": [{"version": "2.1.16-030", "item": 2, "slug": "linkdown-hang",
                           "severity": "crash", "symptom": "hang after link-down"}]}
    (entry,) = sp.build(text, manual)
    assert entry["id"] == "smartpqi-2.1.16-030-linkdown-hang"
    assert entry["affected"]["driver_versions"] == [{"fixed": "2.1.16-030"}]
    assert versions.compare("2.1.14-035", "2.1.16-030", "driver") < 0
    bad = dict(manual, entries=[dict(manual["entries"][0], item=9)])
    with pytest.raises(ValueError):
        sp.build(text, bad)


def test_megaraid_blocks_both_header_forms() -> None:
    import megaraid_changelog as mc

    text = (FIX / "ChangeLog.megaraid_sas-excerpt").read_text(encoding="utf-8")
    rels = [(r.current, r.older, len(r.items)) for r in mc.parse_changelog(text)]
    assert rels == [("06.803.02.00-rc1", "06.803.01.00-rc1", 5),
                    ("00.00.04.08", "00.00.04.06", 2),
                    ("00.00.04.06", "00.00.04.04", 2)]
    manual = {"sources": {"k": {"title": "ChangeLog", "url": "https://example.org/c"}},
              "entries": [{"version": "06.803.02.00-rc1", "item": 1, "slug": "reset-mutex",
                           "severity": "crash", "symptom": "reset mutex left held"}]}
    (entry,) = mc.build([("k", text)], manual)
    assert entry["id"] == "megaraid_sas-06.803.02.00-rc1-reset-mutex"
    assert "present up to 06.803.01.00-rc1" in entry["sources"][0]["observed"]
    # an in-tree RHEL build of the fixed release is not below the fix; the previous one is
    assert versions.compare("06.803.02.00-rh1", "06.803.02.00-rc1", "driver") >= 0
    assert versions.compare("06.803.01.00-rc1", "06.803.02.00-rc1", "driver") < 0


@pytest.mark.parametrize("name", ["mlnx.json", "storage.json"])
def test_committed_proposals_are_well_formed(name: str) -> None:
    import kiproposal as kp

    doc = json.loads((SRC / "proposed" / name).read_text(encoding="utf-8"))
    assert doc["source"] and doc["drivers"]
    for driver, body in doc["drivers"].items():
        entries = body["known_issues"]
        kp.check_unique(entries)
        for e in entries:
            again = kp.make_entry(driver, e["id"], e["severity"], e["symptom"],
                                  e["affected"]["driver_versions"], e["sources"],
                                  e.get("applies_to"))
            assert again == e
