"""Planning on a captured host (seed 000): the be2net upgrade is refused because be2net
carries the default route, Secure Boot without a key is refused, every refusal carries its own
exit code in fix-first order, what a snapshot lacks is "unknown" (11), and nothing is written."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from shipped import SHIPPED, shipped_doc
from support import HOSTS, run_cli

from hwmgr.host.capture import COLLECTOR, COLLECTOR_RECORDS

KVER = "2.6.32-279.el6.x86_64"
SEED000 = HOSTS / "seed000-ustor"

ENV = {"HWMGR_STATE_DIR": "/var/lib/hwmgr-test-none", "SSH_CONNECTION": ""}


@pytest.fixture
def seed000(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the seed-000 snapshot (it records routes, headers and `modinfo -k` for be2net)
    + a catalog whose 10.2.470.14 source carries a checksum (the shipped one is unverified)."""
    snap = tmp_path / "ustor"
    shutil.copytree(SEED000, snap, symlinks=True)
    cat = shipped_doc()
    src = cat["drivers"]["be2net"]["versions"]["10.2.470.14"]["source"]
    src.pop("verified", None)
    src.update(sha256=hashlib.sha256(b"x").hexdigest(), size=1)
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(cat))
    return snap, catalog


def reasons(doc: dict) -> list[str]:
    return [r["reason"] for r in doc["data"]["refusals"]]


def plan(snap: Path, catalog: Path, *extra: str, env: dict | None = None):
    res = run_cli("plan", "upgrade", "be2net", "--to", "10.2.470.14", "--kernel", KVER,
                  "--root", str(snap), "--catalog", str(catalog), "--json", *extra,
                  env={**ENV, **(env or {})})
    return res, json.loads(res.stdout)


def test_default_route_interface_is_refused_by_name(seed000: tuple[Path, Path]) -> None:
    snap, catalog = seed000
    before = sorted(p.relative_to(snap) for p in snap.rglob("*"))
    res, doc = plan(snap, catalog)
    assert res.returncode == 9, res.stderr
    assert doc["status"] == "refused"
    assert any("eth2 carries the default route" in r for r in reasons(doc))
    assert not any("eth0" in r for r in reasons(doc))  # eth0 is e1000e
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
    # one line per step that runs, by the name the journal will record (test_lifecycle
    # checks a real upgrade's journal against its plan)
    assert [s.split(":")[0] for s in steps] == ["fetch", "unpack", "dkms-add", "dkms-build",
                                                "backup", "install", "initramfs", "arm"]
    assert steps[0].startswith("fetch: download http://www-dl.emulex.com/")
    assert f"dkms-build: dkms build be2net/10.2.470.14 for {KVER}" in steps


def test_drivers_dir_is_searched_before_the_shipped_recipes(
        seed000: tuple[Path, Path], tmp_path: Path) -> None:
    """HWMGR_DRIVERS_DIR adds a recipe dir in front of the shipped ones (drivers/README.md);
    it used to replace them, so a driver only the shipped dirs have had 'no build recipe'."""
    snap, catalog = seed000
    site = tmp_path / "site-drivers"
    (site / "otherdrv").mkdir(parents=True)
    res, doc = plan(snap, catalog, "--force", env={"HWMGR_DRIVERS_DIR": str(site)})
    assert res.returncode == 0, doc
    assert not doc["errors"] and doc["data"]["modules"] == ["be2net"]


def test_secure_boot_without_key_is_refused(seed000: tuple[Path, Path]) -> None:
    snap, catalog = seed000
    (snap / "commands/sb.txt").write_text("SecureBoot enabled\n")
    index = json.loads((snap / "commands/index.json").read_text())
    index.append({"argv": ["mokutil", "--sb-state"], "rc": 0, "stdout": "commands/sb.txt"})
    (snap / "commands/index.json").write_text(json.dumps(index))
    res, doc = plan(snap, catalog, "--force")
    assert res.returncode == 9
    assert any("Secure Boot" in r for r in reasons(doc))


