"""The driver lifecycle on emulated seed-000 hardware, proven with real boots of a QEMU guest.

Every command runs inside the guest with the real CLI; every assertion is on what the guest
recorded (hwmgr's JSON, and independently ethtool -i, /sys/module, modinfo, lspci via
lab/guest/facts.py). The guest boots with systemd; boot-time verification is the shipped
hwmgr-verify.service. DKMS builds of e1000e cost about 260 CPU-seconds each under TCG, so
the scenarios share boots and disks, and build each version once:

  chain a: 1 inventory, trust the obtained 3.8.7 SRPM, plan, upgrade 3.8.7 (issue 14)
           | 2 verify, apply settings (eth0: .link, eth1: ifupdown), upgrade 3.8.8
           | 3 settings compliant after the reboot, 3.8.8 verified, rollback
           | 4 3.8.7 verified; settings still compliant after that driver change, revert,
           rollback to inbox | 5 inbox verified; the original settings are back (issues 12, 27)
  chain b (the image booted fresh once a#3's gate passed): the rollout's second guest
           (lab/rollout.py, tests/lab/test_rollout.py): a binary package made to fail its
           gate → rolled back → the rollout halts
  chain c (a's disk after boot 2, settings applied): 5 shaped link → throughput fails →
           auto-rollback once
  chain d (a's disk at the power cut): 6 the disk as it was 1 s into the `dkms install` of
           a's boot 2 (QEMU paused, disk copied: what a power cut leaves) → boot → recover
Chain a is also the rollout's canary: a#2 takes the gate's baseline before its upgrade to
3.8.8 (the catalog's recommended version), a#3 gates it.
Chain a keeps one of the lab's slots (HWMGR_LAB_JOBS, default 2 guests at once); the other
chains share the rest. Boot 1 runs alone, so it gets every host CPU.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import pytest

from lab import rollout, storage
from lab.chain import Chain, start_forks, wanted
from lab.vm import FLOOR_MBPS, Boot, Lab, e1000e_versions

pytestmark = pytest.mark.lab

KVER_GLOB = "6.1.0-"
V1, V2 = "3.8.7_lab", "3.8.8_lab"
SHAPE = "tc qdisc add dev eth0 root tbf rate 20mbit burst 32kbit latency 400ms"
BUILD_BOOT = 900  # seconds: a boot that fetches, builds (~100 s) and installs under TCG
APPLY_TIME = 120  # seconds a#2's settings apply adds to its build boot (~40 s measured alone)
WAIT = 2400  # a forked chain's test waits for boots that started while chain a ran


# ----------------------------------------------------------------------------- helpers
def versions(b: Boot, boot_time: bool = False) -> dict[str, Any]:
    return e1000e_versions(b.boot_facts if boot_time else b.facts)


def assert_vendor(v: dict[str, Any], version: str, where: str) -> None:
    """ethtool -i, /sys/module/e1000e/version and modinfo all say `version` (DKMS module)."""
    assert (v["ethtool"], v["sys"], v["modinfo"]) == (version, version, version), (where, v)
    assert v["ethtool_driver"] == "e1000e", (where, v)
    assert v["file"].endswith("/updates/dkms/e1000e.ko"), (where, v)


def assert_inbox(v: dict[str, Any], kver: str, where: str) -> None:
    """The in-tree e1000e: no module version, ethtool reports the kernel release."""
    assert v["ethtool"] == kver and v["ethtool_driver"] == "e1000e", (where, v)
    assert v["sys"] is None and v["modinfo"] is None, (where, v)
    assert "/kernel/drivers/net/ethernet/intel/e1000e/" in v["file"], (where, v)


def expectation(b: Boot) -> dict[str, Any]:
    """The single expectation the boot-time verify looked at."""
    doc = b.verify
    assert doc is not None, f"boot verify did not run\n{b.where()}"
    exps = doc["data"]["expectations"]
    assert len(exps) == 1, (exps, doc.get("data", {}).get("notes"))
    return exps[0]


def throughput_mbps(exp: dict[str, Any]) -> float:
    runs = (exp.get("throughput") or {}).get("runs") or []
    got = [r["mbps"] for r in runs if r.get("direction") == "send" and r.get("mbps")]
    assert got, f"no throughput measured: {exp.get('throughput')}"
    return float(got[0])


# issue 14: 3.8.7 has no checksum in the catalog (as be2net 10.2.470.14 in the shipped one);
# the admin obtained the SRPM, trusts it on purpose, and the fetch comes from the site mirror
TRUST_STORY = (f"rec refused hwmgr plan upgrade e1000e --to {V1} --json\n"
               f"rec trust hwmgr catalog trust e1000e {V1} --file /lab/obtained/*.src.rpm "
               "--yes --json\nshow cat /etc/hwmgr/catalog.d/50-trusted.json\n"
               f"rec plan hwmgr plan upgrade e1000e --to {V1} --json\n")
# issues 12 and 27: the site states settings (lab/site/70-lab-settings.json) for the 82574L
# (eth0: no ifupdown stanza, so a systemd .link file) and for netdevsim (eth1: its ifupdown
# stanza, so post-up lines); apply in a#2 before the upgrade to 3.8.8, compliant after that
# reboot (a#3) and after the rollback's (a#4), revert in a#4, the originals in a#5
CHECK = "hwmgr check --layer settings,sysctl --json"
APPLY = ("install -D -m644 /lab/site/70-lab-settings.json "
         "/etc/hwmgr/catalog.d/70-lab-settings.json\n"
         f"rec check-before {CHECK}\nrec apply-plan hwmgr apply --dry-run --json\n"
         "show hwmgr apply --dry-run\nrec apply hwmgr apply --yes --json\n"
         f"rec check-applied {CHECK}\nfacts_as applied\n"
         "show cat /etc/network/interfaces.d/eth1 /etc/systemd/network/10-hwmgr-eth0.link\n")
# before hwmgr touches anything this boot: what udev, ifupdown and systemd-sysctl made of it
CHECK_BOOT = (f"rec check-boot {CHECK}\nshow hwmgr check --layer settings,sysctl\n"
              "show systemctl status --no-pager ifup@eth1.service\n")
REVERT = (f"rec revert hwmgr revert --yes --json\nrec check-reverted {CHECK}\n"
          "facts_as reverted\n")
# issue 12's guard through a stack this host's kernel cannot build: the default route via a
# VLAN on a bond whose member is eth1 (bonding and 8021q load in the guest)
GUARD = ("modprobe bonding && modprobe 8021q\n"
         "ip link add bond0 type bond mode active-backup && ip link set eth1 down\n"
         "ip link set eth1 master bond0 && ip link set bond0 up\n"
         "ip link add link bond0 name bond0.7 type vlan id 7 && ip link set bond0.7 up\n"
         "ip addr add 192.0.2.2/24 dev bond0.7 && ip route add default via 192.0.2.1\n"
         "rec guard hwmgr apply --interface eth1 --layer settings --yes --json\n"
         "ip route del default; ip link del bond0.7; ip link set eth1 nomaster; "
         "ip link del bond0\n")


def step_upgrade(version: str) -> str:
    # for the running kernel only: the image's second kernel has headers too (the kernel
    # gate's runs, test_kernel_gate.py), and without --kernel every upgrade would build for
    # both; building for that kernel is the gate's job
    return (f"rec upgrade hwmgr upgrade e1000e --to {version} --kernel \"$(uname -r)\" --yes "
            "--json\nfacts_end\nreboot_after")


DKMS_INSTALL = "LAB-MARK dkms-install"
CUT_DELAY = 1.0  # seconds into `dkms install` when chain d's disk is taken
# a#2: while 3.8.8 installs, say so on the console (the harness then takes the power cut)
BUILT = f"/var/lib/dkms/e1000e/{V2}/*/*/module/e1000e.ko*"
UPGRADE_WATCHED = (f"mark_when_running 'dkms install -m e1000e' dkms-install '{BUILT}' &\n"
                   "WATCH=$!\n"
                   f"{step_upgrade(V2)}\nkill $WATCH 2>/dev/null || true")
# the lines ifquery reads for eth1 once apply has written them (ifupdown's alias of post-up)
ETH1_POST_UP = {"/sbin/ethtool -L eth1 combined 2 || true", "/sbin/ethtool -A eth1 rx on || true",
                "/sbin/ethtool -A eth1 tx on || true", "/sbin/ethtool -G eth1 rx 2048 || true",
                "/sbin/ethtool -G eth1 tx 2048 || true",
                "/sbin/ip link set dev eth1 txqueuelen 5000 || true"}
HISTORY = "rec history hwmgr history e1000e --json\nshow hwmgr history e1000e"
PLAN_C = [("echo this step must not run", {"shape": SHAPE}),
          ("tc qdisc del dev eth0 root\nrec verify hwmgr verify --throughput --json\n"
           "rec history hwmgr history e1000e --json", {"shape": SHAPE})]
PLAN_D = [("rec before hwmgr history e1000e --json\nshow hwmgr history e1000e --steps\n"
           "rec recover hwmgr recover --json\nrec history hwmgr history e1000e --json\n"
           "reboot_after", {}),
          ("rec verify hwmgr verify --json\n" + HISTORY, {})]


def nic_settings(facts: dict[str, Any], ifname: str) -> dict[str, Any]:
    """One interface's settings as the guest's ethtool/sysfs/udev report them (facts.py)."""
    s = facts["settings"][ifname]
    feats, ring, pause = s["features"] or {}, s["ring"] or {}, s["pause"] or {}
    return {"ring": (ring.get("rx"), ring.get("tx")), "pause": (pause.get("rx"), pause.get("tx")),
            "channels": (s["channels"] or {}).get("combined"), "txqueuelen": s["txqueuelen"],
            "gro": feats.get("generic-receive-offload"),
            "tso": (feats.get("tcp-segmentation-offload"), feats.get("tx-tcp6-segmentation")),
            "link_file": s["link_file"]}


def drifted(doc: dict[str, Any]) -> set[tuple[str | None, str]]:
    return {(f["interface"], f["item"]) for f in doc["data"]["findings"]
            if f["status"] == "drift"}


def guarded(chain: Chain, fn: Any) -> Any:
    """Run part of a chain; if it fails, later scenarios on the chain say why they cannot run."""
    chain.need()
    try:
        return fn()
    except BaseException as exc:
        chain.broken = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        chain.release()
        raise


def assert_upgraded(b: Boot, version: str) -> dict[str, Any]:
    doc = b.ok("upgrade")
    txn = doc["data"]["transaction"]
    assert txn["state"] == "committed", txn
    assert [s["name"] for s in txn["steps"]] == ["fetch", "unpack", "dkms-add", "dkms-build",
                                                 "backup", "install", "initramfs", "arm"]
    assert doc["data"]["plan"]["to_version"] == version
    # what DKMS itself says, and the module files modinfo now resolves to (not yet loaded)
    assert any(f"e1000e/{version}" in ln and "installed" in ln for ln in b.facts["dkms_status"])
    assert b.facts["modules"]["e1000e"]["modinfo"].get("version") == version
    return txn


# ----------------------------------------------------------------------------- chain a
@pytest.mark.timeout(BUILD_BOOT + 300)
def test_1_inventory_in_the_guest(lab: Lab, chains: dict[str, Chain]) -> None:
    """Scenario 1: the emulated 82574L and SAS 2108 as hwmgr sees them, then upgrade to 3.8.7."""
    a = chains["a"]

    def run() -> Boot:
        a.vm = lab.vm("a")
        a.hold(lab)
        record = a.data["rollout"] = rollout.Record(lab.run_dir)
        a.data["rollout_id"] = record.start()
        assert record.claim(rollout.CANARY) == [rollout.CANARY], record.transcript()
        return a.vm.boot("rec inventory hwmgr inventory --json\n" + TRUST_STORY +
                         step_upgrade(V1) + "\nrec upgrade-steps hwmgr history e1000e "
                         "--steps --json",
                         timeout=BUILD_BOOT, slot=False, smp=lab.smp_alone)

    b = guarded(a, run)
    a.data["boot1"] = b
    if b.rc_of("upgrade") == 0:  # 3.8.7 armed, not yet booted: chain g builds beside a#2
        start_forks(lab, chains, "a1", a.vm)  # the kernel gate's chain g
    inv = b.ok("inventory")["data"]
    kver = inv["host"]["kernel"]
    assert kver.startswith(KVER_GLOB) and kver == b.boot_facts["kernel"]
    devs = {(d["vendor_id"], d["device_id"]): d for d in inv["devices"]}
    nic, raid = devs[("8086", "10d3")], devs[("1000", "0079")]
    # in-tree e1000e: no module version, so ethtool's kernel release is the version
    assert (nic["driver"], nic["driver_version"], nic["interfaces"]) == ("e1000e", kver, ["eth0"])
    assert nic["catalog"]["entry"] == "e1000e" and nic["catalog"]["in_tree"] is True
    assert nic["catalog"]["recommended_version"] == "3.8.8_lab"
    facts_raid = b.boot_facts["modules"]["megaraid_sas"]
    assert raid["driver"] == "megaraid_sas" and raid["driver_version"] == facts_raid["sys_version"]
    assert (raid["subsystem_vendor_id"], raid["subsystem_device_id"]) == ("1000", "9261")
    assert raid["catalog"]["status"] == "ok" and raid["catalog"]["match"] == "subsystem"
    assert raid["scsi_hosts"] and b.boot_facts["scsi_hosts"][raid["scsi_hosts"][0]] == \
        "megaraid_sas"
    assert_inbox(versions(b, boot_time=True), kver, "a#1 before the upgrade")
    a.data["kver"] = kver


@pytest.mark.timeout(60)
def test_1b_site_trusts_the_obtained_srpm(lab: Lab, chains: dict[str, Chain]) -> None:
    """No checksum → plan refuses; `catalog trust` of the obtained SRPM records it and keeps
    the verified file in the cache (docs/catalog.md, the whole path offline); plan passes; the
    upgrade's fetch is served from that cache, never from the vendor host (which never
    resolves in the guest). Its reboot and verify are scenario 2."""
    b = chains["a"].data.get("boot1")
    assert b is not None, "scenario 1 did not boot"
    refused = b.json("refused.out") or {}
    assert b.rc_of("refused") == 9, refused
    assert "is not verified (no known sha256/size)" in str(refused.get("errors")), refused
    pkg = b.ok("trust")["data"]["package"]
    srpm = lab.srpms[V1].read_bytes()
    assert (pkg["name"], pkg["version"], pkg["sha256"], pkg["size"]) == \
        ("e1000e", V1, hashlib.sha256(srpm).hexdigest(), len(srpm)), pkg
    assert b.ok("plan")["data"]["to_version"] == V1
    txn = b.ok("upgrade")["data"]["transaction"]
    (steps,) = [t["steps"] for t in b.ok("upgrade-steps")["data"]["transactions"]
                if t["id"] == txn["id"]]
    fetch = steps[0]
    assert fetch["name"] == "fetch" and fetch["data"]["origin"] == "cache", fetch
    assert fetch["data"]["sha256"] == pkg["sha256"], fetch


@pytest.mark.timeout(BUILD_BOOT + APPLY_TIME + 300)
def test_2_upgrade_reboot_verify(lab: Lab, chains: dict[str, Chain]) -> None:
    """Scenario 2: upgrade → reboot → boot-time verify passes (versions and throughput);
    then this boot applies the site's settings (scenario 7) and upgrades to 3.8.8."""
    a = chains["a"]
    b1 = a.data.get("boot1")
    assert b1 is not None, "scenario 1 did not boot"
    guarded(a, lambda: assert_upgraded(b1, V1))

    def power_cut() -> None:
        d = chains["d"]
        try:
            d.vm = lab.vm("d", fork_of=a.vm, power_cut=True)
            d.start(PLAN_D)
        except Exception as exc:  # noqa: BLE001 - scenario 6 reports it
            d.broken = f"the power cut failed: {exc}"

    def on_line(line: str) -> None:
        if DKMS_INSTALL in line and chains["d"].vm is None and wanted("d"):
            threading.Timer(CUT_DELAY, power_cut).start()

    base = rollout.baseline(a.data["rollout_id"])  # the canary, before its change
    b = guarded(a, lambda: a.vm.boot(base + APPLY + UPGRADE_WATCHED,
                                     timeout=BUILD_BOOT + APPLY_TIME, slot=False,
                                     on_line=on_line))
    a.data["boot2"] = b
    if b.rc_of("upgrade") == 0:  # 3.8.8 armed, not yet booted: chain c starts here
        if wanted("c"):
            chains["c"].vm = lab.vm("c", fork_of=a.vm)
            chains["c"].start(PLAN_C)
        start_forks(lab, chains, "a2", a.vm)  # the kernel gate's chain h
    assert_vendor(versions(b, boot_time=True), V1, "a#2 after reboot")
    exp = expectation(b)
    assert exp["expected_version"] == V1 and exp["kind"] == "upgrade"
    assert exp["status"] == "verified" and exp["action"] == "marked-verified", exp["findings"]
    assert b.rc_of("boot-verify") == 0
    fields = {(c["field"], c["result"]) for c in exp["checks"]}
    assert {("version", "ok"), ("driver", "ok"), ("loaded", "ok")} <= fields
    mbps = throughput_mbps(exp)
    assert mbps >= FLOOR_MBPS
    a.data["throughput"] = mbps


