"""catalog-src/rhel_kernel_changelog.py: RHEL kernel %changelog excerpts (unmodified, from the
AlmaLinux source-RPM import; tests/fixtures/catalog-src/rhel-changelog/, see its README) to
(build, CVE) pairs and el9/el10 `fixed` lists; no network, no git."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest
from support.catalog_src import load

# the miners run by hand on fetched sources, not on a host: make test runs these, make
# check (the editing lane) leaves them out
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
FIX = Path(__file__).resolve().parent / "fixtures" / "catalog-src" / "rhel-changelog"
EL9_5 = "el9_5-5.14.0-503.11.1..503.6.1.changelog"
EL9_6 = "el9_6-5.14.0-516.el9.changelog"
EL10 = "el10_0-6.12.0-55.24.1.changelog"
C95 = "6ce8c56cba556b935cb71e7cc414341eb66782c4"
C96 = "a29d65115b426bdfbc24f0c2d9cfeca059df0db6"
C10 = "da382d9450a9c9a55a2d9642ec93418ec229fe8f"




rc = load("rhel_kernel_changelog")


def _entries(name: str) -> List[Any]:
    return rc.parse_changelog((FIX / name).read_text(encoding="utf-8"))


def _pairs(name: str) -> List[tuple]:
    return sorted((e.build, c) for e in _entries(name) if e.red_hat for c in e.cves)


def test_pairs_of_a_z_stream_excerpt() -> None:
    pairs = _pairs(EL9_5)
    assert ("5.14.0-503.11.1.el9_5", "CVE-2024-44984") in pairs
    assert ("5.14.0-503.9.1.el9_5", "CVE-2024-42268") in pairs
    assert ("5.14.0-503.9.1.el9_5", "CVE-2024-43866") in pairs
    assert ("5.14.0-503.8.1.el9_5", "CVE-2024-38586") in pairs
    assert ("5.14.0-503.6.1.el9_5", "CVE-2024-40919") in pairs
    assert len(pairs) == 18
    assert {b for b, _ in pairs} == {f"5.14.0-503.{n}.1.el9_5" for n in (6, 7, 8, 9, 10, 11)}
    by_cve = {c: e for e in _entries(EL9_5) for c in e.cves}
    assert by_cve["CVE-2024-42268"].prefix == "net/mlx5"
    assert by_cve["CVE-2024-38586"].prefix == "r8169"


def test_pairs_of_a_main_line_excerpt() -> None:
    pairs = _pairs(EL9_6)
    assert {b for b, _ in pairs} == {"5.14.0-516.el9"}
    assert {c for _, c in pairs} >= {"CVE-2024-42268", "CVE-2024-43866", "CVE-2024-38586",
                                     "CVE-2024-44984"}


def test_rebuilder_headers_do_not_count() -> None:
    entries = _entries(EL10)
    # AlmaLinux's own headers (`- 6.12.0-55.24.1`) are not build headers at all
    assert {e.build for e in entries} == {"6.12.0-55.24.1.el10_0"}
    assert not any(e.red_hat for e in entries)
    assert {c for e in entries for c in e.cves} == {
        "CVE-2025-37797", "CVE-2025-22121", "CVE-2025-38110", "CVE-2025-38088",
        "CVE-2025-22091"}


def _proposal() -> Dict[str, Any]:
    col = rc.Collected()
    col.add(_entries(EL9_5), C95, rc.SPEC)
    col.add(_entries(EL9_6), C96, rc.SPEC)
    col.add(_entries(EL10), C10, rc.SPEC)
    col.tips = {"9.5": "5.14.0-503.40.1.el9_5", "9.6": "5.14.0-570.32.1.el9_6",
                "10.0": "6.12.0-55.24.1.el10_0"}
    cves = {"CVE-2024-42268": ["mlx5_core"], "CVE-2024-40919": ["bnxt_en"],
            "CVE-2024-38586": ["r8169"], "CVE-2025-22091": ["mlx5_core"],
            "CVE-2099-0001": ["ice"]}
    result, counts = rc.propose(col, cves)
    assert counts["el9 main-line fixes"] == 2 and counts["el9 z-stream fixes"] == 3
    return result


def test_fixed_lists() -> None:
    result = _proposal()
    el9 = result["lines"]["el9"]
    assert set(el9) == {"CVE-2024-42268", "CVE-2024-40919", "CVE-2024-38586"}
    assert el9["CVE-2024-42268"]["fixed"] == ["5.14.0-503.9.1.el9_5", "5.14.0-516.el9"]
    assert el9["CVE-2024-38586"]["fixed"] == ["5.14.0-503.8.1.el9_5", "5.14.0-516.el9"]
    assert el9["CVE-2024-40919"]["fixed"] == ["5.14.0-503.6.1.el9_5"]
    assert el9["CVE-2024-42268"]["urls"] == [
        f"https://github.com/mkuron/almalinux-kernel/blob/{C95}/almalinux/kernel.spec",
        f"https://github.com/mkuron/almalinux-kernel/blob/{C96}/almalinux/kernel.spec"]
    assert el9["CVE-2024-42268"]["evidence"][0] == (
        "the kernel-5.14.0-503.9.1.el9_5 changelog names CVE-2024-42268 (net/mlx5)")
    for data in el9.values():
        assert all(rc.FIXED_RE["el9"].match(v) for v in data["fixed"])
    # the oracle.com header of AlmaLinux's own 10.0 rebuild is set aside, not a RHEL fix
    assert result["lines"]["el10"] == {}
    assert result["not_red_hat"] == {"CVE-2025-22091": ["6.12.0-55.24.1.el10_0"]}
    assert result["streams"]["el9"] == {"503": "5.14.0-503.11.1.el9_5"}


def test_build_forms() -> None:
    minors = {162: 1}
    assert rc.Build.parse("5.14.0-162.4.1.el9").version(minors) == "5.14.0-162.4.1.el9_1"
    assert rc.Build.parse("5.14.0-427.el9").mainline
    assert rc.Build.parse("5.14-1.2.1.el9") is None
    assert rc.Build.parse("5.14.0-1.6.1.el9").key() == (1, 6, 1)


# RHEL 8 and 7 as CentOS imported Red Hat's src.rpm (github.com/MafSam/centos, c8 and c7)
EL8_2 = "el8_2-4.18.0-193.28.1..193.21.1.changelog"
EL8_MAIN = "el8-4.18.0-173.el8.changelog"
EL7 = "el7-3.10.0-514.26.1..514.24.1.changelog"
C8 = "8195f79cf59fa7e6514be865650bffbd52650d29"
C7 = "d6bfd60741b14479a15b43acaa1ea5a8d73df543"
CENTOS = "https://github.com/MafSam/centos"


def test_pairs_of_el8_and_el7_excerpts() -> None:
    pairs = _pairs(EL8_2)
    assert ("4.18.0-193.28.1.el8_2", "CVE-2020-12351") in pairs
    assert ("4.18.0-193.27.1.el8_2", "CVE-2020-14331") in pairs
    assert ("4.18.0-193.23.1.el8_2", "CVE-2020-14386") in pairs
    assert {c for _, c in pairs} == {"CVE-2020-12351", "CVE-2020-12352", "CVE-2020-14331",
                                     "CVE-2020-14385", "CVE-2020-14386"}
    by_cve = {c: e for e in _entries(EL8_2) for c in e.cves}
    # the `[net]` tree area is not the component
    assert by_cve["CVE-2020-12351"].prefix == "Bluetooth: L2CAP"
    assert set(_pairs(EL8_MAIN)) == {("4.18.0-173.el8", "CVE-2018-12207")}  # ten entries
    # the 7.3 z-stream headers are signed @hrbata.com by RHEL 7's maintainer: Red Hat's own
    el7 = _pairs(EL7)
    assert ("3.10.0-514.26.1.el7", "CVE-2017-1000364") in el7
    assert ("3.10.0-514.25.1.el7", "CVE-2017-7895") in el7
    assert {b for b, _ in el7} == {"3.10.0-514.26.1.el7", "3.10.0-514.25.1.el7"}


def test_el8_fixed_lists_with_minor_from_header() -> None:
    col = rc.Collected()
    col.add(_entries(EL8_2), C8, "SPECS/kernel.spec")
    col.add(_entries(EL8_MAIN), C8, "SPECS/kernel.spec")
    col.add(_entries(EL7), C7, "SPECS/kernel.spec")
    # a CentOS branch holds every minor release: its tip says nothing of stream 193
    col.tips = {"c8": "4.18.0-477.13.1.el8_8", "c7": "3.10.0-1160.119.1.el7"}
    cves = {"CVE-2020-14386": ["tg3"], "CVE-2018-12207": ["ice"],
            "CVE-2017-7477": ["ixgbe"], "CVE-2099-0001": ["ice"]}
    without, _ = rc.propose(col, cves, CENTOS)
    assert set(without["lines"]["el8"]) == {"CVE-2018-12207"}  # z-streams of no known minor
    result, counts = rc.propose(col, cves, CENTOS, minor_from_header=True)
    el8 = result["lines"]["el8"]
    assert el8["CVE-2020-14386"]["fixed"] == ["4.18.0-193.23.1.el8_2"]
    assert el8["CVE-2018-12207"]["fixed"] == ["4.18.0-173.el8"]
    assert el8["CVE-2020-14386"]["urls"] == [f"{CENTOS}/blob/{C8}/SPECS/kernel.spec"]
    assert el8["CVE-2020-14386"]["evidence"] == [
        "the kernel-4.18.0-193.23.1.el8_2 changelog names CVE-2020-14386 (packet)"]
    # RHEL 7 builds carry no `_N` (hosts print `3.10.0-514.25.1.el7` too): the stream is 514
    assert result["lines"]["el7"] == {"CVE-2017-7477": {
        "fixed": ["3.10.0-514.25.1.el7"],
        "urls": [f"{CENTOS}/blob/{C7}/SPECS/kernel.spec"],
        "evidence": ["the kernel-3.10.0-514.25.1.el7 changelog names CVE-2017-7477 (macsec)"]}}
    assert result["streams"]["el8"] == {"193": "4.18.0-193.28.1.el8_2"}
    assert result["streams"]["el7"] == {"514": "3.10.0-514.26.1.el7"}
    assert counts["el8 z-stream fixes"] == 1 and counts["el8 main-line fixes"] == 1
    assert counts["el7 z-stream fixes"] == 1
    for data in el8.values():
        assert all(rc.FIXED_RE["el8"].match(v) for v in data["fixed"])