def test_ssh_session_interface_is_named(seed000: tuple[Path, Path]) -> None:
    snap, catalog = seed000
    (snap / "commands/ip.txt").write_text(
        "4: eth2    inet 192.16.110.50/24 brd 192.16.110.255 scope global eth2\n")
    index = json.loads((snap / "commands/index.json").read_text())
    index.append({"argv": ["ip", "-o", "addr", "show"], "rc": 0, "stdout": "commands/ip.txt"})
    (snap / "commands/index.json").write_text(json.dumps(index))
    route = snap / "proc/net/route"  # keep only the header line: no default routes
    route.write_text(route.read_text().splitlines()[0] + "\n")
    res, doc = plan(snap, catalog,
                    env={"SSH_CONNECTION": "192.16.110.60 51000 192.16.110.50 22"})
    assert res.returncode == 9
    assert any("eth2 carries the current SSH session" in r for r in reasons(doc))


def test_shipped_catalog_refuses_the_unverified_vendor_url(seed000: tuple[Path, Path]) -> None:
    snap, _ = seed000
    res, doc = plan(snap, SHIPPED, "--force")
    assert res.returncode == 9
    assert any("verified" in r or "sha256" in r for r in reasons(doc))


def test_readme_example_prints_a_plan_with_the_true_refusals() -> None:
    """README: `hwmgr plan upgrade be2net --to 10.2.470.14 --root .../seed000-ustor`."""
    res = run_cli("plan", "upgrade", "be2net", "--to", "10.2.470.14", "--root", str(SEED000),
                  env=ENV)
    assert res.returncode == 9, res.stderr
    assert "modinfo is not available" not in res.stdout + res.stderr
    assert f"target kernel {KVER}: now 4.1.307r" in res.stdout
    refused = [ln for ln in res.stdout.splitlines() if "refused" in ln]
    assert len(refused) == 2, res.stdout
    assert refused[0].startswith("  refused (exit 9): be2net 10.2.470.14: source http://")
    assert refused[0].endswith("is not verified (no known sha256/size)")
    assert "eth2 carries the default route" in refused[1]
    assert "dkms build be2net/10.2.470.14 for " + KVER in res.stdout


@pytest.mark.parametrize("to, first, codes, fragment", [
    ("4.1.307r", 9, [9, 9, 9], "be2net 4.1.307r is known-bad: about 100 MB/s"),
    ("9.9", 3, [3, 9], "be2net 9.9 is not in the catalog (listed: 10.2.470.14, "),
    ("../../etc/passwd", 8, [8, 9], "does not look like a version"),
    ("1" * 10_000, 8, [8, 9], "is 10000 characters long; a version is at most 64"),
])
def test_each_refusal_has_its_own_code_in_fix_first_order(
        to: str, first: int, codes: list[int], fragment: str) -> None:
    res = run_cli("plan", "upgrade", "be2net", "--to", to, "--root", str(SEED000), "--json",
                  env=ENV)
    doc = json.loads(res.stdout)
    assert res.returncode == first, res.stderr
    refusals = doc["data"]["refusals"]
    assert [r["code"] for r in refusals] == codes, refusals
    assert fragment in refusals[0]["reason"]
    assert "eth2 carries the default route" in refusals[-1]["reason"]
    assert doc["data"]["kernels"] == [KVER]
    assert len(res.stdout) < 5000, "a 10k --to is not echoed back whole"
    if first == 8:
        assert doc["data"]["steps"] == [], "no steps for a string that is not a version"


def test_snapshot_without_modinfo_output_is_unknown_and_says_retake(
        seed000: tuple[Path, Path]) -> None:
    snap, catalog = seed000
    index = json.loads((snap / "commands/index.json").read_text())
    index = [e for e in index if e["argv"][:2] != ["modinfo", "-k"]]
    (snap / "commands/index.json").write_text(json.dumps(index))
    res, doc = plan(snap, catalog, "--force")
    assert res.returncode == 11, res.stderr
    want = (f"snapshot has no recorded output of `modinfo -k {KVER} be2net`; "
            "retake it with hwmgr ≥ 0.2.0")
    assert reasons(doc) == [want]
    assert doc["data"]["refusals"][0]["code"] == 11
    assert doc["data"]["unread"] == [KVER] and doc["data"]["kernels"] == [KVER]
    assert "install" not in res.stderr and "kmod" not in res.stderr + str(doc["errors"])
    human = run_cli("plan", "upgrade", "be2net", "--to", "10.2.470.14", "--force",
                    "--root", str(snap), "--catalog", str(catalog), env=ENV)
    assert human.returncode == 11
    assert f"target kernel {KVER}: now unknown (not in the snapshot)" in human.stdout