def _next_batch(lab: Lab, chains: dict[str, Chain], a3: Boot) -> None:
    """The control node after the canary's gate: mark it, and start the second guest when
    the record hands it out (tests/lab/test_rollout.py asserts what happened)."""
    a = chains["a"]
    record: rollout.Record = a.data["rollout"]
    passed = a3.rc_of("gate") == 0
    record.mark(rollout.CANARY, "done" if passed else "failed",
                (a3.json("gate.out") or {}).get("data"))
    if passed and wanted("b") and record.claim(rollout.SECOND) == [rollout.SECOND]:
        b = chains["b"]
        b.vm = lab.vm("b", on_failure="report")  # the lab image again, booted fresh
        b.start(rollout.second_plan(a.data["rollout_id"], b.vm.iperf_port))


@pytest.mark.timeout(900 + storage.BUILD_BOOT)  # boot 5 carries the storage upgrade
def test_3_upgrade_again_then_rollback_twice(lab: Lab, chains: dict[str, Chain]) -> None:
    """Scenario 3: 3.8.8 verified; rollback → 3.8.7 is back; rollback --to inbox → in-tree."""
    a = chains["a"]
    b2 = a.data.get("boot2")
    assert b2 is not None, "scenario 2 did not boot"
    guarded(a, lambda: assert_upgraded(b2, V2))
    kver = a.data["kver"]

    try:
        _rollbacks(lab, a, chains, kver)
    finally:
        a.release()  # chain a is done: its slot goes to the background chains


