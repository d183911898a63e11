"""The hwmgr.fleet Ansible collection, run by the real ansible-playbook on a generated fleet.

The collection is built and installed with ansible-galaxy into a temporary collections
path, and fleet-check.yml runs against 35 hosts on this machine (tests/support/ansible_fleet.py):
network namespaces reached locally and through our own sshd on 127.0.0.1, hosts without
Python (the POSIX collector), snapshot roots, a host without hwmgr, and unreachable hosts.
The report must hold every host with the status its construction implies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import ansible_fleet as af  # noqa: E402

pytestmark = [
    pytest.mark.slow,  # real ansible-playbook over network namespaces
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not (af.BIN / "ansible-playbook").exists(),
                       reason="ansible-core is not installed (pip install -e '.[dev]')"),
    pytest.mark.timeout(300),
]
PLAYBOOK = Path("ansible_collections/hwmgr/fleet/playbooks/fleet-check.yml")
CHECK_STATUS = {0: "compliant", 5: "drift", 7: "reboot-pending", 11: "unknown"}


def hwmgr_has(verb: str) -> bool:
    """Whether this tree's hwmgr has `verb` (check and apply are built on other branches)."""
    res = subprocess.run([sys.executable, "-m", "hwmgr", verb, "--help"], cwd=af.REPO,
                         capture_output=True, check=False)
    return res.returncode == 0


needs_check = pytest.mark.skipif(not hwmgr_has("check"), reason="hwmgr check not in this tree")
needs_apply = pytest.mark.skipif(not hwmgr_has("apply"), reason="hwmgr apply not in this tree")