def test_snapshot_without_records_is_unknown_not_safe(seed000: tuple[Path, Path]) -> None:
    """A snapshot that does not say it recorded routes, headers or Secure Boot state (older
    hwmgr) must not read as "no default route", "no headers" or "Secure Boot off"."""
    snap, catalog = seed000
    meta = json.loads((snap / "snapshot.json").read_text())
    del meta["records"], meta["hwmgr"]
    (snap / "snapshot.json").write_text(json.dumps(meta))
    shutil.rmtree(snap / "lib")
    (snap / "proc/net/route").unlink()
    res, doc = plan(snap, catalog)
    assert res.returncode == 11, res.stderr
    got = reasons(doc)
    assert [r["code"] for r in doc["data"]["refusals"]] == [11, 11, 11]
    assert f"kernel headers listing (/lib/modules/{KVER}/build)" in got[0]
    assert "routing table" in got[1] and "Secure Boot state" in got[2]
    assert all("retake it with hwmgr" in r and "install" not in r for r in got)


def _default_plan(snap: Path, catalog: Path):
    """`plan upgrade` without --kernel: the default targets."""
    res = run_cli("plan", "upgrade", "be2net", "--to", "10.2.470.14", "--force", "--root",
                  str(snap), "--catalog", str(catalog), "--json", env=ENV)
    return res, json.loads(res.stdout)


def test_no_headers_at_all_names_the_running_kernel_and_its_package(
        seed000: tuple[Path, Path]) -> None:
    """Issue 23: a snapshot that records no headers at all used to plan 'target kernel:
    none'; the running kernel (here only in snapshot.json) is the target, and the refusal
    names the headers package to install (EL 6: kernel-devel)."""
    snap, catalog = seed000
    shutil.rmtree(snap / f"lib/modules/{KVER}/build")
    (snap / "proc/sys/kernel/osrelease").unlink()  # the kernel is then snapshot.json's
    res, doc = _default_plan(snap, catalog)
    assert res.returncode == 9, res.stderr
    assert doc["data"]["kernels"] == [KVER]
    assert (f"kernel headers for {KVER} are not installed (no /lib/modules/{KVER}/build): "
            f"install kernel-devel-{KVER}") in reasons(doc)
    human = run_cli("plan", "upgrade", "be2net", "--to", "10.2.470.14", "--force", "--root",
                    str(snap), "--catalog", str(catalog), env=ENV)
    assert "target kernel: none" not in human.stdout
    assert f"target kernel {KVER}: now 4.1.307r" in human.stdout


def test_default_targets_are_the_kernels_with_headers_not_uname(
        seed000: tuple[Path, Path]) -> None:
    """A kernel installed (headers present) but not booted is the default target; the running
    kernel without headers is left out, with a warning naming its headers package."""
    snap, catalog = seed000
    shutil.rmtree(snap / f"lib/modules/{KVER}/build")
    new = "2.6.32-504.el6.x86_64"
    (snap / f"lib/modules/{new}/build").mkdir(parents=True)
    (snap / f"lib/modules/{new}/build/Makefile").write_text("# headers\n")
    res, doc = _default_plan(snap, catalog)
    assert doc["data"]["kernels"] == [new], res.stderr
    assert any(w.startswith(f"the running kernel {KVER} is not a target") and
               f"install kernel-devel-{KVER} to build for it too" in w
               for w in doc["data"]["warnings"])
    assert f"dkms-build: dkms build be2net/10.2.470.14 for {new}" in doc["data"]["steps"]