def _rollbacks(lab: Lab, a: Chain, chains: dict[str, Chain], kver: str) -> None:
    gate = rollout.gate(a.data["rollout_id"], a.vm.iperf_port)  # the canary's gate first
    b3 = guarded(a, lambda: a.vm.boot(gate + CHECK_BOOT + "rec rollback hwmgr rollback e1000e "
                                      "--yes --json\nreboot_after", slot=False))
    a.data["boot3"] = b3
    _next_batch(lab, chains, b3)
    assert_vendor(versions(b3, boot_time=True), V2, "a#3 after reboot")
    gate = b3.ok("gate")["data"]  # the rollout's canary gate (tests/lab/test_rollout.py)
    assert gate["passed"] and gate["failed_steps"] == [], gate
    exp = expectation(b3)
    assert (exp["expected_version"], exp["status"]) == (V2, "verified"), exp["findings"]
    rb = b3.ok("rollback")["data"]
    assert rb["plan"]["to_version"] == V1 and rb["transaction"]["state"] == "committed"

    b4 = guarded(a, lambda: a.vm.boot(
        CHECK_BOOT + REVERT + "rec rollback hwmgr rollback e1000e --to inbox --yes --json\n"
        "reboot_after",
        slot=False))
    a.data["boot4"] = b4
    # the previous *vendor* version is back, not the inbox driver
    assert_vendor(versions(b4, boot_time=True), V1, "a#4 after the first rollback")
    exp = expectation(b4)
    assert (exp["kind"], exp["expected_version"], exp["status"]) == ("rollback", V1, "verified")
    rb = b4.ok("rollback")["data"]
    assert rb["plan"]["to_version"] == "inbox" and rb["transaction"]["state"] == "committed"

    # the storage scenario's first step rides on this boot (lab/storage.py): the SAS 2108
    # gets its data disk and the guest boots its own initramfs from here on
    step5, timeout5 = "", 600.0
    if storage.enabled():
        a.vm.attach_storage()
        step5, timeout5 = "\n" + storage.UPGRADE, float(storage.BUILD_BOOT)
    b5 = guarded(a, lambda: a.vm.boot(f"rec check-after {CHECK}\n" + GUARD +
                                      "rec history hwmgr history e1000e --json\n"
                                      "rec history-all hwmgr history --json\n"
                                      "show hwmgr history e1000e" + step5,
                                      slot=False, timeout=timeout5))
    a.data["boot5"] = b5
    if storage.enabled() and b5.rc_of("upgrade") == 0:  # its next two boots, in the background
        s = chains["s"]
        s.vm = a.vm
        s.start(storage.PLAN)
    assert_inbox(versions(b5, boot_time=True), kver, "a#5 after rollback to inbox")
    exp = expectation(b5)
    assert exp["kind"] == "rollback" and exp["status"] == "verified", exp["findings"]
    assert not b5.boot_facts["dkms_status"], "DKMS still lists e1000e after rollback to inbox"
    story = [(t["kind"], t["version"], t["state"])
             for t in reversed(b5.ok("history")["data"]["transactions"])]
    assert story == [("upgrade", V1, "committed"), ("upgrade", V2, "committed"),
                     ("rollback", V1, "committed"), ("rollback", "inbox", "committed")]


