"""`hwmgr catalog stats`: the counts of the catalog's knowledge (catalog/stats.py), from a small
layered catalog whose answer is known, and from the shipped catalog through the verb."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from hwmgr.catalog.issues import KERNEL_CVE, UNBOUNDED
from hwmgr.catalog.stats import knowledge_stats
from tests.test_known_issues import DEB_TABLE, LAYER, layered


def test_known_issues_are_counted_by_driver_severity_kind_condition_and_ceiling(
        tmp_path: Path) -> None:
    layer = copy.deepcopy(LAYER)
    layer["drivers"]["megaraid_sas"]["known_issues"].append(
        {"id": "mr-vf-crash", "severity": "crash", "symptom": "a crash with VFs",
         "only_when": "sriov", "affected": {"driver_versions": [
             {"introduced": "07.700.00.00", "fixed": "07.725.01.00"}]},
         "sources": [{**LAYER["drivers"]["megaraid_sas"]["known_issues"][0]["sources"][0],
                      "kind": "bug-fix-table"}]})
    cat = layered(tmp_path, DEB_TABLE, layer)
    got = knowledge_stats(cat.entries)
    assert got["known_issues"] == 5
    assert got["known_issues_by_driver"] == {"be2net": 1, "e1000e": 1, "megaraid_sas": 3}
    assert got["known_issues_by_severity"] == {"crash": 2, "link-down": 1, "performance": 1,
                                               "security": 1}
    assert got["known_issues_by_source_kind"] == {"bug-fix-table": 1, "cve": 1,
                                                  "release-notes": 3}
    assert got["known_issues_by_condition"] == {"sriov": 1}
    # the strongest verdict each can give: mr-reset-hang names its first affected release;
    # be2net's link flap names only its fix; e1000e's is a kernel CVE record
    assert got["known_issues_by_ceiling"] == {
        "known-bad": 1, "known-bad where its condition is seen": 1,
        f"outdated: {KERNEL_CVE}": 1, f"outdated: {UNBOUNDED}": 1,
        "outdated: severity": 1}
    assert got["firmware_requirements_by_driver"] == {"megaraid_sas": 2}


def test_the_verb_counts_the_shipped_catalog_consistently() -> None:
    res = subprocess.run([sys.executable, "-m", "hwmgr", "catalog", "stats", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)["data"]
    n = data["known_issues"]
    assert n >= 150 and len(data["known_issues_by_driver"]) >= 20
    for key in ("known_issues_by_driver", "known_issues_by_severity",
                "known_issues_by_ceiling"):
        assert sum(data[key].values()) == n, key
    assert data["firmware_requirements"] >= 10
    text = subprocess.run([sys.executable, "-m", "hwmgr", "catalog", "stats"],
                          capture_output=True, text=True, timeout=120)
    flat = " ".join(text.stdout.split())
    assert f"known issues: {n} (" in flat and "the most each can say:" in flat


def test_catalog_show_says_the_most_each_issue_can_say() -> None:
    """`catalog show ena`: the RPS crash of 2.13.0g-2.13.1g names its first affected release
    but needs RFS; a fix-only release note can only make a device outdated."""
    res = subprocess.run([sys.executable, "-m", "hwmgr", "catalog", "show", "ena"],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    blocks = re.split(r"\n  (?=\S)", res.stdout)  # one block per known issue
    rps = next(b for b in blocks if b.startswith("ena-2.13.2g-rps-missing-flow-steer-hook"))
    assert "the most it says of a device: known-bad where its condition is seen" in rps
    late = next(b for b in blocks if b.startswith("ena-2.15.0g-admin-timeout-irq-race"))
    assert f"the most it says of a device: outdated: {UNBOUNDED}" in late
