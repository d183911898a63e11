"""catalog-src/ubuntu_kernels.py: Ubuntu noble changelog excerpts (unmodified lines from the
archive's linux-headers packages; tests/fixtures/catalog-src/ubuntu-changelog/, see its
README) to each upload's ancestry and CVEs, and the `ubuntu-6.8` line it proposes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.catalog_src import load

pytestmark = pytest.mark.slow  # a by-hand miner: make test runs it, make check leaves it

FIX = Path(__file__).resolve().parent / "fixtures" / "catalog-src" / "ubuntu-changelog"
A134 = FIX / "linux-headers-6.8.0-134.changelog"
A136 = FIX / "linux-headers-6.8.0-136.changelog"
E78 = FIX / "linux-headers-6.8.0-78-excerpt.changelog"
POOL = "http://archive.ubuntu.com/ubuntu/pool/main/l/linux/"

uk = load("ubuntu_kernels")
merge = load("merge")


def _read() -> object:
    read = uk.Read()
    for path in (A134, A136):
        n = path.name.split("-")[-1].split(".")[0]
        read.add(path.read_text(encoding="utf-8"),
                 f"{POOL}linux-headers-6.8.0-{n}_6.8.0-{n}.{n}_all.deb")
    return read


def test_a_tagged_bullet_fixes_its_cve_a_title_that_names_one_does_not() -> None:
    (upload, body), = uk.entries(E78.read_text(encoding="utf-8"))
    assert upload == "6.8.0-78.78"
    assert uk.fixed_cves(body) == {"CVE-2025-21861"}  # the `// CVE-` tag
    prose = body[body.index("  * Incorrect backport for CVE-2025-21861 causes kernel hangs "
                            "(LP: #2120330)"):]
    assert uk.fixed_cves(prose) == set()  # the same CVE only in a bullet's title


def test_ancestry_follows_the_changelog_not_the_abi_order() -> None:
    read = _read()
    assert read.ancestry("6.8.0-136.136") == ["6.8.0-136.136", "6.8.0-130.130", "6.8.0-116.116"]
    assert read.ancestry("6.8.0-134.134")[:2] == ["6.8.0-134.134", "6.8.0-131.131"]
    assert read.fixes["6.8.0-131.131"] == {"CVE-2026-46244", "CVE-2026-43185"}
    assert {"CVE-2026-46117", "CVE-2026-46137"} <= read.fixes["6.8.0-136.136"]


def test_sources_that_disagree_about_a_parent_are_refused() -> None:
    read = _read()
    text = A136.read_text(encoding="utf-8").replace("linux (6.8.0-130.130)",
                                                    "linux (6.8.0-131.131)")
    with pytest.raises(uk.SourceError, match="6.8.0-136.136 is built on 6.8.0-131.131"):
        read.add(text, "other")


def test_a_fix_counts_from_the_abi_every_later_upload_contains_it() -> None:
    line = uk.contained(_read(), ())
    assert sorted(line, key=lambda a: int(a.rsplit("-", 1)[1])) == [
        "6.8.0-116", "6.8.0-130", "6.8.0-131", "6.8.0-134", "6.8.0-136"]
    assert uk.threshold("CVE-2026-23272", line) == "6.8.0-130"
    assert uk.threshold("CVE-2026-46244", line) == "6.8.0-131"  # 136 lists it again
    # only on the 131/134 respin branch: 136, built on 130, does not have it
    assert uk.threshold("CVE-2026-43185", line) is None
    assert uk.threshold("CVE-2026-46117", line) == "6.8.0-136"
    # the ABIs the table places on upstream, and those before them, are not on the line
    assert sorted(uk.contained(_read(), ["6.8.0-130"])) == ["6.8.0-131", "6.8.0-134",
                                                            "6.8.0-136"]


@pytest.mark.parametrize(("rng", "carries"), [
    ({"introduced": "6.4", "fixed": ["6.6.48", "6.10.7", "6.11"]}, True),
    ({"fixed": ["6.9"]}, True),  # no first release: always
    ({"introduced": "5.4", "fixed": ["6.8.5", "6.9"]}, False),  # 6.8's own stable fix
    ({"introduced": "6.9", "fixed": ["6.10"]}, False),  # came after 6.8
    ({"introduced": "2.6.29", "fixed": ["6.6.66", "6.12.5", "6.13"]}, True),
])
def test_only_bugs_upstream_6_8_12_carries_get_the_line(rng: dict, carries: bool) -> None:
    assert uk.upstream_carries(rng) is carries


def test_main_proposes_the_line_and_merge_adds_it(tmp_path: Path) -> None:
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    issue = {"id": "CVE-2026-23272", "severity": "security", "symptom": "s",
             "affected": {"kernels": {"upstream": {"introduced": "5.4", "fixed": ["6.19"]}}},
             "sources": [{"title": "t", "url": "https://www.cve.org/", "kind": "cve"}]}
    late = dict(issue, id="CVE-2026-46117",
                affected={"kernels": {"upstream": {"introduced": "6.9", "fixed": ["6.19"]}}})
    (drivers / "x.json").write_text(json.dumps(
        {"schema_version": 3, "drivers": {"x": {"known_issues": [issue, late]}}}))
    builds = tmp_path / "kernel-builds.json"
    builds.write_text(json.dumps({"kernel_builds": {"ubuntu": {"abi": {"6.8.0-116": "6.8.12"}}}}))
    out = tmp_path / "proposal.json"
    args = ["--changelog", str(A134), "u134", "--changelog", str(A136), "u136",
            "--drivers", str(drivers), "--builds", str(builds), "-o", str(out)]
    assert uk.main(args) == 0
    proposal = json.loads(out.read_text())
    # 46117 is fixed on the line but upstream 6.8.12 never had it: not proposed
    assert list(proposal["lines"]["ubuntu-6.8"]) == ["CVE-2026-23272"]
    kb = json.loads(builds.read_text())["kernel_builds"]
    assert kb["ubuntu_lines"]["ubuntu-6.8"]["abis"] == [
        "6.8.0-130", "6.8.0-131", "6.8.0-134", "6.8.0-136"]
    assert kb["ubuntu"] == {"abi": {"6.8.0-116": "6.8.12"}}  # the rest kept
    merge.merge_kernel_lines(out, drivers)
    got = json.loads((drivers / "x.json").read_text())["drivers"]["x"]["known_issues"]
    assert got[0]["affected"]["kernels"]["ubuntu-6.8"] == {"fixed": ["6.8.0-130"]}
    assert got[0]["sources"][-1]["url"] == "u134" and "ubuntu-6.8" not in got[1]["affected"][
        "kernels"]


def test_the_shipped_line_is_what_the_catalog_uses() -> None:
    """The line's uploads in catalogs/kernel-builds.json are past the Ubuntu ABI table."""
    repo = Path(__file__).resolve().parent.parent
    kb = json.loads((repo / "catalogs" / "kernel-builds.json").read_text())["kernel_builds"]
    table = [int(a.rsplit("-", 1)[1]) for a in kb["ubuntu"]["abi"] if a.startswith("6.8.0-")]
    abis = [int(a.rsplit("-", 1)[1]) for a in kb["ubuntu_lines"]["ubuntu-6.8"]["abis"]]
    assert abis and min(abis) > max(table)