# ----------------------------------------------------------------------------- chain c
@pytest.mark.timeout(WAIT)
def test_5_throughput_floor_rolls_back_once(lab: Lab, chains: dict[str, Chain]) -> None:
    """Scenario 5: link shaped below the floor → verify fails on throughput → one rollback."""
    c = chains["c"]
    b1 = c.wait(1)
    assert_vendor(versions(b1, boot_time=True), V2, "c#1 shaped boot")
    exp = expectation(b1)
    assert (exp["expected_version"], exp["status"], exp["action"]) == \
        (V2, "failed", "rolled-back"), exp
    failed = [f for f in exp["findings"] if f["result"] == "fail"]
    assert failed and all(f["field"].startswith("throughput") for f in failed), failed
    assert throughput_mbps(exp) < FLOOR_MBPS
    assert b1.reboot_requested

    # still shaped: the restored 3.8.7 fails too, but there is no second automatic rollback
    b2 = c.wait(2)
    assert_vendor(versions(b2, boot_time=True), V1, "c#2 after the automatic rollback")
    exp = expectation(b2)
    assert (exp["kind"], exp["expected_version"], exp["status"]) == ("rollback", V1, "failed")
    assert exp["action"] == "reported" and "no automatic rollback" in exp["action_detail"]
    assert not b2.reboot_requested
    # the shaping removed, the same command passes: the link was the problem, not 3.8.7
    again = b2.ok("verify")["data"]["expectations"][0]
    assert again["status"] == "verified" and throughput_mbps(again) >= FLOOR_MBPS
    story = [(t["kind"], t["version"], t["state"])
             for t in reversed(b2.ok("history")["data"]["transactions"])]
    assert story == [("upgrade", V1, "committed"), ("upgrade", V2, "committed"),
                     ("rollback", V1, "committed")]