def test_collector_archive_says_what_the_collector_cannot_record(
        seed000: tuple[Path, Path]) -> None:
    """A shell collector's archive (snapshot.json as collect.sh writes it) lacks the headers
    and Secure Boot records by design: the plan says so, never "retake it with hwmgr ≥ ...",
    which a host without Python cannot follow; a record the collector does take (routes)
    advises the script `hwmgr collect-script` prints."""
    snap, catalog = seed000
    meta = json.loads((snap / "snapshot.json").read_text())
    meta.pop("hwmgr")
    meta.update(records=sorted(set(COLLECTOR_RECORDS) - {"routes"}), collector=COLLECTOR)
    (snap / "snapshot.json").write_text(json.dumps(meta))
    shutil.rmtree(snap / "lib")  # the collector copies no kernel headers
    res, doc = plan(snap, catalog, "--force")
    assert res.returncode == 11, res.stderr
    got = reasons(doc)
    assert [r["code"] for r in doc["data"]["refusals"]] == [11, 11, 11]
    assert got[0] == (
        f"the collector's archive has no kernel headers listing (/lib/modules/{KVER}/build): "
        "the shell collector does not record it (it records what check and inventory read, "
        "for the running kernel only); a `hwmgr snapshot` taken on the host (Python ≥ 3.9) "
        "records it")
    assert got[1].startswith("the collector's archive has no recorded routing table")
    assert "collect again with the script `hwmgr collect-script` prints" in got[1]
    assert "Secure Boot state" in got[2] and "does not record it" in got[2]
    assert not any("retake" in r for r in got)


def test_plan_names_an_in_tree_module_without_a_version_field() -> None:
    """An in-tree module with no `version:` field (5.10's igb) is a module, not 'no module':
    the plan said 'now no module' and then 'keeps: ... igb.ko' for the same kernel."""
    from rich.console import Console

    from hwmgr.ui.lifecycle import render_plan

    ko = "/lib/modules/5.10.0-32-amd64/kernel/drivers/net/ethernet/intel/igb/igb.ko"
    d = {"action": "upgrade", "driver": "igb", "to_version": "5.9.3",
         "kernels": ["5.10.0-32-amd64", "6.1.0-56-amd64"],
         "from_versions": {"5.10.0-32-amd64": None, "6.1.0-56-amd64": None}, "initramfs": {},
         "devices": [], "steps": [], "reboot_required": False, "warnings": [], "refusals": [],
         "backups": [{"kernel": "5.10.0-32-amd64", "module": "igb", "path": ko, "version": None},
                     {"kernel": "6.1.0-56-amd64", "module": "igb", "path": None,
                      "version": None}]}
    console = Console(record=True, width=200)
    render_plan(console, d)
    out = console.export_text()
    assert f"target kernel 5.10.0-32-amd64: now a module without a version field ({ko})" in out
    assert "target kernel 6.1.0-56-amd64: now no module" in out


@pytest.mark.parametrize(("value", "key", "refused"), [
    (1, False, True), (1, True, False), (0, False, False)], ids=["on-no-key", "on-key", "off"])
def test_secure_boot_read_from_the_efivar(seed000: tuple[Path, Path], value: int, key: bool,
                                          refused: bool) -> None:
    """No mokutil answer recorded: the SecureBoot efivar, as the kernel exposes it (4 bytes of
    attributes, NV|BS|RT, then the value), says. On with no module-signing key refuses (9)
    naming the key it looked for; on with the key and certificate HWMGR_SIGN_KEY/CERT name,
    or off, plans (--force: the route refusal aside)."""
    snap, catalog = seed000
    var = snap / "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    var.parent.mkdir(parents=True)
    var.write_bytes(b"\x06\x00\x00\x00" + bytes([value]))
    env = {"HWMGR_SIGN_KEY": "/etc/hwmgr/mok.key", "HWMGR_SIGN_CERT": "/etc/hwmgr/mok.der"}
    if key:
        (snap / "etc/hwmgr").mkdir(parents=True, exist_ok=True)
        (snap / "etc/hwmgr/mok.key").write_bytes(b"key")
        (snap / "etc/hwmgr/mok.der").write_bytes(b"cert")
    res, doc = plan(snap, catalog, "--force", env=env)
    assert res.returncode == (9 if refused else 0), doc
    assert reasons(doc) == ([
        "Secure Boot is enabled and no module-signing key is configured (/etc/hwmgr/mok.key): "
        "the new module would not load"] if refused else []), doc