PVE = FIX / "pve-kernel-6.8.changelog"
pk = load("proxmox_kernels")


def test_proxmox_releases_sit_on_the_upload_their_changelog_names() -> None:
    placed, left = pk.placements(PVE.read_text(encoding="utf-8"), set(_read().fixes))
    assert placed == {"6.8.12-29": "6.8.0-130", "6.8.12-30": "6.8.0-130",
                      "6.8.12-34": "6.8.0-136"}
    assert [why.split(":")[0] for why in left] == ["6.8.12-31", "6.8.12-35"]
    assert "130.130i1, an upload the Ubuntu changelogs do not show" in left[0]
    assert "fixes of its own since Ubuntu-6.8.0-136.136" in left[1]  # its own CVE fix


def test_proxmox_main_writes_only_releases_on_the_line(tmp_path: Path) -> None:
    builds = tmp_path / "kernel-builds.json"
    builds.write_text(json.dumps({"kernel_builds": {"ubuntu_lines": {"ubuntu-6.8": {
        "abis": ["6.8.0-130"], "evidence": []}}}}))
    args = ["--changelog", str(A134), "u134", "--changelog", str(A136), "u136",
            "--pve", str(PVE), "pve-url", "--builds", str(builds)]
    assert pk.main(args) == 0
    line = json.loads(builds.read_text())["kernel_builds"]["ubuntu_lines"]["ubuntu-6.8"]
    assert line["proxmox"] == {"6.8.12-29": "6.8.0-130", "6.8.12-30": "6.8.0-130"}
    assert line["evidence"][-1]["url"] == "pve-url"


