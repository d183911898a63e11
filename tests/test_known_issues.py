"""Known issues and firmware floors: validated as data, merged by id, and deciding verdicts
about the build a host runs (driver version, or kernel build for an in-tree driver)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hwmgr.catalog.issues import KERNEL_CVE, UNBOUNDED
from hwmgr.catalog.load import Catalog
from hwmgr.compliance.check import driver_findings
from tests.test_catalog import MINI, dev, load_catalog

SRC = [{"title": "a public source", "url": "https://example.org/notes", "kind": "release-notes",
        "observed": "states the affected release and the fixed one"}]
DEB_PROC = ("Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian "
            "12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC Debian {v}-1 (2024-02-01)")
LAYER: dict[str, Any] = {"schema_version": 3, "drivers": {
    "megaraid_sas": {
        "known_issues": [
            {"id": "mr-reset-hang", "severity": "crash", "symptom": "controller reset hangs",
             "affected": {"driver_versions": [{"introduced": "07.700.00.00",
                                               "fixed": "07.725.01.00"}]},
             "sources": SRC},
            {"id": "mr-slow", "severity": "performance", "symptom": "slow rebuilds",
             "affected": {"driver_versions": [{"fixed": "07.719.04.00"}]}, "sources": SRC}],
        "firmware_requirements": [
            {"id": "mr-fw", "min": "2.130.400", "sources": SRC,
             "driver_versions": [{"introduced": "07.700.00.00"}]},
            {"id": "mr-fw-feature", "min": "9.0", "feature": "a feature", "sources": SRC}]},
    "e1000e": {"known_issues": [
        {"id": "CVE-2099-0001", "severity": "security", "symptom": "a kernel defect",
         "affected": {"kernels": {"upstream": {"introduced": "5.4",
                                               "fixed": ["6.1.80", "6.6.20", "6.8"]}}},
         "sources": [{**SRC[0], "kind": "cve"}]}]},
    "be2net": {"known_issues": [
        {"id": "be-vendor-only", "severity": "link-down", "symptom": "link flaps",
         "build": "vendor", "affected": {"driver_versions": [{"fixed": "10.2.470.14"}]},
         "sources": SRC}]},
}}
DEB_TABLE = {"schema_version": 3, "kernel_builds": {"debian": {
    "abi": {"6.1.0-18": "6.1.76", "6.1.0-20": "6.1.85"}, "releases": {"6.1": "12"},
    "evidence": SRC}}}


def layered(tmp_path: Path, *layers: dict[str, Any]) -> Catalog:
    files = [MINI]
    for i, layer in enumerate(layers):
        f = tmp_path / f"{i}.json"
        f.write_text(json.dumps(layer))
        files.append(f)
    return load_catalog(files)


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return layered(tmp_path, DEB_TABLE, LAYER)


def raid(version: str, **kw: Any) -> dict[str, Any]:
    return dev("1000", "0079", "megaraid_sas", version, subsystem_vendor_id="1000",
               subsystem_device_id="9261", **{"class": "0104", **kw})


def test_driver_version_range_decides_and_names_the_way_out(cat: Catalog) -> None:
    v = cat.verdict(raid("07.719.03.00-rc1"), "6.1.0-18-amd64")
    assert v["status"] == "known-bad"  # the crash outranks the performance issue
    assert [k["id"] for k in v["known_issues"]] == ["mr-reset-hang", "mr-slow"]
    assert v["known_issues"][0] == {"id": "mr-reset-hang", "severity": "crash",
                                    "symptom": "controller reset hangs", "on": "driver",
                                    "fixed": "07.725.01.00", "url": SRC[0]["url"]}
    assert v["target"] == "07.725.01.00"  # past every fix
    assert "07.725.01.00" in v["fix"]
    # at the fix: not flagged by that issue (the range's end is exclusive)
    fixed = cat.verdict(raid("07.725.01.00"), "6.1.0-18-amd64")
    assert "known_issues" not in fixed and fixed["status"] != "known-bad"
    # before the introduced version only the open-ended one holds: performance is outdated
    old = cat.verdict(raid("06.506.00.00-rc1"), "6.1.0-18-amd64")
    assert old["status"] == "outdated"
    assert [k["id"] for k in old["known_issues"]] == ["mr-slow"]


def test_kernel_range_judges_the_in_tree_build_by_its_kernel(cat: Catalog) -> None:
    e1k = dev("8086", "10d3", "e1000e", "6.1.0-18-amd64")
    v = cat.verdict(e1k, "6.1.0-18-amd64")  # Debian ABI 18 is built on 6.1.76 (table)
    # flagged, with the way out; outdated, not known-bad: the kernel CNA leaves whether a CVE
    # applies to the user (issues.KERNEL_CVE), and the finding says so
    assert v["status"] == "outdated" and v["known_issues"][0]["fixed"] == "6.1.80"
    assert v["known_issues"][0]["caveat"] == KERNEL_CVE and KERNEL_CVE in v["reason"]
    assert v["target"] == "6.1.80" and v["fix"].startswith("apt-get install linux-image")
    assert "6.1.0-18-amd64 (Debian, upstream 6.1.76)" in v["reason"]
    # /proc/version says the package is 6.1.90: past the fix of its stream
    ok = cat.verdict(e1k, "6.1.0-18-amd64", DEB_PROC.format(v="6.1.90"))
    assert ok["status"] == "ok" and "none of the 1 known issues" in ok["reason"]
    # a Debian ABI the table lacks is not guessed: only the in-tree policy whose globs name
    # this very kernel speaks (lab-tested), and a kernel no policy names is uncatalogued
    pol = cat.verdict(dev("8086", "10d3", "e1000e", "6.1.0-99-amd64"), "6.1.0-99-amd64")
    assert pol["status"] == "ok" and "known_issues" not in pol
    un = cat.verdict(dev("8086", "10d3", "e1000e", "5.10.0-99-amd64"), "5.10.0-99-amd64")
    assert un["status"] == "uncatalogued" and "uncatalogued kernel build" in un["reason"]
    # 6.6 and 6.8+: the 6.6 fix and the mainline fix
    assert cat.verdict(dev("8086", "10d3", "e1000e", "6.6.19"), "6.6.19")["status"] == \
        "outdated"
    assert cat.verdict(dev("8086", "10d3", "e1000e", "6.9.2"), "6.9.2")["status"] == "ok"


def test_vendor_release_notes_do_not_judge_the_in_tree_build(cat: Catalog) -> None:
    """be2net 10.2.470.14 fixed a link flap in Emulex's own driver: its in-tree namesake on
    RHEL 6 (4.1.307r) is another code line, judged by the seed's own listing instead."""
    v = cat.verdict(dev("19a2", "0710", "be2net", "4.6.62.0u"), "2.6.32-279.el6.x86_64")
    assert v["known_issues"][0]["id"] == "be-vendor-only"
    intree = cat.verdict(dev("19a2", "0710", "be2net", "4.6.62.0-k"),
                         "2.6.32-279.el6.x86_64")
    assert "known_issues" not in intree


