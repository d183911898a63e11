"""apply / revert on a real veth pair in a namespace of our own: real ethtool, ip and /proc/sys.

Every change is read back with ethtool/ip//proc, reverted, read back again, and the persistence
files (under a temp --persist-root) are compared byte for byte with what was there before.
A kill -9 at every step boundary of an apply and of a revert is recovered by `hwmgr recover`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.apply_env import ApplyNs, tree_bytes

pytestmark = pytest.mark.root

OLD_SYSCTL = b"# kept by the site\nnet.core.somaxconn = 4096\n"
CHANGES = [
    {"interface": "v0", "item": "features.gro", "current": "off", "wanted": "on"},
    {"interface": "v0", "item": "channels.rx", "current": 1, "wanted": 2},
    {"interface": "v0", "item": "txqueuelen", "current": 1000, "wanted": 4242},
    {"interface": None, "item": "sysctl.net.ipv4.ip_forward", "current": 0, "wanted": 1},
]


@pytest.fixture
def ns(ns: ApplyNs) -> ApplyNs:
    """conftest's namespace with an earlier sysctl.d file of ours under its persist root:
    merged by apply, then restored exactly by revert."""
    conf = ns.root / "etc/sysctl.d/90-hwmgr.conf"
    conf.parent.mkdir(parents=True)
    conf.write_bytes(OLD_SYSCTL)
    return ns


def _live(env: ApplyNs) -> tuple[str, int, int, str]:
    return env.gro(), env.rx_channels(), env.qlen(), env.sysctl("net.ipv4.ip_forward")


OLD = ("off", 1, 1000, "0")
NEW = ("on", 2, 4242, "1")


def test_dry_run_json_plan_changes_nothing(ns: ApplyNs) -> None:
    before = tree_bytes(ns.root)
    res = ns.apply(CHANGES, "--dry-run", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)["data"]
    rows = {(c["interface"], c["item"]): c for c in data["changes"]}
    gro = rows[("v0", "features.generic-receive-offload")]
    assert gro["command"] == "ethtool -K v0 generic-receive-offload on"
    assert (gro["current"], gro["wanted"]) == ("off", "on")
    link = str(ns.root / "etc/systemd/network/10-hwmgr-v0.link")
    why = gro["persist"].pop("why")
    assert why.startswith("udev reads .link files (systemctl --version: systemd ")
    assert gro["persist"] == {"backend": "systemd-link", "file": link,
                              "key": "GenericReceiveOffload", "connection": None}
    assert rows[("v0", "txqueuelen")]["command"] == "ip link set dev v0 txqueuelen 4242"
    assert rows[(None, "sysctl.net.ipv4.ip_forward")]["persist"]["file"].endswith(
        "/etc/sysctl.d/90-hwmgr.conf")
    assert _live(ns) == OLD and tree_bytes(ns.root) == before
    assert not Path(ns.state).exists()


def test_in_a_namespace_nothing_is_planned_into_the_hosts_etc(ns: ApplyNs) -> None:
    """Without --persist-root, /etc is the host's: its sysctl.d would set the host's own
    namespace at boot. The plan says so per change and writes no file."""
    path = ns.tmp / "changes.json"
    path.write_text(json.dumps(list(CHANGES)))
    res = ns.hwmgr("apply", "--changes", str(path), "--state-dir", ns.state, "--dry-run",
                   "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)["data"]
    assert data["files"] == [] and data["changes"]
    for c in data["changes"]:
        assert c["persist"]["file"] is None
        assert f"this is network namespace {ns.ns}" in c["persist"]["not_persisted"]
    assert any(n.startswith("nothing persisted") for n in data["notes"])
    assert _live(ns) == OLD


@pytest.mark.heavy
def test_apply_then_revert_restores_values_and_files_exactly(ns: ApplyNs) -> None:
    before = tree_bytes(ns.root)
    res = ns.apply(CHANGES, "--yes")
    assert res.returncode == 0, res.stderr
    assert _live(ns) == NEW
    link = (ns.root / "etc/systemd/network/10-hwmgr-v0.link").read_text()
    assert "OriginalName=v0" in link  # veth MACs are random: match by name
    assert "GenericReceiveOffload=yes\nRxChannels=2\nTransmitQueueLength=4242\n" in link
    conf = (ns.root / "etc/sysctl.d/90-hwmgr.conf").read_text()
    assert "net.core.somaxconn = 4096\n" in conf and "net.ipv4.ip_forward = 1\n" in conf
    again = ns.apply([{**c, "current": c["wanted"]} for c in CHANGES], "--yes", "--json")
    assert again.returncode == 0  # (the file lists changes; apply re-sets them idempotently)
    out_of_order = ns.hwmgr("revert", "--state-dir", ns.state, "--txn", "1", "--yes")
    assert out_of_order.returncode == 9 and "revert #2 first" in out_of_order.stderr
    for _ in range(2):  # newest first: #2 (which found the new values), then #1
        rev = ns.hwmgr("revert", "--state-dir", ns.state, "--yes")
        assert rev.returncode == 0, rev.stderr
    assert _live(ns) == OLD
    assert tree_bytes(ns.root) == before
    hist = json.loads(ns.hwmgr("history", "--state-dir", ns.state, "--json").stdout)
    kinds = [(t["kind"], t["state"]) for t in hist["data"]["transactions"]]
    assert kinds == [("revert", "committed")] * 2 + [("apply", "committed")] * 2
    items = hist["data"]["transactions"][-1]["items"]
    assert {"interface": "v0", "item": "txqueuelen", "to": 4242} in items
    nothing = ns.hwmgr("revert", "--state-dir", ns.state, "--yes")
    assert nothing.returncode == 4


def test_failure_part_way_undoes_done_steps(ns: ApplyNs) -> None:
    before = tree_bytes(ns.root)
    bad = CHANGES[:3] + [{"interface": "v0", "item": "channels.rx", "current": 1,
                          "wanted": 64}]  # over veth's maximum: ethtool refuses
    bad = [CHANGES[0], CHANGES[2], bad[3], CHANGES[3]]
    res = ns.apply(bad, "--yes")
    assert res.returncode == 1
    assert "channels.rx" in res.stderr and "rolled-back" in res.stdout
    assert _live(ns) == OLD and tree_bytes(ns.root) == before


def test_nothing_to_do_is_exit_4(ns: ApplyNs) -> None:
    res = ns.apply([], "--yes")
    assert res.returncode == 4


# ---------------------------------------------------------------- kill -9 at every boundary
APPLY_STEPS = ["set v0:features.generic-receive-offload", "set v0:txqueuelen",
               "set sysctl.net.ipv4.ip_forward"]
CRASH_CHANGES = [CHANGES[0], CHANGES[2], CHANGES[3]]
PHASES = ("before", "saved", "after", "done")


def _crash_points() -> list[str]:
    steps = APPLY_STEPS + ["persist:link", "persist:sysctl"]
    return [f"{i}:{ph}" for i in range(len(steps)) for ph in PHASES] + ["1:undo"]


@pytest.mark.slow  # a killed process per boundary
@pytest.mark.parametrize("point", _crash_points())
def test_kill_at_apply_boundary_is_recovered(ns: ApplyNs, point: str) -> None:
    before = tree_bytes(ns.root)
    env = {"HWMGR_TEST_CRASH_AT": point}
    if point.endswith(":undo"):  # fail the last step, die while undoing step 1
        changes = CRASH_CHANGES + [{"interface": "v0", "item": "channels.rx", "wanted": 64}]
    else:
        changes = CRASH_CHANGES
    res = ns.apply(changes, "--yes", env=env)
    assert res.returncode == -9 or res.returncode == 137, (res.returncode, res.stderr)
    rec = ns.hwmgr("recover", "--state-dir", ns.state, "--json")
    assert rec.returncode == 0, rec.stderr
    (txn,) = json.loads(rec.stdout)["data"]
    live = (ns.gro(), ns.qlen(), ns.sysctl("net.ipv4.ip_forward"))
    if txn["state"] == "committed":
        # only once the last step took effect (recover resolves "after" with its check)
        assert point in ("4:after", "4:done")
        assert live == ("on", 4242, "1")
        assert (ns.root / "etc/systemd/network/10-hwmgr-v0.link").is_file()
    else:
        assert txn["state"] == "rolled-back"
        assert live == ("off", 1000, "0")
        assert tree_bytes(ns.root) == before


@pytest.mark.slow  # a killed process per boundary
@pytest.mark.parametrize("point", ["0:saved", "1:after", "2:before", "3:done", "4:saved"])
def test_kill_during_revert_is_recovered(ns: ApplyNs, point: str) -> None:
    before = tree_bytes(ns.root)
    assert ns.apply(CRASH_CHANGES, "--yes").returncode == 0
    applied = tree_bytes(ns.root)
    res = ns.hwmgr("revert", "--state-dir", ns.state, "--yes", env={"HWMGR_TEST_CRASH_AT": point})
    assert res.returncode in (-9, 137)
    rec = ns.hwmgr("recover", "--state-dir", ns.state, "--json")
    (txn,) = json.loads(rec.stdout)["data"]
    live = (ns.gro(), ns.qlen(), ns.sysctl("net.ipv4.ip_forward"))
    if txn["state"] == "committed":
        assert live == ("off", 1000, "0") and tree_bytes(ns.root) == before
    else:
        assert txn["state"] == "rolled-back"
        assert live == ("on", 4242, "1") and tree_bytes(ns.root) == applied
        # the revert can be run again and then completes
        assert ns.hwmgr("revert", "--state-dir", ns.state, "--yes").returncode == 0
        assert tree_bytes(ns.root) == before


@pytest.mark.heavy
def test_apply_from_check_findings_on_a_netdev_driver_entry(ns: ApplyNs, tmp_path: Path) -> None:
    """A catalog entry governing netdevs by driver name alone (veth): check and apply agree."""
    cat = tmp_path / "veth-catalog.json"
    cat.write_text(json.dumps({
        "schema_version": 2, "catalog_version": "2026.11.0", "released": "2026-11-23",
        "drivers": {"veth": {
            "description": "veth test entry", "version_scheme": "driver", "devices": [],
            "versions": {}, "netdev_drivers": ["veth"],
            "settings": {"features": {"gro": "on"}, "txqueuelen": {"min": 5000},
                         "evidence": "test"}}},
        "sysctl": [{"name": "net.ipv4.ip_forward", "value": 1, "evidence": "test"}]}))
    ns.ip("link", "set", "v1", "txqueuelen", "7000")  # v1 already meets the bound
    before = tree_bytes(ns.root)
    args = ("--catalog", str(cat), "--persist-root", str(ns.root), "--state-dir", ns.state)
    plan = ns.hwmgr("apply", *args, "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr
    rows = {(c["interface"], c["item"]): (c["current"], c["wanted"])
            for c in json.loads(plan.stdout)["data"]["changes"]}
    assert rows[("v0", "txqueuelen")] == (1000, 5000)  # the bound's nearest value
    assert rows[("v0", "features.generic-receive-offload")] == ("off", "on")
    assert rows[(None, "sysctl.net.ipv4.ip_forward")] == (0, 1)
    assert ("v1", "txqueuelen") not in rows
    assert ns.hwmgr("apply", *args, "--interface", "v0", "--layer", "settings",
                    "--yes").returncode == 0
    assert (ns.gro(), ns.qlen(), ns.sysctl("net.ipv4.ip_forward")) == ("on", 5000, "0")
    check = ns.hwmgr("check", "--catalog", str(cat), "--layer", "settings", "--json")
    drift = [f for f in json.loads(check.stdout)["data"]["findings"]
             if f["status"] == "drift" and f["interface"] in ("v0", "v1")]
    assert drift == [f for f in drift if f["interface"] == "v1"]  # v0 is compliant now
    assert ns.hwmgr("revert", "--state-dir", ns.state, "--yes").returncode == 0
    assert (ns.gro(), ns.qlen()) == ("off", 1000) and tree_bytes(ns.root) == before