@pytest.mark.timeout(WAIT)
def test_6_power_cut_during_dkms_install(lab: Lab, chains: dict[str, Chain]) -> None:
    """Scenario 6: power cut during `dkms install` of 3.8.8 → `hwmgr recover` → old or new."""
    c = chains["d"]
    a2 = chains["a"].data.get("boot2")
    assert a2 is not None and a2.console(DKMS_INSTALL), "a#2 never reached dkms install"
    c.need()
    b1 = c.wait(1)
    assert c.vm.history[-1].startswith("power cut: a's disk during its boot 2"), c.vm.history
    # what the power cut left: the 3.8.8 upgrade still running, stopped in its install step
    before = [t for t in b1.ok("before")["data"]["transactions"] if t["version"] == V2]
    assert len(before) == 1 and before[0]["state"] == "running", before
    unfinished = [s["name"] for s in before[0]["steps"] if s["state"] != "done"]
    assert unfinished[0] == "install", before[0]["steps"]
    rec = b1.ok("recover")["data"]
    assert len(rec) == 1 and (rec[0]["kind"], rec[0]["target"]) == ("upgrade", "e1000e"), rec
    assert rec[0]["error"] == "interrupted at step 'install'" and rec[0]["recovered"], rec
    state = rec[0]["state"]
    assert state in ("committed", "rolled-back"), rec

    b2 = c.wait(2)
    v = versions(b2, boot_time=True)
    dkms = b2.boot_facts["dkms_status"]
    exp = b2.ok("verify")["data"]["expectations"][0]  # verified by hand after the boot
    if state == "committed":  # rolled forward: the new driver, armed, verified at boot
        assert_vendor(v, V2, "d#2 after recover (rolled forward)")
        assert (exp["expected_version"], exp["status"]) == (V2, "verified"), exp["findings"]
        assert expectation(b2)["status"] == "verified"
        assert any(f"e1000e/{V2}" in ln and "installed" in ln for ln in dkms), dkms
    else:  # undone: exactly 3.8.7 as before the upgrade (armed and verified then)
        assert_vendor(v, V1, "d#2 after recover (rolled back)")
        assert (exp["expected_version"], exp["status"]) == (V1, "verified"), exp["findings"]
        assert b2.rc_of("boot-verify") == 4, b2.text("boot-verify.json")  # nothing new armed
        assert any(f"e1000e/{V1}" in ln and "installed" in ln for ln in dkms), dkms
        assert not any(V2 in ln for ln in dkms), dkms
    assert "eth0" in b2.boot_facts["ethtool"]
    story = [(t["kind"], t["version"], t["state"])
             for t in reversed(b2.ok("history")["data"]["transactions"])]
    assert story == [("upgrade", V1, "committed"), ("upgrade", V2, state)]