def test_an_issue_the_source_ties_to_some_kernels_is_claimed_only_on_them(
        tmp_path: Path) -> None:
    """Intel's ixgbe 6.2.5 notes fix a crash on CentOS 8 kernels: a vendor build on an
    Ubuntu kernel, or on one not recorded, is not told it has that crash."""
    layer = copy.deepcopy(LAYER)
    layer["drivers"]["megaraid_sas"]["known_issues"][0]["kernel_releases"] = ["4.18.0-*.el8*"]
    cat = layered(tmp_path, DEB_TABLE, layer)
    ids = {k: [i["id"] for i in (cat.verdict(raid("07.710.00.00"), k) or {}).get(
        "known_issues", [])] for k in ("4.18.0-477.10.1.el8_8.x86_64", "5.15.0-91-generic",
                                       None)}
    assert ids["4.18.0-477.10.1.el8_8.x86_64"][:1] == ["mr-reset-hang"]
    assert "mr-reset-hang" not in ids["5.15.0-91-generic"] and "mr-reset-hang" not in ids[None]
    assert ids[None] == ["mr-slow"]  # the unscoped issue still speaks


def test_an_issue_that_needs_a_condition_is_known_bad_only_where_the_host_meets_it(
        tmp_path: Path) -> None:
    """A crash that needs enabled VFs: known-bad on a function with VFs enabled, outdated
    (the fix still named) where none are or where hwmgr cannot see it; the reason says so."""
    layer = copy.deepcopy(LAYER)
    issue = layer["drivers"]["megaraid_sas"]["known_issues"][0]
    issue["only_when"] = "sriov"
    cat = layered(tmp_path, DEB_TABLE, layer)
    with_vfs = cat.verdict(raid("07.719.03.00-rc1", sriov={"totalvfs": 8, "numvfs": 4,
                                                           "vfs": []}), "6.1.0-18-amd64")
    assert with_vfs["status"] == "known-bad"
    assert "only when SR-IOV virtual functions are enabled (this host meets it)" in \
        with_vfs["reason"]
    no_vfs = cat.verdict(raid("07.719.03.00-rc1", sriov={"totalvfs": 8, "numvfs": 0,
                                                         "vfs": []}), "6.1.0-18-amd64")
    unseen = cat.verdict(raid("07.719.03.00-rc1"), "6.1.0-18-amd64")
    for v, state in ((no_vfs, "this host is not seen to"),
                     (unseen, "hwmgr cannot see whether this host does")):
        assert v["status"] == "outdated", v
        assert v["target"] == "07.725.01.00"  # the way out is still named
        ref = v["known_issues"][0]
        assert ref["id"] == "mr-reset-hang" and state in ref.get("only_when", "")
        assert state in v["reason"]
    # an unconditional known-bad issue outranks a conditional one
    slow = layer["drivers"]["megaraid_sas"]["known_issues"][1]
    slow["severity"] = "link-down"
    slow["affected"]["driver_versions"][0]["introduced"] = "07.700.00.00"
    cat2 = layered(tmp_path, DEB_TABLE, layer)
    both = cat2.verdict(raid("07.719.03.00-rc1"), "6.1.0-18-amd64")
    assert both["status"] == "known-bad" and both["known_issues"][0]["id"] == "mr-slow"


