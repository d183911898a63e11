"""Planning on a captured host (seed 000): the be2net upgrade is refused because be2net
carries the default route, Secure Boot without a key is refused, and nothing is written."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from support import HOSTS, REPO, run_cli

KVER = "2.6.32-279.el6.x86_64"
# /proc/net/route of seed 000 ('route' output there: default via eth2 and via eth0)
ROUTE = (
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    "eth0\t0082A8AC\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
    "eth2\t006E10C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
    "eth2\t00000000\t016E10C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
    "eth0\t00000000\t018210AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
)


@pytest.fixture
def seed000(tmp_path: Path) -> tuple[Path, Path]:
    """seed-000 snapshot + what planning reads (routes, modinfo, headers) + a catalog whose
    10.2.470.14 source carries a checksum (the shipped one refuses the unverified URL)."""
    snap = tmp_path / "ustor"
    shutil.copytree(HOSTS / "seed000-ustor", snap, symlinks=True)
    (snap / "proc/net").mkdir(parents=True)
    (snap / "proc/net/route").write_text(ROUTE)
    (snap / f"lib/modules/{KVER}/build").mkdir(parents=True)
    (snap / f"lib/modules/{KVER}/build/Makefile").write_text("# headers\n")
    index = json.loads((snap / "commands/index.json").read_text())
    index.append({"argv": ["modinfo", "-k", KVER, "be2net"], "rc": 0,
                  "stdout": "commands/modinfo-be2net.txt"})
    (snap / "commands/index.json").write_text(json.dumps(index))
    cat = json.loads((REPO / "catalogs/hwmgr-catalog.json").read_text())
    src = cat["drivers"]["be2net"]["versions"]["10.2.470.14"]["source"]
    src.pop("verified", None)
    src.update(sha256=hashlib.sha256(b"x").hexdigest(), size=1)
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(cat))
    return snap, catalog


def plan(snap: Path, catalog: Path, *extra: str, env: dict | None = None):
    res = run_cli("plan", "upgrade", "be2net", "--to", "10.2.470.14", "--kernel", KVER,
                  "--root", str(snap), "--catalog", str(catalog), "--json", *extra,
                  env={"HWMGR_STATE_DIR": "/var/lib/hwmgr-test-none", "SSH_CONNECTION": "",
                       **(env or {})})
    return res, json.loads(res.stdout)


def test_default_route_interface_is_refused_by_name(seed000: tuple[Path, Path]) -> None:
    snap, catalog = seed000
    before = sorted(p.relative_to(snap) for p in snap.rglob("*"))
    res, doc = plan(snap, catalog)
    assert res.returncode == 9, res.stderr
    assert doc["status"] == "refused"
    assert any("eth2 carries the default route" in r for r in doc["data"]["refusals"])
    assert not any("eth0" in r for r in doc["data"]["refusals"])  # eth0 is e1000e
    data = doc["data"]
    assert {d["address"] for d in data["devices"]} == {"0000:02:00.0", "0000:02:00.1"}
    assert data["from_versions"] == {KVER: "4.1.307r"}
    assert data["backups"][0]["path"].endswith("/benet/be2net.ko")
    assert data["reboot_required"] is True
    assert sorted(p.relative_to(snap) for p in snap.rglob("*")) == before, "nothing written"


def test_force_turns_the_route_refusal_into_a_warning(seed000: tuple[Path, Path]) -> None:
    snap, catalog = seed000
    res, doc = plan(snap, catalog, "--force")
    assert res.returncode == 0, doc
    assert any("eth2" in w for w in doc["data"]["warnings"])
    steps = doc["data"]["steps"]
    assert steps[0].startswith("fetch ") and any("dkms build" in s for s in steps)


def test_secure_boot_without_key_is_refused(seed000: tuple[Path, Path]) -> None:
    snap, catalog = seed000
    (snap / "commands/sb.txt").write_text("SecureBoot enabled\n")
    index = json.loads((snap / "commands/index.json").read_text())
    index.append({"argv": ["mokutil", "--sb-state"], "rc": 0, "stdout": "commands/sb.txt"})
    (snap / "commands/index.json").write_text(json.dumps(index))
    res, doc = plan(snap, catalog, "--force")
    assert res.returncode == 9
    assert any("Secure Boot" in r for r in doc["data"]["refusals"])


def test_ssh_session_interface_is_named(seed000: tuple[Path, Path]) -> None:
    snap, catalog = seed000
    (snap / "commands/ip.txt").write_text(
        "4: eth2    inet 192.16.110.50/24 brd 192.16.110.255 scope global eth2\n")
    index = json.loads((snap / "commands/index.json").read_text())
    index.append({"argv": ["ip", "-o", "addr", "show"], "rc": 0, "stdout": "commands/ip.txt"})
    (snap / "commands/index.json").write_text(json.dumps(index))
    (snap / "proc/net/route").write_text(ROUTE.splitlines()[0] + "\n")  # no default routes
    res, doc = plan(snap, catalog,
                    env={"SSH_CONNECTION": "192.16.110.60 51000 192.16.110.50 22"})
    assert res.returncode == 9
    assert any("eth2 carries the current SSH session" in r for r in doc["data"]["refusals"])


def test_shipped_catalog_refuses_the_unverified_vendor_url(seed000: tuple[Path, Path]) -> None:
    snap, _ = seed000
    res, doc = plan(snap, REPO / "catalogs/hwmgr-catalog.json", "--force")
    assert res.returncode == 9
    assert any("verified" in r or "sha256" in r for r in doc["data"]["refusals"])