# --------------------------------------------------------------------------- chain a, issues 12, 27
ETH0_LINK = "/etc/systemd/network/10-hwmgr-eth0.link"
ETH1_STANZA = "/etc/network/interfaces.d/eth1"
ETH0_APPLIED = {"ring": ("1024", "1024"), "txqueuelen": "10000", "gro": "off",
                "tso": ("off", "off"), "link_file": ETH0_LINK}
ETH1_APPLIED = {"ring": ("2048", "2048"), "pause": ("on", "on"), "channels": "2",
                "txqueuelen": "5000"}


def assert_persisted_by_their_consumers(b: Boot, where: str) -> None:
    """After a reboot, before hwmgr touched anything: eth0's values are what udev applied from
    hwmgr's .link file (ID_NET_LINK_FILE), eth1's what ifup@eth1 ran from the post-up lines of
    its stanza (udev chose only the default .link for it, and no udev rule of ours exists)."""
    facts = b.boot_facts
    eth0, eth1 = nic_settings(facts, "eth0"), nic_settings(facts, "eth1")
    assert {k: eth0[k] for k in ETH0_APPLIED} == ETH0_APPLIED, (where, eth0)
    assert {k: eth1[k] for k in ETH1_APPLIED} == ETH1_APPLIED, (where, eth1)
    assert (eth1["link_file"] or "").endswith("/99-default.link"), (where, eth1)
    assert not [f for f in facts["files"] if "hwmgr" in f and "eth1" in f], (where, facts["files"])
    ifu = facts["ifupdown"]
    assert "eth1=eth1" in (ifu["state"] or []) and "eth0=eth0" not in ifu["state"], (where, ifu)
    unit = ifu["ifaces"]["eth1"]["unit"]  # its ifup has run and exited 0
    assert (unit.get("SubState"), unit.get("Result")) == ("exited", "success"), (where, ifu)
    assert set(ifu["ifaces"]["eth1"]["up"]) == ETH1_POST_UP, (where, ifu)
    assert facts["sysctl"]["net.core.rmem_max"] == "4194304", (where, facts["sysctl"])
    assert b.ok("check-boot")["data"]["compliant"] is True, (where, b.text("check-boot.out"))


