"""`hwmgr check`: the CLI on seed fixtures, its JSON schema, a live veth pair, a snapshot."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
from support import FIXTURES, HOSTS, HWMGR, REPO, run_cli, run_json
from support.netns import VethLink, sh

SCHEMA = json.loads((REPO / "hwmgr" / "schemas" / "check.schema.json").read_text())
SHIPPED = str(REPO / "catalogs")
SITE = str(FIXTURES / "catalogs" / "good" / "site-veth.json")


def checked(*args: str) -> tuple[int, dict]:
    """`hwmgr check --json ARGS`: exit code and the data, validated against the schema."""
    code, env = run_json("check", *args)
    assert env["command"] == "check", env
    jsonschema.validate(env["data"], SCHEMA)
    assert env["data"]["compliant"] is (code == 0)
    return code, env["data"]


def by_item(data: dict, ifname: str | None = None) -> dict[str, dict]:
    return {f["item"]: f for f in data["findings"] if ifname is None or f["interface"] == ifname}


def test_seed002_before_exits_5_with_every_fix() -> None:
    code, data = checked("--root", str(HOSTS / "seed002-before"))
    assert code == 5
    ring = by_item(data, "enp1s0f0")["ring.rx"]
    assert ring == {
        "layer": "setting", "device": "0000:01:00.0", "interface": "enp1s0f0",
        "item": "ring.rx", "expected": 4096, "actual": 256, "status": "drift",
        "reason": "ring.rx is 256, the catalog wants the pre-set maximum 4096",
        "fix": "ethtool -G enp1s0f0 rx 4096",
        "source": {"ref": "settings:ixgbe", "url": None}}  # a field note: a file, no URL
    # ok: ixgbe x2 (known-good from the field note), lro x2, and the three TCP sysctls; the
    # in-tree e1000e, ahci, tg3 x2, nvme and the two ixgbevf VFs are CentOS 7.6's builds, on
    # which the catalog states no issue ranges and lists no verdict: uncatalogued kernel build
    assert data["summary"] == {"ok": 7, "drift": 14, "unknown": 0, "uncatalogued": 7,
                               "unsupported": 0}
    assert data["schema_version"] == 3
    base = json.loads((REPO / "catalogs" / "hwmgr-catalog.json").read_text())
    assert data["catalog_version"] == base["catalog_version"]
    assert data["host"]["hostname"] == "server"



def test_a_result_cites_sources_by_reference_and_stays_small() -> None:
    """A night's result carries what the morning needs, not the catalog's evidence text: the
    seed 002 router's 28 findings fit in 12 KB, and every driver finding cites the catalog
    member its verdict rests on (the evidence is there: `check --evidence`, catalog show)."""
    res = run_cli("check", "--json", "--root", str(HOSTS / "seed002-before"))
    assert res.returncode == 5 and len(res.stdout.encode()) <= 12 * 1024, len(res.stdout)
    data = json.loads(res.stdout)["data"]
    drivers = [f for f in data["findings"] if f["layer"] == "driver"]
    assert len(drivers) == 9 and all(f["source"] for f in drivers)
    assert {f["source"]["ref"] for f in drivers if f["status"] == "ok"} == {
        "version:ixgbe/5.1.0-k-rh7.6"}
    text = run_cli("check", "--evidence", "--root", str(HOSTS / "seed002-before"),
                   env={"COLUMNS": "200"}).stdout
    evidence = text.split("Evidence:\n", 1)[1]
    assert "version:ixgbe/5.1.0-k-rh7.6: field note 002_" in evidence
    assert "evidence" not in res.stdout  # no evidence text, nor a member of that name

def test_seed002_human_table_groups_drift_first_and_merges_fixes() -> None:
    res = run_cli("check", "--root", str(HOSTS / "seed002-before"))
    assert res.returncode == 5, res.stderr
    lines = res.stdout.splitlines()
    head = lines.index("0000:01:00.0 enp1s0f0 Ethernet Controller 10-Gigabit X540-AT2")
    rows = [ln.split()[0] for ln in lines[head + 2:head + 11]]
    assert rows == ["drift"] * 7 + ["ok"] * 2
    assert "  ethtool -G enp1s0f0 rx 4096 tx 4096" in lines
    assert "  ethtool -A enp1s0f0 rx on tx on" in lines
    assert "  ip link set dev enp1s0f1 txqueuelen 10000" in lines
    assert "\x1b" not in res.stdout  # piped: plain text


def test_seed002_after_exits_0() -> None:
    """The two ixgbevf VFs (and the other in-tree builds of CentOS 7.6) run versions the
    catalog has no verdict on for that kernel build: no opinion, so the host is still
    compliant (not exit 11)."""
    code, data = checked("--root", str(HOSTS / "seed002-after"))
    assert code == 0 and data["compliant"] is True
    assert data["summary"]["drift"] == data["summary"]["unknown"] == 0
    assert data["summary"]["uncatalogued"] == 7
    vfs = [f for f in data["findings"] if f["status"] == "uncatalogued"
           and f["actual"] == "4.1.0-k-rh7.6"]
    assert [(f["device"], f["item"]) for f in vfs] == [
        ("0000:01:10.0", "driver_version"), ("0000:01:10.2", "driver_version")]
    assert "uncatalogued kernel build: in-tree ixgbevf 4.1.0-k-rh7.6 on " \
        "3.10.0-957.5.1.el7.x86_64" in vfs[0]["reason"]
    assert "rhel-7.6" in vfs[0]["reason"] and "rhel-7.7" not in vfs[0]["reason"]


def test_unreadable_driver_version_is_unknown_exit_11(copy_host) -> None:
    """Uncatalogued is for a version that was read; one that could not be read stays
    unknown, and that is still exit 11."""
    root = copy_host("seed002-after")
    (root / "sys" / "module" / "ixgbevf" / "version").unlink()
    for vf in ("enp1s16", "enp1s16f2"):  # and `ethtool -i` printed no version line
        out = root / "commands" / f"ethtool-i-{vf}.txt"
        out.write_text("".join(ln for ln in out.read_text().splitlines(keepends=True)
                               if not ln.startswith("version:")))
    code, data = checked("--root", str(root))
    assert code == 11 and data["compliant"] is False
    assert data["summary"]["unknown"] == 2 and data["summary"]["uncatalogued"] == 5
    vfs = [f for f in data["findings"] if f["status"] == "unknown"]
    assert {(f["device"], f["item"], f["actual"]) for f in vfs} == {
        ("0000:01:10.0", "driver_version", None), ("0000:01:10.2", "driver_version", None)}
    assert all("ixgbevf version is unknown" in f["reason"] for f in vfs)


def test_unrecorded_outputs_are_unknown_exit_11(copy_host) -> None:
    root = copy_host("seed002-after")
    meta = json.loads((root / "snapshot.json").read_text())
    meta["records"] = ["ip-link", "sysctl"]  # taken by a hwmgr that recorded only `-i`
    (root / "snapshot.json").write_text(json.dumps(meta))
    index = json.loads((root / "commands" / "index.json").read_text())
    gone = [["ethtool", o] for o in ("-a", "-g", "-l", "-k")]
    keep = [c for c in index if c["argv"][:2] not in gone]
    assert len(keep) == len(index) - 8
    (root / "commands" / "index.json").write_text(json.dumps(keep))
    code, data = checked("--root", str(root))
    assert code == 11
    ring = by_item(data, "enp1s0f0")["ring.rx"]
    assert ring["status"] == "unknown" and ring["actual"] is None
    assert "retake it with hwmgr" in ring["reason"] and "install" not in ring["reason"]


def test_seed000_known_bad_driver() -> None:
    code, data = checked("--root", str(HOSTS / "seed000-ustor"), "--layer", "driver")
    assert code == 5
    drv = [f for f in data["findings"] if f["device"] == "0000:02:00.0"][0]
    assert drv["fix"] == "hwmgr upgrade be2net --to 10.2.470.14" and drv["status"] == "drift"


def test_site_catalog_layers_over_the_base_and_replaces_nothing(tmp_path: Path) -> None:
    """A partial site file (one sysctl rule, no header) is a layer with --site-catalog: the
    site rule is judged and the base's known-bad be2net 4.1.307r (seed 000) still is."""
    site = tmp_path / "50-site.json"
    site.write_text(json.dumps({"sysctl": [
        {"name": "net.ipv4.tcp_sack", "value": 0, "evidence": "site policy (test)"}]}))
    code, data = checked("--root", str(HOSTS / "seed000-ustor"), "--site-catalog", str(site))
    assert code == 5
    sack = by_item(data)["sysctl.net.ipv4.tcp_sack"]
    assert (sack["status"], sack["expected"], sack["actual"]) == ("drift", 0, 1)
    be2net = [f for f in data["findings"] if f["device"] == "0000:02:00.0"
              and f["item"] == "driver_version"][0]
    assert (be2net["status"], be2net["actual"]) == ("drift", "4.1.307r")
    assert by_item(data)["sysctl.net.ipv4.tcp_window_scaling"]["status"] == "ok"  # base rule
    # --catalog replaces the list: the same partial file alone is not a catalog
    res = run_cli("check", "--root", str(HOSTS / "seed000-ustor"), "--catalog", str(site))
    assert res.returncode == 8 and "catalog_version" in res.stderr
    res = run_cli("check", "--root", str(HOSTS / "seed000-ustor"), "--site-catalog",
                  str(tmp_path / "nosuch.json"))
    assert res.returncode == 3 and "nosuch.json" in res.stderr