HWE = FIX / "linux-hwe-6.8-headers-6.8.0-47.changelog"
N45 = FIX / "noble-6.8.0-45.45-entry.changelog"


def test_an_hwe_upload_contains_the_noble_upload_it_builds() -> None:
    """22.04's HWE 6.8.0-47 is a respin noble's changelog never shows: it holds its own
    fix and what the HWE upload before it held, which built noble's 6.8.0-45.45."""
    read = uk.Read()
    read.add(N45.read_text(encoding="utf-8"), "noble")
    read.add(HWE.read_text(encoding="utf-8"), "hwe")
    assert read.twin == {"6.8.0-47.47~22.04.1": "6.8.0-47.47",
                         "6.8.0-45.45~22.04.1": "6.8.0-45.45"}
    assert uk.abi_of("6.8.0-47.47~22.04.1") == "6.8.0-47"
    hwe47 = read.contents("6.8.0-47.47~22.04.1")
    assert hwe47 is not None and "CVE-2024-45016" in hwe47
    assert {"CVE-2024-41009", "CVE-2024-42160"} <= hwe47 and read.contents("6.8.0-45.45") <= hwe47
    line = uk.contained(read, ())
    assert uk.threshold("CVE-2024-45016", line) == "6.8.0-47"
    assert uk.threshold("CVE-2024-42160", line) == "6.8.0-45"
    # without the noble upload it builds, the HWE chain is not all read: left out
    alone = uk.Read()
    alone.add(HWE.read_text(encoding="utf-8"), "hwe")
    assert alone.contents("6.8.0-47.47~22.04.1") is None and uk.contained(alone, ()) == {}


AWS = FIX / "linux-aws-jammy-excerpt.changelog"
uf = load("ubuntu_flavours")


def test_a_cloud_kernel_maps_to_the_master_upload_it_rebases_on() -> None:
    """linux-aws 5.15.0-1038.42 names `[ Ubuntu: 5.15.0-74.81 ]`; its respin 1038.43 names
    none and keeps it; 1035.39 fixes a CVE of its own before its master section: unmapped."""
    found, left = uf.mapping([(AWS.read_text(encoding="utf-8"), "aws")])
    assert found == {"5.15.0-1038-aws": "5.15.0-74"}
    assert left == ["5.15.0-1035-aws"]


def test_cloud_sources_that_disagree_are_refused() -> None:
    text = AWS.read_text(encoding="utf-8")
    other = text.replace("[ Ubuntu: 5.15.0-74.81 ]", "[ Ubuntu: 5.15.0-73.80 ]")
    with pytest.raises(uk.SourceError, match="5.15.0-1038.42-aws is built on 5.15.0-73"):
        uf.mapping([(text, "a"), (other, "b")])


def test_flavours_main_keeps_only_masters_the_catalog_places(tmp_path: Path) -> None:
    builds = tmp_path / "kernel-builds.json"
    builds.write_text(json.dumps({"kernel_builds": {"ubuntu": {"abi": {"5.15.0-74": "5.15.99"}}}}))
    assert uf.main(["--changelog", str(AWS), "aws", "--builds", str(builds)]) == 0
    kb = json.loads(builds.read_text())["kernel_builds"]
    assert kb["ubuntu_flavours"]["map"] == {"5.15.0-1038-aws": "5.15.0-74"}
    builds.write_text(json.dumps({"kernel_builds": {"ubuntu": {"abi": {}}}}))
    assert uf.main(["--changelog", str(AWS), "aws", "--builds", str(builds)]) == 0
    assert json.loads(builds.read_text())["kernel_builds"]["ubuntu_flavours"]["map"] == {}