@pytest.mark.timeout(60)
def test_7_settings_apply_reboot_revert(lab: Lab, chains: dict[str, Chain]) -> None:
    """Issues 12 and 27 on chain a's boots 2-5, two persistence backends: apply (eth0 → .link,
    eth1 → ifupdown post-up, sysctls → sysctl.d) + upgrade 3.8.8 → reboot → compliant from
    udev, ifup and systemd-sysctl alone → rollback (a driver change) → reboot → still
    compliant → revert → reboot → every value and every file as before the apply."""
    a = chains["a"]
    b2, b3, b4, b5 = (a.data.get(f"boot{n}") for n in (2, 3, 4, 5))
    assert b2 and b3 and b4 and b5, "chain a did not reach boot 5 (see scenarios 2 and 3)"
    before = {i: nic_settings(b2.boot_facts, i) for i in ("eth0", "eth1")}
    assert before["eth0"]["ring"] == ("256", "256") and before["eth1"]["channels"] == "4"
    # ifupdown's hotplug brought eth1 up (its stanza has no post-up line yet); eth0 untouched
    ifu = b2.boot_facts["ifupdown"]
    assert "eth1=eth1" in (ifu["state"] or []) and "eth0=eth0" not in ifu["state"], ifu
    assert ifu["ifaces"]["eth1"]["up"] == [], ifu
    want = {("eth0", "features.generic-receive-offload"),
            ("eth0", "features.tcp-segmentation-offload"), ("eth0", "ring.rx"),
            ("eth0", "ring.tx"), ("eth0", "txqueuelen"), ("eth1", "channels.combined"),
            ("eth1", "pause.rx"), ("eth1", "pause.tx"), ("eth1", "ring.rx"),
            ("eth1", "ring.tx"), ("eth1", "txqueuelen"), (None, "sysctl.net.core.rmem_max"),
            (None, "sysctl.net.core.wmem_max")}
    assert b2.rc_of("check-before") == 5 and drifted(b2.json("check-before.out")) == want
    plan = b2.ok("apply-plan")["data"]
    assert {(c["interface"], c["item"]) for c in plan["changes"]} == want
    backends = {(c["interface"], c["persist"].get("backend"), c["persist"].get("file"))
                for c in plan["changes"]}
    assert backends == {("eth0", "systemd-link", ETH0_LINK), ("eth1", "ifupdown", ETH1_STANZA),
                        (None, "sysctl.d", "/etc/sysctl.d/90-hwmgr.conf")}, plan["changes"]
    assert b2.ok("apply")["data"]["transaction"]["state"] == "committed"
    assert b2.ok("check-applied")["data"]["compliant"] is True
    assert_upgraded(b2, V2)  # the driver change comes after the apply, on the same boot

    # after the upgrade's reboot (3.8.8 live), then after the rollback's (3.8.7 live): udev,
    # ifup@eth1 and systemd-sysctl made it so, hwmgr did nothing yet on either boot
    assert_vendor(versions(b3, boot_time=True), V2, "a#3 settings after the upgrade")
    assert_persisted_by_their_consumers(b3, "a#3 after the upgrade to 3.8.8 and its reboot")
    assert_vendor(versions(b4, boot_time=True), V1, "a#4 settings after the rollback")
    assert_persisted_by_their_consumers(b4, "a#4 after the rollback to 3.8.7 and its reboot")
    revert = b4.ok("revert")["data"]
    assert revert["transaction"]["state"] == "committed"
    assert b4.rc_of("check-reverted") == 5
    assert drifted(b4.json("check-reverted.out")) == want

    # after the next reboot: exactly the original values, every persistence file (the .link
    # and sysctl.d dirs, /etc/network/interfaces*, the udev rules) byte for byte as it was
    assert {i: nic_settings(b5.boot_facts, i) for i in ("eth0", "eth1")} == before
    assert b5.boot_facts["sysctl"] == b2.boot_facts["sysctl"]
    assert b5.boot_facts["files"] == b2.boot_facts["files"]
    assert ETH1_STANZA in b5.boot_facts["files"] and ETH0_LINK not in b5.boot_facts["files"]
    assert b5.boot_facts["ifupdown"]["ifaces"]["eth1"]["up"] == [], b5.boot_facts["ifupdown"]
    assert drifted(b5.json("check-after.out")) == want
    guard = b5.json("guard.out") or {}
    assert b5.rc_of("guard") == 9, guard
    assert "eth1 carries the default route via bond0.7" in str(guard.get("errors")), guard
    kinds = [(t["kind"], t["state"]) for t in
             reversed(b5.ok("history-all")["data"]["transactions"])
             if t["kind"] in ("apply", "revert")]
    assert kinds == [("apply", "committed"), ("revert", "committed")], kinds