def test_known_bad_needs_a_source_that_names_the_first_affected_release(
        tmp_path: Path) -> None:
    """A crash fixed in 07.725.01.00: with its first affected release stated, the build in
    between is known-bad; where the source names only the fix, every earlier build is flagged
    outdated (the fix and the way out named), and the caveat says why not known-bad."""
    layer = copy.deepcopy(LAYER)
    cat = layered(tmp_path, DEB_TABLE, layer)
    assert cat.verdict(raid("07.719.03.00-rc1"), "6.1.0-18-amd64")["status"] == "known-bad"
    del layer["drivers"]["megaraid_sas"]["known_issues"][0]["affected"]["driver_versions"][0][
        "introduced"]
    open_ended = layered(tmp_path, DEB_TABLE, layer)
    for version in ("07.719.03.00-rc1", "06.506.00.00-rc1"):
        v = open_ended.verdict(raid(version), "6.1.0-18-amd64")
        assert v["status"] == "outdated", v
        ref = v["known_issues"][0]
        assert ref["id"] == "mr-reset-hang" and ref["caveat"] == UNBOUNDED
        assert v["target"] == "07.725.01.00" and UNBOUNDED in v["reason"]
    # a finding per issue carries the caveat too
    d = raid("07.719.03.00-rc1", address="0000:01:00.0")
    d["catalog"] = open_ended.verdict(d, "6.1.0-18-amd64")
    got = {f.item: f for f in driver_findings(open_ended, d, {"driver"})}
    assert UNBOUNDED in got["known_issue.mr-reset-hang"].reason
    # the performance issue has no caveat: its severity never made a device known-bad
    assert "caveat" not in v["known_issues"][1]


def test_the_condition_names_are_one_list() -> None:
    """The schema's enum of only_when and the model's words for them name the same set."""
    from hwmgr.catalog.model import CONDITIONS
    schema = json.loads((Path(__file__).parent.parent / "hwmgr" / "schemas" /
                         "catalog.schema.json").read_text())
    enum = schema["$defs"]["known_issue"]["properties"]["only_when"]["enum"]
    assert sorted(enum) == sorted(CONDITIONS)


def test_seed000_story_reads_as_before(cat: Catalog) -> None:
    v = cat.verdict(dev("19a2", "0710", "be2net", "4.1.307r"), "2.6.32-279.el6.x86_64")
    assert v["status"] == "known-bad" and v["recommended_version"] == "10.2.470.14"


def test_firmware_floors(cat: Catalog) -> None:
    v = cat.verdict(raid("07.725.01.00", firmware_version="2.130.353-1663"), "6.1.0-18-amd64")
    floors = {f["id"]: f for f in v["firmware_floors"]}
    assert floors["mr-fw"]["ok"] is False and floors["mr-fw-feature"]["ok"] is False
    dev_ = raid("07.725.01.00", firmware_version="2.130.353-1663", address="0000:01:00.0")
    dev_["catalog"] = v
    got = {f.item: f for f in driver_findings(cat, dev_, {"driver", "firmware"})}
    assert got["firmware_min.mr-fw"].status == "drift"
    assert got["firmware_min.mr-fw-feature"].status == "unsupported"  # only for its feature
    assert "a feature" in got["firmware_min.mr-fw-feature"].reason
    new = cat.verdict(raid("07.725.01.00", firmware_version="2.130.403-4660"), "6.1.0-18-amd64")
    assert {f["id"]: f["ok"] for f in new["firmware_floors"]}["mr-fw"] is True


