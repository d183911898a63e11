"""catalog-src/ena_release_notes.py: Amazon's ENA RELEASENOTES.md (unmodified release sections
of amzn/amzn-drivers at 64788ef7, see the fixture's README) to proposed known issues: parsing,
reported versions, mapping by item key, ranges under the driver scheme, the proposal file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from support.catalog_src import load

from hwmgr.catalog.versions import compare

# the miners run by hand on fetched sources, not on a host: make test runs these, make
# check (the editing lane) leaves them out
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
FIX = Path(__file__).resolve().parent / "fixtures" / "catalog-src" / "vendor-notes"
COMMIT = "64788ef7c182a9383445942b5f5f77fe1d25a290"




ena = load("ena_release_notes")
common = sys.modules["vendor_notes_common"]


@pytest.fixture(scope="module")
def releases() -> List[Any]:
    text = (FIX / "ena-RELEASENOTES-excerpt.md").read_text(encoding="utf-8")
    return ena.parse_release_notes(text)


def _rel(releases: List[Any], version: str) -> Any:
    return ena.find_release(releases, version)


def test_release_sections_in_file_order(releases: List[Any]) -> None:
    assert [r.version for r in releases] == [
        "2.13.2", "2.13.1", "2.13.0", "2.8.4", "2.8.3", "2.8.2", "2.8.1",
        "1.5.1", "1.5.0", "1.1.3"]
    assert _rel(releases, "2.13.2").heading == "r2.13.2 release notes"


def test_bug_fix_lists_under_every_spelling(releases: List[Any]) -> None:
    """**Bug fixes**, **Bug Fixes**, **Bug Fixes:** and r2.8.2's **Buf Fixes** all fold."""
    fixes = _rel(releases, "2.13.2").items(ena.BUG_FIXES)
    assert len(fixes) == 5
    assert fixes[2] == "Prevent a crash in RPS by declaring ndo_rx_flow_steer hook"
    assert _rel(releases, "2.8.2").items(ena.BUG_FIXES) == [
        "Fix devlink large LLQ config not fully applied"]
    assert len(_rel(releases, "2.8.3").items(ena.BUG_FIXES)) == 4
    assert len(_rel(releases, "1.5.0").items(ena.BUG_FIXES)) == 2
    assert _rel(releases, "2.8.1").items("minor changes")[0] == "Add napi_build_skb support"
    assert _rel(releases, "2.13.0").items("new features")[1] == "Add support for flow steering"


def test_continuation_lines_join_their_bullet(releases: List[Any]) -> None:
    fixes = _rel(releases, "1.5.1").items(ena.BUG_FIXES)
    assert len(fixes) == 5
    assert fixes[3].startswith("reorder IO interrupt handler - To avoid a very rare race")
    assert fixes[3].endswith("so better have these set before scheduling napi.")
    assert "\t" not in fixes[3] and "  " not in fixes[3]
    assert _rel(releases, "1.1.3").items("unsectioned") == [
        "Add support for RHEL 6.7/6.8 and 7.3"]


def test_reported_versions() -> None:
    """The GitHub builds report X.Y.Zg from r1.2.0 on; r1.1.x reported the bare number."""
    assert ena.reported_version("1.1.3") == "1.1.3"
    assert ena.reported_version("1.2.0") == "1.2.0g"
    assert ena.reported_version("2.13.1") == "2.13.1g"
    assert compare("1.1.3", "1.2.0g", "driver") < 0
    assert compare("2.9.1g", "2.10.0g", "driver") < 0


def test_item_key_ignores_rewrapping() -> None:
    assert common.item_key("Fix ena_probe destroy order") == "59f9cfd77e"
    assert common.item_key("a  b\n\tc") == common.item_key("a b c")


def _mapping(entries: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"issues": entries}


RPS = {"release": "2.13.2", "item": "1887495f1d", "slug": "rps-missing-flow-steer-hook",
       "severity": "crash", "symptom": "RPS traffic hits a missing hook (panic)",
       "introduced": {"release": "2.13.0", "section": "new features", "item": "6db95f146a"}}
REVERT = {"release": "2.8.4", "item": "d7dac11e80", "slug": "napi-skb-cache-pps-drop",
          "severity": "performance", "symptom": "lower packet rate",
          "introduced": {"release": "2.8.1", "section": "minor changes", "item": "dfdc929566"}}
EARLY_IRQ = {"release": "1.5.0", "item": "6af727be37", "slug": "early-irq-enable",
             "severity": "link-down", "symptom": "interrupts enabled too early"}