@pytest.fixture(scope="module")
def collections(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The collection as a user gets it: built, then installed from the tarball."""
    return af.build_collection(tmp_path_factory.mktemp("galaxy"))


def run_playbook(fleet: af.Fleet, cols: Path, playbook: Path, inventory: Path,
                 *extra: str) -> subprocess.CompletedProcess:
    """ansible-playbook from the test venv, cwd in the fleet's tmp (no stray ansible.cfg)."""
    return subprocess.run(
        [str(af.BIN / "ansible-playbook"), "-i", str(inventory), "-f", "8", *extra,
         str(playbook)], cwd=fleet.tmp, env=fleet.env(cols), capture_output=True, text=True,
        timeout=280, check=False)


def direct_check(fleet: af.Fleet, root: Path) -> str:
    """The status `hwmgr check --root` itself gives a snapshot (the oracle for snapshots),
    with the fleet's site layer over the shipped catalog, as the playbook layers it."""
    res = subprocess.run([str(fleet.hwmgr), "check", "--json", "--root", str(root),
                          "--site-catalog", str(fleet.catalog)], capture_output=True, text=True,
                         timeout=120, check=False)
    return CHECK_STATUS.get(res.returncode, "failed")


@pytest.fixture(scope="module")
def fleet_run(collections: Path, tmp_path_factory: pytest.TempPathFactory):
    """One fleet-check.yml run over the 35-host fleet; yields (fleet, result, report)."""
    fleet = af.Fleet(tmp_path_factory.mktemp("fleet"))
    try:
        fleet.start_sshd()
        af.standard_fleet(fleet)
        for name in ("seed000-ustor", "seed001-bnx2", "seed002-router"):
            root = af.FIXTURE_HOSTS / name
            fleet.snapshot(f"snap-{name}", root, direct_check(fleet, root))
        res = run_playbook(fleet, collections, collections / PLAYBOOK, fleet.inventory())
        report = json.loads((fleet.report / "fleet-report.json").read_text())
        yield fleet, res, report
    finally:
        fleet.teardown()
        assert af.leftover_namespaces(fleet.prefix) == []


# ------------------------------------------------------------------------ the collection
def test_collection_builds_installs_and_compiles(collections: Path) -> None:
    root = collections / "ansible_collections" / "hwmgr" / "fleet"
    manifest = json.loads((root / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["namespace"] == "hwmgr"
    assert manifest["collection_info"]["name"] == "fleet"
    for rel in ("plugins/modules/hwmgr_check.py", "plugins/modules/hwmgr_apply.py",
                "plugins/modules/hwmgr_rollout.py", "playbooks/rollout.yml",
                "plugins/module_utils/hwmgr.py", "playbooks/fleet-check.yml",
                "playbooks/inventory.example.yml", "roles/facts/files/hwmgr.fact"):
        assert (root / rel).is_file(), rel
    assert os.access(root / "roles/facts/files/hwmgr.fact", os.X_OK)
    for py in [*root.glob("plugins/**/*.py"), root / "roles/facts/files/hwmgr.fact",
               root / "playbooks/files/store_archive.py"]:
        compile(py.read_text(), str(py), "exec")  # a SyntaxError fails the test
    docs = subprocess.run([str(af.BIN / "ansible-doc"), "-t", "module", "--json",
                           "hwmgr.fleet.hwmgr_check", "hwmgr.fleet.hwmgr_apply",
                           "hwmgr.fleet.hwmgr_rollout"],
                          env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert docs.returncode == 0, docs.stderr
    parsed = json.loads(docs.stdout)
    assert parsed["hwmgr.fleet.hwmgr_check"]["doc"]["options"]["root"]["type"] == "path"
    assert "check_mode" in parsed["hwmgr.fleet.hwmgr_apply"]["doc"]["attributes"]
    assert parsed["hwmgr.fleet.hwmgr_rollout"]["doc"]["options"]["action"]["choices"] == [
        "run", "gate", "regate"]


def test_fact_without_hwmgr_is_one_failed_object(tmp_path: Path) -> None:
    fact = af.COLLECTION / "roles" / "facts" / "files" / "hwmgr.fact"
    (tmp_path / "python3").symlink_to("/usr/bin/python3")  # PATH: Python, but no hwmgr
    res = subprocess.run([str(fact)], env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0 and res.stderr == ""
    out = json.loads(res.stdout)
    assert out["status"] == "failed" and out["rc"] is None
    assert out["error"].startswith("hwmgr not found")


# ------------------------------------------------------------------------ the fleet run
@needs_check
def test_every_host_has_the_status_its_construction_implies(fleet_run) -> None:
    fleet, res, report = fleet_run
    assert len(fleet.expected) >= 30
    got = {name: host["status"] for name, host in report["hosts"].items()}
    assert got == fleet.expected, res.stdout[-3000:]
    want = {s: sum(1 for v in fleet.expected.values() if v == s)
            for s in ("compliant", "drift", "unknown", "unreachable", "failed")}
    summary = report["summary"]
    assert summary["hosts"] == len(fleet.expected)
    assert {k: summary[k] for k in want} == want


@needs_check
def test_drift_fails_the_run_with_one_line(fleet_run) -> None:
    fleet, res, report = fleet_run
    assert report["summary"]["drift"] > 0
    assert res.returncode != 0
    line = [ln for ln in res.stdout.splitlines() if "hwmgr fleet report:" in ln
            and "fatal" in ln]
    assert line, res.stdout[-2000:]
    s = report["summary"]
    assert f"{s['drift']} of {s['hosts']} hosts drift" in line[0]
    assert f"{s['unreachable']} unreachable, {s['failed']} failed (exit 5)" in line[0]
    contacted = json.loads((fleet.report / "results.json").read_text())["hosts"]
    batch = json.loads((fleet.report / "snapshots.json").read_text())["data"]["hosts"]
    assert sorted([*contacted, *batch]) == sorted(fleet.expected)  # each host once
    assert {n for n in batch if n.startswith("snap-")} == {
        n for n in fleet.expected if n.startswith("snap-")}
    for ext in ("json", "xml", "html"):
        assert (fleet.report / f"fleet-report.{ext}").stat().st_size > 0


@needs_check
def test_drift_findings_name_the_item_and_the_values(fleet_run) -> None:
    fleet, _, report = fleet_run

    def drifts(host: str) -> list[dict[str, Any]]:
        return [f for f in report["hosts"][host]["findings"] if f["status"] == "drift"]

    for host in ("db-01", "ssh-drift"):
        (f,) = drifts(host)
        assert (f["item"], f["expected"], f["actual"]) == (
            "sysctl.net.ipv4.tcp_window_scaling", 1, 0)
    for host in ("lb-01", "old-drift"):  # live, and through the collector's archive
        (f,) = drifts(host)
        assert (f["item"], f["interface"]) == ("txqueuelen", "v0")
        assert (f["expected"], f["actual"]) == (af.TXQ_WANTED, af.TXQ_DRIFTED)
    ok = [f for f in report["hosts"]["web-01"]["findings"] if f["item"] == "txqueuelen"]
    assert {f["interface"] for f in ok} == {"v0", "v1"}
    assert {f["status"] for f in ok} == {"ok"}


@needs_check
def test_collector_hosts_judge_like_their_live_twins(fleet_run) -> None:
    """Built the same way, a host checked through the collector's archive and one checked
    live have the same findings (status, expected, actual per item), not just the status."""
    _, _, report = fleet_run

    def judged(host: str) -> set[tuple]:
        return {(f["layer"], f["device"], f["interface"], f["item"], f["status"],
                 json.dumps(f["expected"]), json.dumps(f["actual"]))
                for f in report["hosts"][host]["findings"]}

    for collected, live in (("old-01", "web-01"), ("old-drift", "lb-01"),
                            ("ssh-old", "ssh-ok"), ("nopython", "web-02")):
        assert judged(collected) == judged(live), (collected, live)
        assert judged(live)


@needs_check
def test_partial_site_layer_keeps_the_base_verdicts(fleet_run) -> None:
    """hwmgr_catalogs is a partial layer: the site's veth rules judge the namespace hosts
    (above), and the shipped catalog's known-bad be2net 4.1.307r still makes seed 000 drift."""
    _, _, report = fleet_run
    assert "catalog_version" not in af.SITE_CATALOG  # a layer, not a catalog of its own
    seed000 = report["hosts"]["snap-seed000-ustor"]
    assert seed000["status"] == "drift"
    bad = [f for f in seed000["findings"] if f["item"] == "driver_version"
           and f["status"] == "drift"]
    assert bad and {f["actual"] for f in bad} == {"4.1.307r"}


@needs_check
def test_a_layer_adding_a_device_leaves_every_host_judged(fleet_run) -> None:
    """Issue 38: the fleet's site layer adds one PCI ID to ixgbe; the merged catalog keeps
    ixgbe's other devices, so no host fails on the catalog (only the hosts built to fail do)
    and the snapshots are judged, the seed 002 router's ixgbe included."""
    fleet, res, report = fleet_run
    assert af.SITE_CATALOG["drivers"]["ixgbe"]["devices"] == [af.SITE_DEVICE]
    failed = {n for n, h in report["hosts"].items() if h["status"] == "failed"}
    assert failed == {"no-hwmgr", "snap-missing", "snap-garbled"}, res.stdout[-3000:]
    assert not [h for h in report["hosts"].values() if "catalog" in str(h.get("error"))]
    for name in ("seed000-ustor", "seed001-bnx2", "seed002-router"):  # judged, as alone
        status = report["hosts"][f"snap-{name}"]["status"]
        assert status in ("compliant", "drift", "unknown") and status == fleet.expected[
            f"snap-{name}"], name
    router = report["hosts"]["snap-seed002-router"]["findings"]
    assert [f for f in router if f["item"] == "driver_version" and f["status"] == "ok"
            and f["reason"].startswith("ixgbe 5.1.0-k-rh7.6 is ok")]  # applies_to 8086:1528


@needs_check
def test_hosts_without_a_check_keep_their_reason(fleet_run) -> None:
    fleet, _, report = fleet_run
    hosts = report["hosts"]
    assert "Connection refused" in hosts["down-01"]["error"]
    assert "Connection refused" in hosts["down-old"]["error"]
    assert hosts["no-hwmgr"]["error"].startswith("hwmgr not found")
    assert "no such snapshot" in hosts["snap-missing"]["error"]  # from the batch check
    assert "snapshot.json" in hosts["snap-garbled"]["error"]
    for name in ("down-01", "no-hwmgr", "snap-garbled"):
        assert "\n" not in hosts[name]["error"]
        assert hosts[name]["findings"] == []


@needs_check
def test_collector_hosts_leave_their_archive(fleet_run) -> None:
    fleet, _, report = fleet_run
    archives = fleet.report / "archives"
    for name in ("old-01", "old-drift", "nopython", "ssh-old"):  # local, probe failed, SSH
        data = (archives / f"{name}.tar.gz").read_bytes()
        assert data[:2] == b"\x1f\x8b", name
    with tarfile.open(archives / "ssh-old.tar.gz") as tar:  # collected inside its namespace
        nets = {m.name.split("/")[4] for m in tar.getmembers()
                if m.name.startswith("hwmgr-snapshot/sys/class/net/") and m.name.count("/") >= 4}
    assert nets == {"lo", "v0", "v1"}
    assert report["hosts"]["ssh-old"]["status"] == "compliant"
    assert not (archives / "web-01.tar.gz").exists()


# ------------------------------------------------------------------------ modules alone
def adhoc(fleet: af.Fleet, cols: Path, host: str, module: str, args: dict[str, Any],
          *extra: str) -> dict[str, Any]:
    """`ansible HOST -m MODULE -a JSON`; the host's result as the tree callback saved it."""
    tree = fleet.tmp / "tree"
    env = fleet.env(cols)
    env.update({"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.tree",
                "ANSIBLE_CALLBACK_TREE_DIR": str(tree)})
    (tree / host).unlink(missing_ok=True)
    res = subprocess.run([str(af.BIN / "ansible"), "-i", str(fleet.inventory()), host, "-m",
                          module, "-a", json.dumps(args), *extra], cwd=fleet.tmp, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert (tree / host).is_file(), res.stdout + res.stderr
    return {**json.loads((tree / host).read_text()), "ansible_exit": res.returncode,
            "stdout": res.stdout}


@pytest.fixture()
def small_fleet(tmp_path: Path):
    fleet = af.Fleet(tmp_path)
    try:
        yield fleet
    finally:
        fleet.teardown()
        assert af.leftover_namespaces(fleet.prefix) == []


@needs_check
def test_check_module_results_facts_and_failures(small_fleet: af.Fleet,
                                                  collections: Path) -> None:
    f = small_fleet
    f.live("drifty", "drift", window_scaling=0)
    args = {"executable": str(f.hwmgr), "catalogs": [str(f.catalog)]}
    r = adhoc(f, collections, "drifty", "hwmgr.fleet.hwmgr_check", args, "--check")
    assert r["changed"] is False and not r.get("failed") and r["ansible_exit"] == 0
    assert (r["rc"], r["status"], r["compliant"]) == (5, "drift", False)
    assert r["summary"]["drift"] == 1
    assert r["ansible_facts"]["hwmgr"]["status"] == "drift"
    # the findings once, in data (not again at the top and in the facts)
    assert "findings" not in r and "findings" not in r["ansible_facts"]["hwmgr"]
    assert [f["status"] for f in r["data"]["findings"]].count("drift") == 1
    bad = adhoc(f, collections, "drifty", "hwmgr.fleet.hwmgr_check",
                {**args, "root": str(af.FIXTURE_HOSTS / "broken" / "garbled")})
    assert bad["ansible_exit"] != 0 and bad["rc"] == 8  # the tree callback drops "failed"
    assert bad["msg"].startswith("hwmgr check failed (exit 8, bad input data): ")
    assert "\n" not in bad["msg"]


def _verdict(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What a check judged, without what differs from run to run (times, the host block)."""
    return [(f["item"], f.get("interface"), f["status"], f.get("expected"), f.get("actual"))
            for f in result["data"]["findings"]]


@needs_check
def test_check_module_runs_in_process_where_hwmgr_is_installed(small_fleet: af.Fleet,
                                                               collections: Path) -> None:
    f = small_fleet
    f.live("installed", "drift", window_scaling=0, installed=True)
    f.live("plain", "drift", window_scaling=0)
    args = {"catalogs": [str(f.catalog)]}
    inproc = adhoc(f, collections, "installed", "hwmgr.fleet.hwmgr_check", args)
    assert inproc["ansible_exit"] == 0 and inproc["via"] == "import", inproc["stdout"][-2000:]
    # the same host through the command: one verdict whichever way the check ran
    cmd = adhoc(f, collections, "installed", "hwmgr.fleet.hwmgr_check",
                {**args, "via": "command", "executable": str(f.hwmgr)})
    assert cmd["via"] == "command"
    assert (inproc["rc"], inproc["status"], inproc["summary"]) == (
        cmd["rc"], cmd["status"], cmd["summary"]) == (5, "drift", cmd["summary"])
    assert _verdict(inproc) == _verdict(cmd) and inproc["summary"]["drift"] == 1
    # a given executable is the command asked for, even where hwmgr is importable
    named = adhoc(f, collections, "installed", "hwmgr.fleet.hwmgr_check",
                  {**args, "executable": str(f.hwmgr)})
    assert named["via"] == "command" and _verdict(named) == _verdict(cmd)
    # in-process errors are hwmgr's own one line and exit code, as from the command
    bad = adhoc(f, collections, "installed", "hwmgr.fleet.hwmgr_check",
                {**args, "root": str(af.FIXTURE_HOSTS / "broken" / "garbled")})
    assert bad["ansible_exit"] != 0 and bad["rc"] == 8
    assert bad["msg"].startswith("hwmgr check failed (exit 8, bad input data): ")
    # via=import where this Python cannot import hwmgr: one line, nothing run
    refused = adhoc(f, collections, "plain", "hwmgr.fleet.hwmgr_check",
                    {**args, "via": "import"})
    assert refused["ansible_exit"] != 0 and refused["rc"] is None
    assert refused["msg"].startswith("hwmgr cannot be imported by this host's Python (")
    auto = adhoc(f, collections, "plain", "hwmgr.fleet.hwmgr_check",
                 {**args, "executable": str(f.hwmgr)})
    assert auto["via"] == "command" and _verdict(auto) == _verdict(cmd)


@needs_check
def test_facts_role_shows_ansible_local(small_fleet: af.Fleet, collections: Path) -> None:
    f = small_fleet
    f.live("factual", "drift", window_scaling=0)
    facts_dir = f.tmp / "facts.d"
    play = f.tmp / "facts.yml"
    play.write_text(json.dumps([{
        "hosts": "factual", "gather_facts": False,
        "environment": {"HWMGR_EXECUTABLE": str(f.hwmgr)},
        "roles": [{"role": "hwmgr.fleet.facts", "hwmgr_fact_path": str(facts_dir)}],
        "tasks": [
            {"ansible.builtin.setup": {"fact_path": str(facts_dir), "filter": "ansible_local"}},
            {"ansible.builtin.copy": {"content": "{{ ansible_local.hwmgr | to_json }}",
                                      "dest": str(f.tmp / "fact.json")},
             "delegate_to": "localhost"}]}]))
    res = run_playbook(f, collections, play, f.inventory())
    assert res.returncode == 0, res.stdout[-3000:]
    fact = json.loads((f.tmp / "fact.json").read_text())
    # hwmgr's built-in catalog only (no site layer): the shipped entries decide the status
    assert fact["rc"] in CHECK_STATUS and fact["status"] == CHECK_STATUS[fact["rc"]]
    assert isinstance(fact["findings"], list) and "summary" in fact
    assert os.access(facts_dir / "hwmgr.fact", os.X_OK)


@needs_apply
def test_apply_module_check_mode_diff_then_idempotent(small_fleet: af.Fleet,
                                                       collections: Path,
                                                       tmp_path: Path) -> None:
    f = small_fleet
    f.live("tuned", "drift", txqueuelen=af.TXQ_DRIFTED)
    image = tmp_path / "image"  # persistence files land here, never in this host's /etc
    image.mkdir()
    args = {"executable": str(f.hwmgr), "catalog_content": {
        "site.json": json.dumps(af.SITE_CATALOG)}, "layers": ["settings"],
        "persist_root": str(image)}
    dry = adhoc(f, collections, "tuned", "hwmgr.fleet.hwmgr_apply", args, "--check", "--diff")
    assert dry["changed"] is True and dry["rc"] == 0
    assert {(c["interface"], c["item"], c["current"], c["wanted"]) for c in dry["changes"]} \
        == {("v0", "txqueuelen", af.TXQ_DRIFTED, af.TXQ_WANTED)}
    # ansible prints the module's diff (--diff) and keeps it out of the saved result
    assert f"-v0 txqueuelen: {af.TXQ_DRIFTED}" in dry["stdout"], dry["stdout"]
    assert f"+v0 txqueuelen: {af.TXQ_WANTED}" in dry["stdout"], dry["stdout"]
    ns = f.namespaces[-1]
    txq = af.sh([af.IP, "-n", ns, "-j", "link", "show", "v0"]).stdout
    assert json.loads(txq)[0]["txqlen"] == af.TXQ_DRIFTED  # check mode changed nothing
    done = adhoc(f, collections, "tuned", "hwmgr.fleet.hwmgr_apply", args)
    assert done["changed"] is True, done
    txq = af.sh([af.IP, "-n", ns, "-j", "link", "show", "v0"]).stdout
    assert json.loads(txq)[0]["txqlen"] == af.TXQ_WANTED
    link = image / "etc/systemd/network/10-hwmgr-v0.link"
    assert f"TransmitQueueLength={af.TXQ_WANTED}" in link.read_text()
    again = adhoc(f, collections, "tuned", "hwmgr.fleet.hwmgr_apply", args)
    assert (again["changed"], again["rc"], again.get("changes")) == (False, 4, []), again


@needs_check
def test_report_drift_without_failing_stats_and_trend(small_fleet: af.Fleet,
                                                      collections: Path) -> None:
    """AWX: hwmgr_fail_on_drift=false reports drift and passes; the summary is a set_stats
    stat; a second run into the same directory has a trend and says what is new."""
    f = small_fleet
    f.live("web-01", "compliant")
    f.live("db-01", "drift", window_scaling=0)
    f.snapshot("snap-router", af.FIXTURE_HOSTS / "seed002-router",
               direct_check(f, af.FIXTURE_HOSTS / "seed002-router"))
    env_extra = ["-e", "hwmgr_fail_on_drift=false"]
    inv = f.inventory({"hwmgr_report_prom": str(f.tmp / "fleet.prom")})
    cols = collections / PLAYBOOK
    for _night in (1, 2):
        res = subprocess.run(
            [str(af.BIN / "ansible-playbook"), "-i", str(inv), "-f", "8", *env_extra, str(cols)],
            cwd=f.tmp, env={**f.env(collections), "ANSIBLE_SHOW_CUSTOM_STATS": "1"},
            capture_output=True, text=True, timeout=280, check=False)
        assert res.returncode == 0, res.stdout[-3000:]
        assert "CUSTOM STATS" in res.stdout and '"hwmgr_fleet"' in res.stdout, res.stdout[-2000:]
        assert "fatal" not in res.stdout
    report = json.loads((f.report / "fleet-report.json").read_text())
    assert report["hosts"]["db-01"]["status"] == "drift"
    trend = json.loads((f.report / "fleet-trend.json").read_text())
    assert len(trend["points"]) >= 1 and "db-01" in trend["drift"]
    assert "hwmgr_fleet_report_success 1.0" in (f.tmp / "fleet.prom").read_text()
@needs_apply
def test_apply_module_force_confirm_and_revert_on_a_guarded_interface(
        small_fleet: af.Fleet, collections: Path, tmp_path: Path) -> None:
    """v0 carries the namespace's default route: plain apply is refused (rc 9); force with
    confirm_timeout applies it under a timed revert, state=confirmed keeps it, and
    state=reverted undoes it. The partial gro layer rides on the site catalog (layers)."""
    f = small_fleet
    f.live("uplink", "compliant")
    ns = f.namespaces[-1]
    af.sh([af.IP, "-n", ns, "addr", "add", "10.254.0.1/24", "dev", "v0"])
    af.sh([af.IP, "-n", ns, "route", "add", "default", "via", "10.254.0.2", "dev", "v0"])
    af.sh([af.IP, "netns", "exec", ns, "ethtool", "-K", "v0", "gro", "off"])
    image = tmp_path / "image"
    image.mkdir()
    gro = {"drivers": {"veth": {"settings": {"features": {"gro": "on"}}}}}
    args: dict[str, Any] = {
        "executable": str(f.hwmgr), "catalogs": [str(f.catalog)],
        "catalog_content": {"gro.json": json.dumps(gro)}, "layers": ["settings"],
        "interfaces": ["v0"], "persist_root": str(image), "state_dir": str(tmp_path / "state")}

    def gro_state() -> str:
        out = af.sh([af.IP, "netns", "exec", ns, "ethtool", "-k", "v0"]).stdout
        return next(line.split()[1] for line in out.splitlines()
                    if line.startswith("generic-receive-offload:"))

    refused = adhoc(f, collections, "uplink", "hwmgr.fleet.hwmgr_apply", args)
    assert refused["ansible_exit"] != 0 and refused["rc"] == 9, refused
    assert "v0 carries the default route" in refused["msg"] and gro_state() == "off"
    forced = adhoc(f, collections, "uplink", "hwmgr.fleet.hwmgr_apply",
                   {**args, "force": True, "confirm_timeout": 60})
    assert forced["changed"] is True and forced["rc"] == 0, forced
    assert forced["confirm_pending"] is True and forced["confirm_timeout"] == 60
    assert gro_state() == "on" and isinstance(forced["txn"], int)
    kept = adhoc(f, collections, "uplink", "hwmgr.fleet.hwmgr_apply",
                 {**args, "state": "confirmed", "txn": forced["txn"]})
    assert (kept["changed"], kept["rc"]) == (True, 0), kept
    again = adhoc(f, collections, "uplink", "hwmgr.fleet.hwmgr_apply",
                  {**args, "state": "confirmed", "txn": forced["txn"]})
    assert (again["changed"], again["rc"]) == (False, 4), again  # nothing pending any more
    dry = adhoc(f, collections, "uplink", "hwmgr.fleet.hwmgr_apply",
                {**args, "state": "reverted"}, "--check")
    assert dry["changed"] is False and "no dry run" in dry["msg"] and gro_state() == "on"
    undone = adhoc(f, collections, "uplink", "hwmgr.fleet.hwmgr_apply",
                   {**args, "state": "reverted"})
    assert (undone["changed"], undone["rc"], undone["reverted_txn"]) == (
        True, 0, forced["txn"]), undone
    assert gro_state() == "off"
    bad = adhoc(f, collections, "uplink", "hwmgr.fleet.hwmgr_apply",
                {**args, "confirm_timeout": 30})
    assert bad["ansible_exit"] != 0 and "force" in bad["msg"]