def test_check_gives_a_compact_finding_per_known_issue(cat: Catalog) -> None:
    d = raid("07.719.03.00-rc1", address="0000:01:00.0")
    d["catalog"] = cat.verdict(d, "6.1.0-18-amd64")
    got = {f.item: f for f in driver_findings(cat, d, {"driver"})}
    hang = got["known_issue.mr-reset-hang"]
    assert (hang.status, hang.actual, hang.expected) == (
        "drift", "07.719.03.00-rc1", "megaraid_sas 07.725.01.00 or later")
    assert hang.to_json()["source"] == {"ref": "known_issue:mr-reset-hang",
                                        "url": SRC[0]["url"]}  # not the evidence text
    assert got["driver_version"].status == "drift"


def test_layers_merge_known_issues_by_id(tmp_path: Path) -> None:
    site = {"schema_version": 3, "drivers": {"megaraid_sas": {"known_issues": [
        {"id": "site-own", "severity": "cosmetic", "symptom": "ours",
         "affected": {"driver_versions": [{"fixed": "99.0"}]}, "sources": SRC},
        {**LAYER["drivers"]["megaraid_sas"]["known_issues"][1], "severity": "crash"}]}}}
    cat = layered(tmp_path, LAYER, site)
    issues = {i.id: i for i in cat.knowledge("megaraid_sas").issues}
    assert set(issues) == {"mr-reset-hang", "mr-slow", "site-own"}  # kept, replaced, added
    assert issues["mr-slow"].severity == "crash"
    where = cat.provenance.of(("drivers", "megaraid_sas", "known_issues", "mr-slow"))
    assert where is not None and where.name == "1.json"


@pytest.mark.parametrize(("change", "words"), [
    (lambda i: i.update(sources=[{"title": "t", "observed": "o", "kind": "lab"}]),
     "no published source"),
    (lambda i: i.pop("sources"), "sources"),
    (lambda i: i["affected"]["driver_versions"][0].update(fixed="not-a-version"),
     "does not parse"),
    (lambda i: i["affected"]["driver_versions"][0].update(introduced="08.0"),
     "empty range"),
    (lambda i: i["affected"].update(kernels={"upstream": {"fixed": ["6.1.0-18-amd64"]}}),
     "not a kernel version of the upstream line"),
    (lambda i: i["affected"].update(kernels={"el8": {"fixed": ["5.14.0-70.el9"]}}),
     "not a kernel version of the el8 line"),
    (lambda i: i.update(applies_to=["8086:1528"]), "not one of the devices"),
    (lambda i: i.update(severity="annoying"), "severity"),
    (lambda i: i.update(only_when="a full moon"), "only_when"),
    (lambda i: i.update(kernel_releases=["4.18.0-*.el[8"]), "unclosed '['"),
    (lambda i: i["affected"].update(kernels={"ubuntu-6.8": {"fixed": ["6.8.12"]}}),
     "not a kernel version of the ubuntu-6.8 line"),
])
def test_validate_refuses_bad_known_issues(tmp_path: Path, change: Any, words: str) -> None:
    layer = copy.deepcopy(LAYER)
    change(layer["drivers"]["megaraid_sas"]["known_issues"][0])
    f = tmp_path / "layer.json"
    f.write_text(json.dumps(layer))
    errors, _docs = Catalog.check_files([MINI, f])
    assert errors and any(words in e for e in errors), errors


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    layer = copy.deepcopy(LAYER)
    issues = layer["drivers"]["megaraid_sas"]["known_issues"]
    issues.append(copy.deepcopy(issues[0]))
    whole = json.loads(MINI.read_text())
    whole["schema_version"] = 3
    whole["drivers"]["megaraid_sas"]["known_issues"] = issues
    for drv in whole["drivers"].values():  # a v3 file cites its evidence as sources
        for ve in drv["versions"].values():
            ve["evidence"] = SRC
        for ib in ([drv["inbox"]] if isinstance(drv.get("inbox"), dict) else []):
            ib["evidence"] = SRC
    f = tmp_path / "whole.json"
    f.write_text(json.dumps(whole))
    errors, _docs = Catalog.check_files([f])
    assert any("'mr-reset-hang' is listed twice" in e for e in errors), errors


