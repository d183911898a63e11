"""Verdicts on real servers from public posts (tests/fixtures/field/): no verdict names a
kernel or distribution the host does not run, and the share of NIC/storage functions with a
readable version that get a verdict (not uncatalogued/unknown) is measured and held."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from hwmgr.catalog.load import Catalog, load_catalog
from hwmgr.config import config_from
from hwmgr.host.snapshot import open_host
from hwmgr.inventory.scan import Inventory

REPO = Path(__file__).resolve().parent.parent
FIELD = REPO / "tests" / "fixtures" / "field"
HOSTS = sorted(p.parent for p in FIELD.glob("*/host.json"))
VERDICTS = ("ok", "outdated", "known-bad")
# what a reason may name: distributions as the catalog spells them and as people do, and
# kernel releases (a version followed by a build or flavour)
_DIST = re.compile(r"\b(rhel|centos|rocky|alma|almalinux|oracle|debian|ubuntu)[- ](\d+)"
                   r"(?:\.(\d+))?", re.IGNORECASE)
_KERNEL = re.compile(r"\b\d+\.\d+\.\d+-[0-9][0-9A-Za-z._+-]*[A-Za-z_][0-9A-Za-z._+-]*")
_FAMILY = {"centos": "el", "rhel": "el", "rocky": "el", "alma": "el", "almalinux": "el",
           "oracle": "el", "red hat enterprise linux": "el", "debian": "debian",
           "ubuntu": "ubuntu"}


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog([REPO / "catalogs"], config=config_from(None))


def functions(cat: Catalog, host_dir: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(host.json, device) of every NIC/storage function with a readable driver version."""
    desc = json.loads((host_dir / "host.json").read_text())
    host, cleanup = open_host(str(host_dir / "snapshot"))
    try:
        scan = Inventory(host, verdict=cat.verdict).scan()
    finally:
        if cleanup:
            cleanup()
    for d in scan.devices:
        if str(d.get("class") or "")[:2] in ("01", "02") and d.get("driver_version"):
            yield desc, d


def _runs(desc: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(family, major, minor) of the distribution a field host's description names."""
    text = str(desc.get("distribution") or "").lower()
    for name, fam in _FAMILY.items():
        m = re.search(rf"{name}\D*(\d+)(?:\.(\d+))?", text)
        if m:
            return fam, m.group(1), m.group(2)
    return None, None, None


def test_no_verdict_names_what_the_host_does_not_run(cat: Catalog) -> None:
    seen = 0
    for host_dir in HOSTS:
        for desc, d in functions(cat, host_dir):
            reason = str((d.get("catalog") or {}).get("reason") or "")
            fam, major, minor = _runs(desc)
            for m in _DIST.finditer(reason):
                seen += 1
                named = _FAMILY[m.group(1).lower()]
                assert (named, m.group(2)) == (fam, major) and (
                    m.group(3) is None or minor is None or m.group(3) == minor), (
                    host_dir.name, desc.get("distribution"), reason)
            for k in _KERNEL.findall(reason):
                seen += 1
                assert k == desc.get("kernel"), (host_dir.name, desc.get("kernel"), reason)
    assert seen, "no verdict named a distribution or kernel at all: the rule was not tried"


def test_verdict_share_on_real_servers(cat: Catalog) -> None:
    """Every function on a kernel build the catalog places gets a verdict; the others (a
    post that prints no kernel release, a derivative kernel) are uncatalogued kernel builds,
    and the share over all is held at what this catalog reaches (docs/known-issues.md): an
    unplaced build whose every known carrier is past its end of support is outdated."""
    counted = judged = placed = placed_judged = 0
    misses = []
    for host_dir in HOSTS:
        for desc, d in functions(cat, host_dir):
            counted += 1
            status = (d.get("catalog") or {}).get("status")
            on_placed = cat.kernel_build(desc.get("kernel")).known
            placed += on_placed
            if status in VERDICTS:
                judged += 1
                placed_judged += on_placed
            else:
                misses.append((host_dir.name, d["driver"], d["driver_version"],
                               desc.get("kernel") or "no kernel recorded", status))
    share = judged / counted
    print(f"{judged} of {counted} NIC/storage functions with a readable version get a "
          f"verdict ({share:.0%}); on kernels the catalog places: {placed_judged} of "
          f"{placed}; misses: {misses}")
    assert placed >= 6 and placed_judged == placed, misses
    # Issue 37 asks for 80 %. 40 hosts: 32 of 39 functions, 82.1 %. Of those, 3 are Realtek's
    # out-of-tree r8125 identified as a release a public import of its tarballs shows, with no
    # known issue recorded (without them 29 of 39, 74.4 %). Every miss is a post with no
    # kernel release and a string current kernels still print, or a vendor build the catalog
    # has no source on (MLNX_OFED 3.4's mlx4_en).
    assert share >= 0.80, misses
