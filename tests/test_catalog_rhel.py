"""The shipped catalog on RHEL 8.4-8.10 and 9.x hosts: what those kernels' in-tree drivers
report (the kernel release, or a string of their own) gets a verdict, not "uncatalogued"."""

from __future__ import annotations

from typing import Any

import pytest
from support.shipped import SHIPPED

from hwmgr.catalog.load import Catalog, load_catalog
from hwmgr.config import config_from

EL8_4 = "4.18.0-305.25.1.el8_4.x86_64"
EL8_10 = "4.18.0-553.66.1.el8_10.x86_64"
EL9_0 = "5.14.0-70.30.1.el9_0.x86_64"
EL9_4 = "5.14.0-427.42.1.el9_4.x86_64"
EL9_6 = "5.14.0-570.32.1.el9_6.x86_64"


@pytest.fixture(scope="module")
def shipped() -> Catalog:
    return load_catalog([SHIPPED], config=config_from(None))


def dev(vendor: str, device: str, driver: str, version: str) -> dict[str, Any]:
    return {"vendor_id": vendor, "device_id": device, "subsystem_vendor_id": None,
            "subsystem_device_id": None, "class": "0200", "driver": driver,
            "pci_driver": driver, "driver_version": version, "firmware_version": None}


# drivers whose RHEL 9 (and RHEL 8.4+) build leaves the ethtool version to the kernel release
KERNEL_RELEASE = [
    ("8086", "10fb", "ixgbe", EL9_0), ("8086", "1521", "igb", EL9_4),
    ("8086", "1572", "i40e", EL9_6), ("8086", "159b", "ice", EL9_4),
    ("8086", "154c", "iavf", EL9_4), ("8086", "15b8", "e1000e", EL9_0),
    ("8086", "10ed", "ixgbevf", EL9_6), ("14e4", "16d7", "bnxt_en", EL9_4),
    ("14e4", "168e", "bnx2x", EL9_0), ("14e4", "1657", "tg3", EL9_6),
    ("14e4", "1639", "bnx2", EL9_4), ("15b3", "1015", "mlx5_core", EL9_4),
    ("19a2", "0710", "be2net", EL9_0), ("10ec", "8168", "r8169", EL9_6),
    ("1d0f", "ec20", "ena", EL9_4),
    ("8086", "10fb", "ixgbe", EL8_4), ("14e4", "1657", "tg3", EL8_10),
    ("1d0f", "ec20", "ena", EL8_4),
]


@pytest.mark.parametrize(("vendor", "device", "driver", "kernel"), KERNEL_RELEASE)
def test_in_tree_build_reporting_the_kernel_release(shipped: Catalog, vendor: str, device: str,
                                                    driver: str, kernel: str) -> None:
    v = shipped.verdict(dev(vendor, device, driver, kernel), kernel)
    assert v is not None
    assert (v["status"], v.get("listed_status"), v.get("in_tree")) == ("ok", "baseline", True), v
    assert ("RHEL 9" if ".el9" in kernel else "RHEL 8") in v["reason"]


# strings read in the AlmaLinux 8.x/9.x kernel sources (ethtool -i form where hwmgr reads it)
OWN_STRING = [
    ("1000", "005d", "megaraid_sas", "07.727.03.00-rc1", EL9_4),
    ("1000", "005d", "megaraid_sas", "07.725.01.00-rc1", "5.14.0-362.24.2.el9_3.x86_64"),
    ("1000", "0097", "mpt3sas", "48.100.00.00", EL9_6),
    ("9005", "028f", "smartpqi", "2.1.24-046", EL8_10),
    ("9005", "028f", "smartpqi", "2.1.12-055", EL9_0),
    ("103c", "323a", "hpsa", "3.4.20-200", EL9_4),
    ("103c", "323a", "hpsa", "3.4.20-200-RH1", EL8_4),
    ("9005", "028c", "aacraid", "1.2.1[50983]-custom", EL9_6),
    ("15ad", "07b0", "vmxnet3", "1.9.0.0-k-NAPI", "5.14.0-503.40.1.el9_5.x86_64"),
    ("15ad", "07b0", "vmxnet3", "1.7.0.0-k", EL9_4),
    ("14e4", "168e", "bnx2x", "1.713.36-0 storm 7.13.21.0", EL8_10),
    ("15b3", "1003", "mlx4_en", "4.0-0", EL9_6),
    ("19a2", "0710", "be2net", "12.0.0.0", EL8_10),
]


@pytest.mark.parametrize(("vendor", "device", "driver", "version", "kernel"), OWN_STRING)
def test_in_tree_string_of_a_rhel_minor_release(shipped: Catalog, vendor: str, device: str,
                                                driver: str, version: str, kernel: str) -> None:
    v = shipped.verdict(dev(vendor, device, driver, version), kernel)
    assert v is not None
    assert (v["status"], v.get("listed_status")) == ("ok", "baseline"), v


def test_a_rhel_build_before_the_fix_its_changelog_names_is_flagged(shipped: Catalog) -> None:
    """RHEL 9.1's in-tree mpt3sas (40.100.00.00) predates 5.14.0-490.el9, whose changelog
    names the fix of CVE-2024-40901, a bug upstream has had since before 5.14: flagged with
    the kernel to install (outdated: a kernel CVE's applicability is left to the user)."""
    kernel = "5.14.0-162.23.1.el9_1.x86_64"
    v = shipped.verdict(dev("1000", "0097", "mpt3sas", "40.100.00.00"), kernel)
    assert v is not None and v["status"] == "outdated"
    ref = next(k for k in v["known_issues"] if k["id"] == "CVE-2024-40901")
    assert ref["on"] == "kernel" and ref["fixed"] == "5.14.0-490.el9"
    assert v["target"] == "5.14.0-490.el9" and v["fix"].startswith("dnf upgrade kernel")


def test_rhel9_verdicts_cite_pinned_sources(shipped: Catalog) -> None:
    """Every RHEL 9 fact names the source it was read in, pinned to a commit."""
    seen = 0
    for name, entry in shipped.doc["drivers"].items():
        facts = list(entry.get("versions", {}).values()) + list(entry.get("inbox") or [])
        for fact in facts:
            if not any(d.startswith("rhel-9") for d in fact.get("distributions", [])):
                continue
            seen += 1
            urls = [e["url"] for e in fact["evidence"] if "url" in e]
            assert any("/blob/" in u and len(u.split("/blob/")[1].split("/")[0]) == 40
                       for u in urls), (name, fact["reason"])
    assert seen >= 30
