"""catalog-src/kernel_cves.py: Linux kernel CNA records (verbatim copies of the vulns
repository at d9dda40c) to proposed known issues: ranges, severity, ids, skips, the proposal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.catalog_src import load

# the miners run by hand on fetched sources, not on a host: make test runs these, make
# check (the editing lane) leaves them out
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
FIX = Path(__file__).resolve().parent / "fixtures" / "catalog-src" / "kernel-cves"




kc = load("kernel_cves")


def _record(cve: str) -> dict[str, Any]:
    return json.loads((FIX / f"{cve}.json").read_text(encoding="utf-8"))


def test_mainline_range_with_stable_fix() -> None:
    """ice, introduced in 5.16, fixed in 5.16.17 and mainline 5.17."""
    out = kc.convert(_record("CVE-2022-48841"))
    assert list(out) == ["ice"]
    issue = out["ice"]
    assert issue["id"] == "CVE-2022-48841"
    assert issue["severity"] == "crash"
    assert issue["affected"] == {"kernels": {"upstream": {"introduced": "5.16",
                                                          "fixed": ["5.16.17", "5.17"]}}}
    assert issue["symptom"] == "ice: NULL pointer dereference in ice_update_vsi_tx_ring_stats()"
    assert issue["sources"] == [{
        "title": "CVE-2022-48841 (Linux kernel CNA record)",
        "url": "https://www.cve.org/CVERecord?id=CVE-2022-48841",
        "kind": "cve",
        "observed": "affected from 5.16; fixed in 5.16.17, 5.17"}]


def test_stable_only_regression() -> None:
    """bnxt_en: only 6.10.4 is affected (a stable backport, fixed in 6.10.5, never in
    mainline); the `bnxt_en :` title prefix is still stripped."""
    issue = kc.convert(_record("CVE-2024-44933"))["bnxt_en"]
    assert issue["affected"]["kernels"]["upstream"] == {"introduced": "6.10.4",
                                                        "fixed": ["6.10.5"]}
    assert issue["severity"] == "crash"  # out-of-bounds
    assert issue["symptom"].startswith("bnxt_en: memory out-of-bounds in ")


def test_backport_into_the_previous_stream_fits() -> None:
    """nvme: mainline from 5.11, and 5.10.9 up to 5.10.253 through a stable backport."""
    issue = kc.convert(_record("CVE-2025-40261"))["nvme"]
    assert issue["affected"]["kernels"]["upstream"] == {
        "introduced": "5.10.9",
        "fixed": ["5.10.253", "5.15.209", "6.1.167", "6.6.118", "6.12.60", "6.17.10", "6.18"]}
    assert issue["severity"] == "crash"  # a kernel BUG in the description


def test_several_introduced_points_are_skipped() -> None:
    """i40e: brought into 4.19.264, 5.4.223, 5.10.153, 5.15.77 and 6.0.7 besides mainline 6.1:
    one introduced point cannot say that 4.20..5.3 stay unaffected."""
    record = _record("CVE-2024-36020")
    with pytest.raises(kc.Unfit) as why:
        kc.convert(record)
    assert why.value.reason == kc.SKIP_SEVERAL_INTRODUCED
    assert kc.classify(record["containers"]["cna"]["title"]) == ("cosmetic", "warning only")


def test_check_catches_a_wrong_mapping() -> None:
    entries = kc.release_entries(_record("CVE-2025-40261"))
    fixed = ["5.10.253", "5.15.209", "6.1.167", "6.6.118", "6.12.60", "6.17.10", "6.18"]
    assert kc.mismatch(entries, "5.10.9", fixed) is None
    assert kc.mismatch(entries, "5.11", fixed) == "5.10.9"  # the backport left out
    assert kc.mismatch(entries, "5.10.9", fixed[:2] + fixed[3:]) == "6.1.167"  # fix left out


@pytest.mark.parametrize("title,severity", [
    ("ice: Fix memory leak in ice_set_ringparam()", "performance"),
    ("gve: fix Rx queue stall on alloc failure", "link-down"),
    ("gve: fix header buffer corruption with header-split and HW-GRO", "data-loss"),
    ("gve: Fix stats report corruption on queue count change", "cosmetic"),
    ("i40e: fix idx validation in config queues msg", "security"),
])
def test_severity_rules(title: str, severity: str) -> None:
    assert kc.classify(title)[0] == severity


def test_model_agrees_with_hwmgr() -> None:
    """The range model here is the one hwmgr's kernel-build check applies."""
    kbuild = pytest.importorskip("hwmgr.catalog.kbuild")
    if not hasattr(kbuild, "fix_for"):
        pytest.skip("hwmgr.catalog.kbuild has no fix_for")
    fixed = ("5.10.253", "5.15.209", "6.1.167", "6.6.118", "6.12.60", "6.17.10", "6.18")
    for version in ("5.10.8", "5.10.9", "5.10.252", "5.10.253", "5.14.21", "5.15.208",
                    "5.15.209", "6.2.16", "6.12.59", "6.17.10", "6.18", "6.19.3"):
        covered, _fix = kbuild.fix_for("upstream", version, fixed)
        intro = kbuild.compare("upstream", version, "5.10.9") >= 0
        assert (intro and not covered) == kc.model_affected("5.10.9", fixed, kc.vkey(version))


def test_proposal(tmp_path: Path) -> None:
    out = tmp_path / "kernel-cves.json"
    assert kc.main([str(FIX), "--commit", "d9dda40c8f21126303839427ebc8652167302488",
                    "--output", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    proposal = json.loads(text)
    assert text == json.dumps(proposal, indent=1, ensure_ascii=False) + "\n"
    assert "d9dda40c8f21126303839427ebc8652167302488" in proposal["source"]
    assert "CVEProject/cvelistV5" in proposal["source"]
    assert {d: [i["id"] for i in v["known_issues"]] for d, v in proposal["drivers"].items()} \
        == {"bnxt_en": ["CVE-2024-44933"], "ice": ["CVE-2022-48841"],
            "nvme": ["CVE-2025-40261"]}
    _proposal, tallies = kc.build(FIX)
    assert tallies["skipped"] == {kc.SKIP_SEVERAL_INTRODUCED: 1}
    assert tallies["records matched"] == 4 and tallies["converted"] == 3
