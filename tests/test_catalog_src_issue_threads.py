"""catalog-src/issue_threads.py: the reviewed vendor issue-thread facts
(catalog-src/manual/vendor_issue_threads.json) to a proposal, and that the merged catalog
holds every proposed item (ids, URLs, fixed versions in the driver's own scheme)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from support.catalog_src import load

from hwmgr.catalog.versions import compare

REPO = Path(__file__).resolve().parent.parent
FACTS = REPO / "catalog-src" / "manual" / "vendor_issue_threads.json"
INTEL_FACTS = REPO / "catalog-src" / "manual" / "intel_issue_threads.json"
COMMITTED = REPO / "catalog-src" / "proposed" / "issue-threads.json"
DRIVERS = REPO / "catalogs" / "drivers"




threads = load("issue_threads")
common = sys.modules["vendor_notes_common"]


@pytest.fixture(scope="module")
def proposal(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    out = tmp_path_factory.mktemp("threads") / "issue-threads.json"
    assert threads.main([str(FACTS), "--output", str(out)]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def _issues(doc: Dict[str, Any]) -> List[tuple]:
    return [(d, i) for d, e in doc["drivers"].items() for i in e["known_issues"]]


def test_the_committed_proposal_is_what_the_script_writes(proposal: Dict[str, Any]) -> None:
    assert proposal == json.loads(COMMITTED.read_text(encoding="utf-8"))


def test_ids_and_ranges(proposal: Dict[str, Any]) -> None:
    by_id = {i["id"]: (d, i) for d, i in _issues(proposal)}
    assert {"ena-2.17.2g-eni-hot-unplug-use-after-free",
            "ena-2.13.0g-lpc-get-page-bug-newer-kernels",
            "ena-2.2.8g-xdp-pass-rx-offset-no-connectivity",
            "gve-1.4.6-xsk-pool-ops-while-down",
            "gve-1.4.8-ethtool-after-shutdown-panic"} <= set(by_id)
    _, uaf = by_id["ena-2.17.2g-eni-hot-unplug-use-after-free"]
    # the thread names no first affected release: no `introduced`, so only outdated
    assert uaf["affected"] == {"driver_versions": [{"fixed": "2.17.2g"}]}
    # an ENI detach is routine on EC2: no condition
    assert uaf["severity"] == "crash" and "only_when" not in uaf
    assert uaf["sources"][0]["url"] == "https://github.com/amzn/amzn-drivers/issues/380"
    # a shutdown is never a condition (every reboot runs it)
    assert "only_when" not in by_id["gve-1.4.8-ethtool-after-shutdown-panic"][1]


def test_every_item_has_a_thread_url_and_a_fix_in_the_driver_scheme(
        proposal: Dict[str, Any]) -> None:
    facts = json.loads(FACTS.read_text(encoding="utf-8"))["issues"]
    assert len(_issues(proposal)) == len(facts)
    for driver, issue in _issues(proposal):
        scheme = common.driver_scheme(driver)
        (rng,) = issue["affected"]["driver_versions"]
        assert compare(rng["fixed"], rng["fixed"], scheme) == 0
        assert issue["id"].startswith(f"{driver}-{rng['fixed']}-")
        for src in issue["sources"]:
            assert src["kind"] == "issue-thread"
            assert src["url"].startswith("https://github.com/")
            assert "/issues/" in src["url"] or "/pull/" in src["url"]
        assert common.check_issue(issue, scheme) == []


def test_the_merged_catalog_holds_them_for_vendor_builds(proposal: Dict[str, Any]) -> None:
    for driver, issue in _issues(proposal):
        data = json.loads((DRIVERS / f"{driver}.json").read_text(encoding="utf-8"))
        have = {i["id"]: i for i in data["drivers"][driver].get("known_issues", [])}
        assert issue["id"] in have, issue["id"]
        merged = dict(have[issue["id"]])
        assert merged.pop("build") == "vendor"
        assert merged == issue


def test_intel_thread_facts_read_through_the_same_reader() -> None:
    issues = threads.thread_issues(json.loads(INTEL_FACTS.read_text(encoding="utf-8")))
    ids = {i["id"] for v in issues.values() for i in v}
    assert ids == {"i40e-2.28.13-rx-build-skb-overhead", "iavf-4.5.3.4-stale-reset-event-stuck"}


def test_a_fact_without_a_thread_source_is_refused() -> None:
    fact = json.loads(FACTS.read_text(encoding="utf-8"))["issues"][0]
    bad = dict(fact, source=dict(fact["source"], kind="release-notes"))
    with pytest.raises(common.MiningError):
        threads.thread_issues({"issues": [bad]})
    with pytest.raises(common.MiningError):
        threads.thread_issues({"issues": [{k: v for k, v in fact.items() if k != "fixed"}]})