def test_bad_layer_and_bad_catalog(tmp_path: Path) -> None:
    res = run_cli("check", "--layer", "rings", "--root", str(HOSTS / "seed002-after"))
    assert res.returncode == 2 and "'rings'" in res.stderr
    bad = tmp_path / "c.json"
    bad.write_text('{"schema_version": 1, "catalog_version": "2026.11.0", "released": '
                   '"2026-11-21", "drivers": {}, "sysctl": []}')
    res = run_cli("check", "--catalog", str(bad), "--root", str(HOSTS / "seed002-after"))
    assert res.returncode == 8 and str(bad) in res.stderr and "Traceback" not in res.stderr


def test_inventory_hints_at_check_only_for_humans() -> None:
    res = run_cli("inventory", "--root", str(HOSTS / "seed002-after"))
    assert res.stdout.splitlines()[-1].endswith("hwmgr check")
    code, env = run_json("inventory", "--root", str(HOSTS / "seed002-after"))
    assert code == 0 and "check" not in json.dumps(env["data"].get("notes", []))


def test_snapshot_then_check_matches_live(tmp_path: Path) -> None:
    code_live, live = checked()
    assert run_cli("snapshot", str(tmp_path / "snap")).returncode == 0
    code_snap, snap = checked("--root", str(tmp_path / "snap"))
    assert (code_snap, snap["findings"]) == (code_live, live["findings"])
    assert code_live in (0, 5)  # this machine is fully readable