def test_prometheus_names_each_known_issue_with_its_source(cat: Catalog) -> None:
    from prometheus_client import generate_latest

    from hwmgr.compliance.prom import registry_for

    d = raid("07.719.03.00-rc1", address="0000:01:00.0")
    d["catalog"] = cat.verdict(d, "6.1.0-18-amd64")
    data = {"findings": [f.to_json() for f in driver_findings(cat, d, {"driver"})],
            "compliant": False}
    text = generate_latest(registry_for(data, now=0.0)).decode()
    assert ('hwmgr_known_issue{device="0000:01:00.0",id="mr-reset-hang",severity="crash",'
            f'url="{SRC[0]["url"]}"}} 1.0') in text
    assert 'id="mr-slow",severity="performance"' in text


def test_the_shipped_catalog_knows_defects_and_firmware_floors() -> None:
    """At least 150 known issues over 20 drivers, NIC and storage, each with a published
    source; at least 10 firmware floors; every kernel range on a line hwmgr places."""
    repo = Path(__file__).resolve().parent.parent
    shipped = load_catalog([repo / "catalogs"])
    issues = [i for n in shipped.names() for i in shipped.knowledge(n).issues]
    drivers = {i.driver for i in issues}
    assert len(issues) >= 150 and len(drivers) >= 20, (len(issues), drivers)
    assert drivers & {"megaraid_sas", "mpt3sas", "smartpqi", "nvme"}  # storage
    assert drivers & {"ice", "mlx5_core", "bnxt_en", "ena"}  # NIC
    assert all(any(s.url for s in i.sources) for i in issues)
    kinds = {s.kind for i in issues for s in i.sources}
    assert {"cve", "release-notes", "bug-fix-table", "changelog"} <= kinds
    floors = [f for n in shipped.names() for f in shipped.knowledge(n).firmware]
    assert len(floors) >= 10 and all(f.url for f in floors)


def test_el_line_read_from_a_changelog_judges_only_what_it_covers(tmp_path: Path) -> None:
    """An el9 line whose source was read up to some build of each stream: a build past that,
    in a stream with no fix of its own listed, or in a newer stream, is not judged."""
    issue = {"id": "CVE-2099-0002", "severity": "crash", "symptom": "a RHEL defect",
             "affected": {"kernels": {"el9": {
                 "fixed": ["5.14.0-427.20.1.el9_4", "5.14.0-461.el9"],
                 "read_to": {"427": "5.14.0-427.30.1.el9_4", "362": "5.14.0-362.8.1.el9_3",
                             "503": "5.14.0-503.40.1.el9_5"}}}},
             "sources": [{**SRC[0], "kind": "changelog"}]}
    cat = layered(tmp_path, {"schema_version": 3, "drivers": {"e1000e": {
        "known_issues": [issue]}}})

    def status(kernel: str) -> tuple[str, Any]:
        v = cat.verdict(dev("8086", "10d3", "e1000e", kernel), kernel)
        return v["status"], [k["fixed"] for k in v.get("known_issues", [])]

    assert status("5.14.0-427.13.1.el9_4.x86_64") == ("outdated", ["5.14.0-427.20.1.el9_4"])
    assert status("5.14.0-427.20.1.el9_4.x86_64")[1] == []  # its z-stream fix
    assert status("5.14.0-362.8.1.el9_3.x86_64") == ("outdated", ["5.14.0-461.el9"])
    assert status("5.14.0-362.24.2.el9_3.x86_64")[1] == []  # past what was read: not judged
    assert status("5.14.0-503.40.1.el9_5.x86_64")[1] == []  # main line 461 covers 503
    assert status("5.14.0-611.5.1.el9_7.x86_64")[1] == []


def test_catalog_rollback_restores_a_catalog_of_megabytes_whole(tmp_path: Path) -> None:
    """The shipped catalog as one file is over 1 MiB (the known issues): update kept, and
    rollback restored, only its first MiB (Host reads attributes bounded at 1 MiB)."""
    from hwmgr.catalog import update
    from hwmgr.config import CatalogLocations
    from hwmgr.host.runner import SubprocessRunner
    from hwmgr.host.seam import Host

    inst = tmp_path / "installed"
    inst.mkdir()
    big = json.dumps(json.loads(MINI.read_text()) | {"description": "x" * (3 << 20)}).encode()
    small = MINI.read_bytes()
    (inst / "previous.json").write_bytes(big)
    (inst / "catalog.json").write_bytes(small)
    loc = CatalogLocations(tmp_path / "site", inst / "catalog.json", tmp_path / "keys")
    host = Host("/", SubprocessRunner(), writable=[str(inst)])
    got = update.rollback(host, loc)
    assert (inst / "catalog.json").read_bytes() == big and got["catalog_version"]
    assert (inst / "previous.json").read_bytes() == small
