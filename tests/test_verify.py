"""`hwmgr verify`: snapshots (seed 000 after/before its be2net upgrade), the live host's state
dir (boot counter, verified mark, at-most-once rollback), a real DKMS upgrade that fails
verification and is rolled back with the reboot command run, and `--throughput` over a veth
pair keeping the before/after pair in history. Also the systemd unit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, run_cli

from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_REBOOT_PENDING,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    BadInputError,
)
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.transaction.state import StateDir
from hwmgr.verify.checks import as_expectation

VFX = REPO / "tests" / "fixtures" / "verify"
AFTER, BEFORE = VFX / "be3-after", VFX / "be3-before"
EXPECT = VFX / "be2net-expectation.json"
EMPTY_CONFIG = VFX / "empty-config.json"
NEW, OLD = ("10.2.470.14", "5A1B3C9E2D7F40816C2E9AB"), ("4.1.307r", "7076CA6C80C3CD968BAFFFC")


def verify(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    full = {"HWMGR_CONFIG": str(EMPTY_CONFIG), "SSH_CONNECTION": "", **(env or {})}
    res = run_cli("verify", *args, "--json", env=full)
    try:
        doc = json.loads(res.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"not JSON: {res.stdout!r} {res.stderr!r}") from exc
    assert "Traceback" not in res.stderr
    return res.returncode, doc


def findings(doc: dict) -> set[tuple]:
    (exp,) = doc["data"]["expectations"]
    def h(v: object) -> object:
        return tuple(v) if isinstance(v, list) else v

    return {(f["device"], f["field"], h(f["expected"]), h(f["actual"]), f["result"])
            for f in exp["findings"]}


# ------------------------------------------------------------------------------ snapshots
def test_armed_state_verifies_on_the_after_snapshot() -> None:
    rc, doc = verify("--root", str(AFTER), "--expectation", str(EXPECT))
    assert rc == EXIT_OK and doc["status"] == "verified", doc
    (exp,) = doc["data"]["expectations"]
    assert exp["findings"] == [] and exp["action"] == "none"
    got = {(c["device"], c["field"]): c["actual"] for c in exp["checks"]}
    assert got[("module be2net", "version")] == NEW[0]
    assert got[("module be2net", "srcversion")] == NEW[1]
    assert got[("eth2", "version")] == NEW[0] and got[("eth2", "speed_mbps")] == 10000
    assert got[("0000:02:00.0", "driver")] == "be2net"


def test_old_version_snapshot_fails_with_the_right_findings() -> None:
    rc, doc = verify("--root", str(BEFORE), "--expectation", str(EXPECT))
    assert rc == EXIT_FAILED and doc["status"] == "failed"
    assert findings(doc) == {
        ("module be2net", "version", NEW[0], OLD[0], "fail"),
        ("module be2net", "srcversion", NEW[1], OLD[1], "fail"),
        ("eth2", "version", NEW[0], OLD[0], "fail"),
        ("eth3", "version", NEW[0], OLD[0], "fail"),
    }
    assert any("eth2 version: expected 10.2.470.14, actual 4.1.307r (ethtool -i eth2)" in e
               for e in doc["errors"])


def _with_state(tmp_path: Path, snap: Path) -> Path:
    root = tmp_path / snap.name
    shutil.copytree(snap, root, symlinks=True)
    exp_dir = root / "var/lib/hwmgr/expectations"
    exp_dir.mkdir(parents=True)
    shutil.copy(EXPECT, exp_dir / "be2net.json")
    meta = json.loads((root / "snapshot.json").read_text())  # it carries its state dir
    meta["records"] = [*meta.get("records", []), "state"]
    (root / "snapshot.json").write_text(json.dumps(meta))
    return root


def test_expectation_armed_inside_the_snapshot(tmp_path: Path) -> None:
    root = _with_state(tmp_path, AFTER)
    armed = root / "var/lib/hwmgr/expectations/be2net.json"
    before = armed.read_bytes()
    rc, doc = verify("--root", str(root), env={"HWMGR_STATE_DIR": ""})
    assert rc == EXIT_OK and doc["status"] == "verified", doc
    assert armed.read_bytes() == before  # a snapshot is never written
    rc, doc = verify("ixgbe", "--root", str(root), env={"HWMGR_STATE_DIR": ""})
    assert rc == EXIT_NOTHING_TO_DO and doc["status"] == "nothing-armed"
    (root / "var/lib/hwmgr/expectations/be2net.json").unlink()
    rc, doc = verify("--root", str(root), env={"HWMGR_STATE_DIR": ""})
    assert rc == EXIT_NOTHING_TO_DO and "no expectation is armed" in doc["data"]["notes"][0]
    # a snapshot that does not carry its state dir cannot say "nothing armed": one line
    rc, doc = verify("--root", str(AFTER), env={"HWMGR_STATE_DIR": ""})
    assert rc == EXIT_NOT_FOUND and doc["errors"] == [
        "verify --root: this snapshot carries no hwmgr journal or armed expectations; retake "
        "it with `hwmgr snapshot` ≥ 0.2.0 as root while no transaction holds the state dir "
        "(it copies it then), or run `hwmgr verify` on the host"]


def _damage(root: Path, case: str) -> None:
    if case == "srcversion-unreadable":
        (root / "sys/module/be2net/srcversion").unlink()
    elif case == "link-down":
        (root / "sys/class/net/eth2/operstate").write_text("down\n")
    elif case == "slower-link":
        (root / "sys/class/net/eth2/speed").write_text("1000\n")
    elif case == "other-driver":
        link = root / "sys/bus/pci/devices/0000:02:00.1/driver"
        link.unlink()
        link.symlink_to("../../../bus/pci/drivers/ixgbe")
    elif case == "function-gone":
        shutil.rmtree(root / "sys/bus/pci/devices/0000:02:00.1")
    elif case == "renamed-interface":
        net = root / "sys/bus/pci/devices/0000:02:00.0/net"
        (net / "eth2").rename(net / "ens1f0")
    elif case == "no-ethtool-recorded":
        (root / "commands/index.json").write_text("[]")


@pytest.mark.parametrize("case,rc,expected", [
    ("srcversion-unreadable", EXIT_UNKNOWN,
     ("module be2net", "srcversion", NEW[1], None, "unknown")),
    ("link-down", EXIT_FAILED, ("eth2", "link", "up", "down", "fail")),
    ("slower-link", EXIT_FAILED, ("eth2", "speed_mbps", 10000, 1000, "fail")),
    ("other-driver", EXIT_FAILED, ("0000:02:00.1", "driver", "be2net", "ixgbe", "fail")),
    ("function-gone", EXIT_FAILED, ("0000:02:00.1", "present", True, False, "fail")),
    ("renamed-interface", EXIT_FAILED, ("eth2", "interface", "0000:02:00.0", None, "fail")),
    ("no-ethtool-recorded", EXIT_UNKNOWN, ("eth2", "ethtool", "driver info", None, "unknown")),
])
def test_damaged_after_snapshot(tmp_path: Path, case: str, rc: int, expected: tuple) -> None:
    root = tmp_path / "snap"
    shutil.copytree(AFTER, root, symlinks=True)
    _damage(root, case)
    got_rc, doc = verify("--root", str(root), "--expectation", str(EXPECT))
    assert got_rc == rc, doc
    assert expected in findings(doc)


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not valid JSON"),
    ('{"format": "hwmgr-expectation", "version": 2}', "version 2 is not supported"),
    ('{"format": "hwmgr-expectation", "version": 1, "driver": "x", "modules": []}',
     "'modules' must be"),
])
def test_bad_expectation_is_one_line(tmp_path: Path, content: str, needle: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    res = run_cli("verify", "--root", str(AFTER), "--expectation", str(bad),
                  env={"HWMGR_CONFIG": str(EMPTY_CONFIG)})
    assert res.returncode == EXIT_BAD_INPUT
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_an_expectation_handed_in_is_checked_and_kept_as_is() -> None:
    """`Verifier.run` types what it is handed with `as_expectation`: the same dict (verify
    writes its marks into it and writes it back), or one line naming the bad field."""
    doc = json.loads(EXPECT.read_text())
    assert as_expectation(doc, "e.json") is doc
    with pytest.raises(BadInputError, match=r"^e\.json: txn: expected an integer"):
        as_expectation({**doc, "txn": "7"}, "e.json")


@pytest.mark.parametrize("config,needle", [
    ({"on_falure": "rollback"}, "unknown key 'on_falure'"),
    ({"on_failure": "reboot"}, "'on_failure' must be one of report, rollback"),
    ({"reboot_command": "systemctl reboot"}, "'reboot_command' must be a non-empty list"),
    ({"build_timeout_seconds": 5},
     "'build_timeout_seconds' must be a number of seconds between 60 and 86400"),
])
def test_bad_config_is_one_line(tmp_path: Path, config: dict, needle: str) -> None:
    cfg = tmp_path / "hwmgr.json"
    cfg.write_text(json.dumps(config))
    res = run_cli("verify", "--root", str(AFTER), "--expectation", str(EXPECT),
                  env={"HWMGR_CONFIG": str(cfg)})
    assert res.returncode == EXIT_BAD_INPUT and needle in res.stderr and str(cfg) in res.stderr


def test_no_rollback_or_throughput_on_a_snapshot() -> None:
    for flag in (["--on-failure", "rollback"], ["--throughput"]):
        rc, doc = verify("--root", str(BEFORE), "--expectation", str(EXPECT), *flag)
        assert rc == EXIT_USAGE and "live host" in doc["errors"][0]


# ------------------------------------------------------------------------------ live state dir
def _arm(state: Path, driver: str, modules: list[str], **extra: object) -> Path:
    doc = {"format": "hwmgr-expectation", "version": 1, "driver": driver,
           "expected_version": "inbox", "modules": modules, "txn": None, "kind": "upgrade",
           "kernels": {}, "devices": [], "boot_attempts": 0, **extra}
    path = state / "expectations" / f"{driver}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def live(tmp_path: Path) -> dict[str, str]:
    cfg = tmp_path / "hwmgr.json"
    cfg.write_text(json.dumps({"reboot_command": ["touch", str(tmp_path / "rebooted")],
                               "link_wait_seconds": 0}))
    return {"HWMGR_STATE_DIR": str(tmp_path / "state"), "HWMGR_CONFIG": str(cfg)}


def test_live_pass_marks_verified_and_boot_skips_it(tmp_path: Path, live: dict) -> None:
    # /sys/module/kernel exists on every Linux: a real, always-true expectation
    path = _arm(tmp_path / "state", "kernel", ["kernel"])
    rc, doc = verify("--boot", env=live)
    assert rc == EXIT_OK and doc["data"]["expectations"][0]["action"] == "marked-verified"
    saved = json.loads(path.read_text())
    assert saved["verified"]["kernel"] == os.uname().release and saved["boot_attempts"] == 1
    rc, doc = verify("--boot", env=live)
    assert rc == EXIT_NOTHING_TO_DO and "already verified" in doc["data"]["notes"][0]
    rc, doc = verify(env=live)  # by hand: still checked, not counted
    assert rc == EXIT_OK and json.loads(path.read_text())["boot_attempts"] == 1


def test_live_failure_rolls_back_at_most_once(tmp_path: Path, live: dict) -> None:
    path = _arm(tmp_path / "state", "hwmgrgone", ["hwmgr_no_such_module"],
                expected_version="1.0")
    rc, doc = verify("--boot", "--on-failure", "rollback", env=live)
    assert rc == EXIT_FAILED
    assert ("module hwmgr_no_such_module", "loaded", True, False, "fail") in findings(doc)
    exp = doc["data"]["expectations"][0]
    assert exp["action"] == "rollback-failed"  # no upgrade recorded: nothing to restore
    assert "no hwmgr upgrade of hwmgrgone is recorded" in exp["action_detail"]
    saved = json.loads(path.read_text())
    assert saved["auto_rollback"]["started"] and saved["boot_attempts"] == 1
    rc, doc = verify("--boot", "--on-failure", "rollback", env=live)
    exp = doc["data"]["expectations"][0]
    assert rc == EXIT_FAILED and exp["action"] == "reported" and exp["boot_attempts"] == 2
    assert "already attempted" in exp["action_detail"]
    assert not (tmp_path / "rebooted").exists()


# ------------------------------------------------------------------------------ real rollback
VMOD = "hwmgrvfy"  # not hwmgrtest: test_lifecycle may be using that one at the same time


def _dkms_clean(kver: str) -> None:
    subprocess.run(["dkms", "remove", "-m", VMOD, "--all"], capture_output=True, check=False)
    for p in Path("/usr/src").glob(f"{VMOD}-*"):
        shutil.rmtree(p, ignore_errors=True)
    for p in Path(f"/lib/modules/{kver}").rglob(f"{VMOD}.ko*"):
        p.unlink()
    shutil.rmtree(f"/var/lib/dkms/{VMOD}", ignore_errors=True)
    subprocess.run(["depmod", "-a", kver], capture_output=True, check=False)


@pytest.fixture
def vbed(tmp_path: Path, live: dict):
    from support.lifecycle_env import headers_kernel, serve, write_catalog
    from support.srpmfactory import build_srpm

    if os.geteuid() != 0 or shutil.which("dkms") is None:
        pytest.skip("needs root and dkms")
    kver = headers_kernel()
    assert kver, "linux-headers-amd64 must be installed (make test installs it)"
    served = tmp_path / "served"
    srpms = {"1.0": build_srpm(VMOD, "1.0", served)}
    srv, url = serve(served)
    cat = write_catalog(tmp_path / "catalog.json", url, srpms)
    doc = json.loads(cat.read_text())
    doc["drivers"] = {VMOD: doc["drivers"].popitem()[1]}
    cat.write_text(json.dumps(doc))
    drivers = tmp_path / "drivers" / VMOD
    drivers.mkdir(parents=True)
    for src in (REPO / "drivers/hwmgrtest").iterdir():
        if src.is_file():
            (drivers / src.name).write_text(src.read_text().replace("hwmgrtest", VMOD))
    env = {**live, "HWMGR_CACHE_DIR": str(tmp_path / "cache"),
           "HWMGR_DRIVERS_DIR": str(tmp_path / "drivers"),
           "HWMGR_SIGN_KEY": str(tmp_path / "mok.key"),
           "HWMGR_SIGN_CERT": str(tmp_path / "mok.pub")}
    _dkms_clean(kver)
    try:
        yield {"env": env, "kver": kver, "catalog": cat}
    finally:
        srv.shutdown()
        _dkms_clean(kver)


@pytest.mark.slow  # iperf3 / a real rollback
def test_failed_verification_really_rolls_back_and_reboots(tmp_path: Path, vbed: dict) -> None:
    env, kver = vbed["env"], vbed["kver"]
    res = run_cli("upgrade", VMOD, "--to", "1.0", "--kernel", kver, "--yes", "--catalog",
                  str(vbed["catalog"]), env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    ko = list(Path(f"/lib/modules/{kver}").rglob(f"{VMOD}.ko*"))
    assert ko, "the upgrade installed the module"
    # before the reboot the old module is live: verify knows it from the journal and the
    # boot id, reports reboot pending and changes nothing (no boot count, no rollback)
    armed = tmp_path / "state/expectations" / f"{VMOD}.json"
    armed_bytes = armed.read_bytes()
    rc, doc = verify("--boot", "--on-failure", "rollback", env=env)
    assert rc == EXIT_REBOOT_PENDING, doc
    (exp,) = doc["data"]["expectations"]
    assert exp["status"] == "reboot-pending" and exp["action"] == "none" and not exp["checks"]
    assert "committed during this boot" in exp["action_detail"]
    assert armed.read_bytes() == armed_bytes and doc["data"]["reboot"] is None
    assert list(Path(f"/lib/modules/{kver}").rglob(f"{VMOD}.ko*")) == ko
    state = StateDir(Host("/", SubprocessRunner()), env["HWMGR_STATE_DIR"])
    upgrade_txn = json.loads(armed_bytes)["txn"]
    assert "verify" not in state.read_journal().get(upgrade_txn)["results"]
    # the reboot: the boot the upgrade committed in is now an earlier one
    with state.lock(command="test"):
        state.journal().add_notes(upgrade_txn, boot_id="00000000-0000-4000-8000-000000000000")
    state.close()
    # after the "reboot" the module is not loaded: verification fails → rollback → reboot.
    # Like `systemctl reboot` under systemd, the reboot command SIGTERMs hwmgr at once: the
    # report must still come out whole, with the rollback's real exit code.
    cfg = Path(env["HWMGR_CONFIG"])
    conf = json.loads(cfg.read_text())
    conf["reboot_command"] = ["sh", "-c", f"touch {tmp_path / 'rebooted'}; kill -TERM $PPID"]
    cfg.write_text(json.dumps(conf))
    rc, doc = verify("--on-failure", "rollback", env=env)
    assert rc == EXIT_FAILED
    exp = doc["data"]["expectations"][0]
    assert exp["action"] == "rolled-back", exp
    assert (f"module {VMOD}", "loaded", True, False, "fail") in findings(doc)
    assert (tmp_path / "rebooted").exists() and doc["data"]["reboot"]["ok"]
    assert not list(Path(f"/lib/modules/{kver}").rglob(f"{VMOD}.ko*"))
    rearmed = json.loads((tmp_path / "state/expectations" / f"{VMOD}.json").read_text())
    assert rearmed["kind"] == "rollback" and rearmed["auto_rollback_allowed"] is False
    hist = run_cli("history", VMOD, "--json", env=env)
    txns = {t["kind"]: t for t in json.loads(hist.stdout)["data"]["transactions"]}
    assert txns["upgrade"]["results"]["verify"]["status"] == "failed"
    assert txns["upgrade"]["results"]["auto_rollback"]["txn"] == txns["rollback"]["id"]
    # before that reboot the rollback is what waits for it
    rc, doc = verify("--boot", "--on-failure", "rollback", env=env)
    assert rc == EXIT_REBOOT_PENDING and doc["data"]["expectations"][0]["kind"] == "rollback"
    # next boot: the rolled-back state (no module at all) verifies; nothing loops
    (tmp_path / "rebooted").unlink()
    with state.lock(command="test"):
        state.journal().add_notes(txns["rollback"]["id"],
                                  boot_id="00000000-0000-4000-8000-000000000001")
    state.close()
    rc, doc = verify("--boot", "--on-failure", "rollback", env=env)
    assert rc in (EXIT_OK, EXIT_UNKNOWN), doc  # unknown when the running kernel differs
    assert doc["data"]["expectations"][0]["action"] != "rolled-back"
    assert not (tmp_path / "rebooted").exists()


# ------------------------------------------------------------------------------ --throughput
@pytest.mark.slow  # iperf3 / a real rollback
def test_verify_throughput_keeps_before_and_after(tmp_path: Path, live: dict) -> None:
    """Seed 000's story as data: slow before the 'upgrade' (tbf), fast after, both in history."""
    from support.netns import B_IP, VethLink

    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    link = VethLink.create("v")
    try:
        link.iperf3_server()
        env = {**live, "PYTHONPATH": str(REPO), "SSH_CONNECTION": ""}
        hw = [sys.executable, "-m", "hwmgr"]
        link.shape("100mbit")
        res = link.run_a([*hw, "throughput", "--peer", B_IP, "--floor", "500"], env=env)
        link.unshape()
        assert res.returncode == EXIT_FAILED, res.stderr
        live_host = Host("/", SubprocessRunner(), writable=[live["HWMGR_STATE_DIR"]])
        state = StateDir(live_host, live["HWMGR_STATE_DIR"])
        txn = state.journal().begin("upgrade", "vethdrv", {"version": "2.0"}, [])
        state.journal().set_txn(txn, state="committed")
        _arm(Path(live["HWMGR_STATE_DIR"]), "vethdrv", ["kernel"], txn=txn,
             devices=[{"address": "0000:00:00.0", "interfaces": [link.if_a]}])
        res = link.run_a([*hw, "verify", "--throughput", "--peer", B_IP, "--floor", "500",
                          "--json"], env=env)
        doc = json.loads(res.stdout)
        (exp,) = doc["data"]["expectations"]
        tp = {c["field"]: c for c in exp["checks"] if c["field"].startswith("throughput")}
        assert tp["throughput_send"]["result"] == "ok", tp
        before, after = exp["throughput"]["before"], exp["throughput"]["after"]
        assert before["send_mbps"] < 110 and after["send_mbps"] > 500
        results = state.read_journal().get(txn)["results"]
        assert results["throughput_before"]["send_mbps"] == before["send_mbps"]
        assert results["throughput_after"]["send_mbps"] == after["send_mbps"]
    finally:
        link.teardown()


# ------------------------------------------------------------------------------ systemd unit
def test_systemd_unit(tmp_path: Path) -> None:
    import configparser

    unit = REPO / "contrib/systemd/hwmgr-verify.service"
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str  # type: ignore[assignment]
    cp.read(unit)
    assert cp["Service"]["Type"] == "oneshot"
    assert "network-online.target" in cp["Unit"]["After"]
    assert "network-online.target" in cp["Unit"]["Wants"]
    assert cp["Unit"]["ConditionPathExistsGlob"] == "/var/lib/hwmgr/expectations/*.json"
    assert cp["Service"]["ExecStart"].split()[1:] == ["verify", "--boot"]
    if shutil.which("systemd-analyze"):
        copy = tmp_path / unit.name
        copy.write_text(unit.read_text().replace("/usr/bin/hwmgr", sys.executable))
        res = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                             text=True, check=False)
        assert res.returncode == 0, res.stderr