def test_build_issue_with_feature_lower_bound(releases: List[Any]) -> None:
    (issue,) = ena.build_issues(releases, _mapping([RPS]), COMMIT)
    assert issue["id"] == "ena-2.13.2g-rps-missing-flow-steer-hook"
    assert issue["severity"] == "crash"
    assert issue["affected"] == {"driver_versions": [{"introduced": "2.13.0g",
                                                      "fixed": "2.13.2g"}]}
    (src,) = issue["sources"]
    assert src["kind"] == "release-notes"
    assert src["url"] == ("https://github.com/amzn/amzn-drivers/blob/" + COMMIT
                          + "/kernel/linux/ena/RELEASENOTES.md#r2132-release-notes")
    assert "2.13.2g (r2.13.2) is the first release with the fix" in src["observed"]
    assert "releases from 2.13.0g up to the fix" in src["observed"]


def test_ranges_judge_reported_versions(releases: List[Any]) -> None:
    issues = ena.build_issues(releases, _mapping([RPS, REVERT, EARLY_IRQ]), COMMIT)

    def affected(issue: Dict[str, Any], version: str) -> bool:
        (rng,) = issue["affected"]["driver_versions"]
        low = rng.get("introduced")
        return ((low is None or compare(version, low, "driver") >= 0)
                and compare(version, rng["fixed"], "driver") < 0)

    rps, revert, early = issues
    assert [affected(rps, v) for v in ("2.12.3g", "2.13.0g", "2.13.1g", "2.13.2g")] == [
        False, True, True, False]
    assert [affected(revert, v) for v in ("2.8.0g", "2.8.1g", "2.8.3g", "2.8.4g")] == [
        False, True, True, False]
    assert early["affected"] == {"driver_versions": [{"fixed": "1.5.0g"}]}
    assert [affected(early, v) for v in ("1.1.3", "1.4.0g", "1.5.0g", "2.0.2g")] == [
        True, True, False, False]
    assert "every earlier release counts as affected" in early["sources"][0]["observed"]


def test_unknown_item_or_release_is_refused(releases: List[Any]) -> None:
    with pytest.raises(common.MiningError, match="no 'bug fixes' item with key"):
        ena.build_issues(releases, _mapping([dict(RPS, item="0000000000")]), COMMIT)
    with pytest.raises(common.MiningError, match="no r9.9.9 section"):
        ena.build_issues(releases, _mapping([dict(RPS, release="9.9.9")]), COMMIT)
    bad_intro = dict(RPS, introduced=dict(RPS["introduced"], section="minor changes"))
    with pytest.raises(common.MiningError, match="no 'minor changes' item"):
        ena.build_issues(releases, _mapping([bad_intro]), COMMIT)


def test_reviewed_mapping_resolves_on_the_excerpt(releases: List[Any]) -> None:
    """Every entry of catalog-src/manual/ena_release_notes.json whose releases the excerpt
    holds resolves to an item there; all entries are well-formed."""
    mapping = json.loads((REPO / "catalog-src" / "manual" / "ena_release_notes.json")
                         .read_text(encoding="utf-8"))
    held = {r.version for r in releases}
    inside = [e for e in mapping["issues"] if e["release"] in held
              and (not e.get("introduced") or e["introduced"]["release"] in held)]
    assert len(inside) >= 5
    issues = ena.build_issues(releases, _mapping(inside), COMMIT)
    common.check_all({"ena": issues})
    for entry in mapping["issues"]:
        assert len(entry["item"]) == 10 and entry["severity"] in common.SEVERITIES
        assert 0 < len(entry["symptom"]) <= common.MAX_SYMPTOM


def test_proposal_file_and_format_checks(releases: List[Any], tmp_path: Path) -> None:
    issues = ena.build_issues(releases, _mapping([RPS, EARLY_IRQ]), COMMIT)
    out = tmp_path / "ena.json"
    common.write_proposal(out, "amzn/amzn-drivers@" + COMMIT, {"ena": issues})
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["source"] == "amzn/amzn-drivers@" + COMMIT
    assert [i["id"] for i in doc["drivers"]["ena"]["known_issues"]] == [
        "ena-2.13.2g-rps-missing-flow-steer-hook", "ena-1.5.0g-early-irq-enable"]
    broken = json.loads(json.dumps(issues[0]))
    broken["affected"]["driver_versions"][0]["introduced"] = "2.14.0g"
    broken["sources"][0]["url"] = "http://example.invalid/"
    problems = common.check_issue(broken, "driver")
    assert any("is not before fixed" in p for p in problems)
    assert any("not https" in p for p in problems)
    with pytest.raises(common.MiningError, match="duplicate id"):
        common.check_all({"ena": [issues[0], issues[0]]})