# ------------------------------------------------------------------------- live veth pair
def in_ns(link: VethLink, *args: str) -> tuple[int, dict]:
    res = link.run_a([*HWMGR, "check", "--json", "--layer", "settings,sysctl",
                      "--catalog", SHIPPED, "--catalog", SITE, *args])
    env = json.loads(res.stdout)
    jsonschema.validate(env["data"], SCHEMA)
    return res.returncode, env["data"]


def apply(link: VethLink, data: dict) -> list[str]:
    fixes = [f["fix"] for f in data["findings"] if f["status"] == "drift"]
    for fix in fixes:
        sh(link.argv(link.ns_a, ["sh", "-c", fix]))
    return fixes


def test_in_a_namespace_the_hosts_nic_is_named_truthfully(veth: VethLink) -> None:
    """Inside a network namespace the host's NIC has no visible interface: it is not this
    namespace's to judge (a note says so), never "its driver is not driving this device"."""
    res = veth.run_a([*HWMGR, "check", "--json", "--layer", "driver"])
    inside = json.loads(res.stdout)["data"]
    assert all("is not driving" not in f["reason"] for f in inside["findings"])
    outside = run_json("check", "--layer", "driver")[1]["data"]["findings"]
    nics = {d["address"] for d in run_json("inventory")[1]["data"]["devices"]
            if d["interfaces"]}  # NICs whose interface is in this (the host's) namespace
    governed = [f for f in outside if f["status"] != "unknown" and f["device"] in nics]
    if not governed:
        pytest.skip("no NIC of this machine is judged by the shipped catalog")
    # not this namespace's NIC: no finding (it is not unknown here), a note naming it
    assert not {f["device"] for f in governed} & {f["device"] for f in inside["findings"]}
    for f in governed:
        assert any(n.startswith(f"{f['device']}: no interface of this NIC is in network "
                                "namespace") for n in inside["notes"]), inside.get("notes")


@pytest.mark.slow  # real veth pairs and tools
def test_live_veth_drift_fixed_with_real_tools(veth: VethLink) -> None:
    code, data = in_ns(veth)
    assert code == 5, data
    items = by_item(data, veth.if_a)
    assert items["ring.rx"]["status"] == "unsupported"  # veth has no rings
    assert items["pause.rx"]["status"] == "unsupported"
    assert items["features.generic-receive-offload"]["status"] == "drift"
    assert items["txqueuelen"]["actual"] == 1000 and items["txqueuelen"]["status"] == "drift"
    mtu = by_item(data)["sysctl.net.ipv4.tcp_mtu_probing"]
    assert (mtu["status"], mtu["actual"]) == ("drift", 0)  # this namespace's own value
    assert veth.if_b not in {f["interface"] for f in data["findings"]}  # not in this netns
    fixes = apply(veth, data)
    assert f"ethtool -K {veth.if_a} gro on" in fixes
    code, data = in_ns(veth)
    assert code == 0, [f for f in data["findings"] if f["status"] != "ok"]
    assert by_item(data, veth.if_a)["channels.rx"]["status"] == "ok"
    # seed 004: under a token-bucket shaper TSO must be off; the conditional rule sees tbf
    veth.shape("100mbit")
    code, data = in_ns(veth)
    tso = by_item(data, veth.if_a)["features.tcp-segmentation-offload"]
    assert code == 5 and tso["status"] == "drift"
    assert tso["source"]["ref"].startswith("rule:")
    assert apply(veth, data) == [f"ethtool -K {veth.if_a} tso off"]
    code, _ = in_ns(veth)
    assert code == 0
    assert subprocess.run(["ip", "netns", "exec", veth.ns_a, "ethtool", "-k", veth.if_a],
                          capture_output=True, text=True).stdout.count(
        "tcp-segmentation-offload: off") == 1
