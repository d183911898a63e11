"""Issue 29, the kernel gate: boot-loader back-ends on fixture roots (tests/fixtures/kernelgate),
the per-kernel record and what `check` shows from it, the hold and its exact restore, the
hooks' "never fail the package transaction" rule, and (slow) a real DKMS build for a kernel
installed but not running."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from support import REPO, run_cli

from hwmgr.errors import HwmgrError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.gate import bootloader, gaterecord, kernelgate
from hwmgr.transaction.state import StateDir

FIXTURES = REPO / "tests" / "fixtures" / "kernelgate"
RUNNING, NEW = "6.1.0-56-amd64", "6.1.0-58-amd64"
UUID = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
HELD_ID = f"gnulinux-advanced-{UUID}>gnulinux-{RUNNING}-advanced-{UUID}"
STATE = "/var/lib/hwmgr"
needs_editenv = pytest.mark.skipif(not shutil.which("grub-editenv"),
                                   reason="grub-editenv not installed (grub-common)")


def fixture_root(tmp_path: Path, name: str) -> Host:
    """A writable copy of a fixture root, with the real command runner."""
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root, symlinks=True)
    return Host(root, SubprocessRunner())


def files(host: Host, *paths: str) -> dict[str, bytes | None]:
    return {p: host.read_bytes(p, limit=1 << 20) for p in paths}


def manage(host: Host, driver: str = "e1000e", version: str = "3.8.7-lab",
           state_dir: str = STATE) -> int:
    """Journal a committed upgrade of `driver`, as `hwmgr upgrade` leaves it."""
    state = StateDir(host, state_dir)
    j = state.journal()
    params = {"driver": driver, "version": version, "modules": [driver], "kernels": [RUNNING],
              "from": {RUNNING: {driver: {"version": None}}}, "initramfs": [],
              "drivers_dir": str(REPO / "drivers")}
    txn = j.begin("upgrade", driver, params, [])
    j.set_txn(txn, state="committed")
    state.close()
    return txn


# ------------------------------------------------------------------ GRUB (Debian)
def test_grub_entry_names_the_running_kernels_advanced_entry() -> None:
    cfg = (FIXTURES / "grub/boot/grub/grub.cfg").read_text()
    assert bootloader.grub_entry(cfg, RUNNING) == HELD_ID
    assert bootloader.grub_entry(cfg, NEW) == (
        f"gnulinux-advanced-{UUID}>gnulinux-{NEW}-advanced-{UUID}")
    assert bootloader.grub_entry(cfg, "6.1.0-1-amd64") is None
    no_ids = "\n".join(line.split(" $menuentry_id_option")[0] + (" {" if "$menuentry" in line
                                                                  else "")
                       for line in cfg.splitlines())
    assert bootloader.grub_entry(no_ids, RUNNING) == (
        f"Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux {RUNNING}")


@needs_editenv
def test_grub_hold_sets_saved_default_and_restore_puts_back_every_byte(tmp_path: Path) -> None:
    host = fixture_root(tmp_path, "grub")
    before = files(host, bootloader.GRUB_DEFAULTS, bootloader.GRUBENV)
    backend = bootloader.detect(host)
    assert backend is not None and backend.name == "grub"
    saved = backend.hold(host, RUNNING)
    text = host.read_text(bootloader.GRUB_DEFAULTS) or ""
    assert "GRUB_DEFAULT=saved" in text.splitlines() and "GRUB_DEFAULT=0" not in text
    listed = subprocess.run(["grub-editenv", str(host.path(bootloader.GRUBENV)), "list"],
                            capture_output=True, text=True, check=True).stdout
    assert f"saved_entry={HELD_ID}" in listed.splitlines()  # what the lab's firmware reads
    assert saved["grub_default"] == "GRUB_DEFAULT=0" and saved["saved_entry"] is None
    assert any("not regenerated under a --root" in n for n in saved["notes"])
    backend.restore(host, saved)
    assert files(host, bootloader.GRUB_DEFAULTS, bootloader.GRUBENV) == before


@needs_editenv
def test_grub_hold_keeps_an_existing_saved_entry_to_restore(tmp_path: Path) -> None:
    host = fixture_root(tmp_path, "grub")
    env = str(host.path(bootloader.GRUBENV))
    subprocess.run(["grub-editenv", env, "set", "saved_entry=custom"], check=True)
    conf = host.path(bootloader.GRUB_DEFAULTS)
    conf.write_text(conf.read_text().replace("GRUB_DEFAULT=0", 'GRUB_DEFAULT="saved"'))
    before = files(host, bootloader.GRUB_DEFAULTS, bootloader.GRUBENV)
    backend = bootloader.Grub()
    saved = backend.hold(host, RUNNING)
    assert saved["changed_default"] is False and saved["saved_entry"] == "custom"
    # this grub.cfg was made before GRUB_DEFAULT=saved: it would be regenerated on a live host
    assert not bootloader.uses_saved((FIXTURES / "grub/boot/grub/grub.cfg").read_text())
    assert bootloader.uses_saved('   set default="${saved_entry}"\n')
    assert any("not regenerated under a --root" in n for n in saved["notes"])
    assert conf.read_bytes() == before[bootloader.GRUB_DEFAULTS]  # already saved: untouched
    backend.restore(host, saved)
    assert files(host, bootloader.GRUB_DEFAULTS, bootloader.GRUBENV) == before


def test_grub_without_an_entry_for_the_running_kernel_fails_naming_it(tmp_path: Path) -> None:
    host = fixture_root(tmp_path, "grub")
    with pytest.raises(HwmgrError, match="has no menu entry booting 6.1.0-1-amd64"):
        bootloader.Grub().hold(host, "6.1.0-1-amd64")


# ------------------------------------------------------------------ systemd-boot, grubby
def test_systemd_boot_hold_and_restore_on_loader_conf(tmp_path: Path) -> None:
    host = fixture_root(tmp_path, "systemd-boot")
    conf = "/efi/loader/loader.conf"
    before = host.read_bytes(conf)
    backend = bootloader.detect(host)
    assert backend is not None and backend.name == "systemd-boot"
    saved = backend.hold(host, RUNNING)
    entry = f"f3a1c0de5e5e4b1d9a0b1c2d3e4f5061-{RUNNING}.conf"
    assert saved["held_entry"] == entry and "bootctl" not in saved  # no EFI under a root
    assert f"default {entry}" in (host.read_text(conf) or "").splitlines()
    backend.restore(host, saved)
    assert host.read_bytes(conf) == before


def test_systemd_boot_hold_keeps_the_efi_default_it_found(tmp_path: Path) -> None:
    """LoaderEntryDefault (4 attribute bytes, UTF-16LE, NUL) is what bootctl set-default
    wrote before: kept so a restore can put it back."""
    host = fixture_root(tmp_path, "systemd-boot")
    var = host.path(bootloader.EFIVAR_DEFAULT)
    var.parent.mkdir(parents=True)
    var.write_bytes(b"\x07\x00\x00\x00" + "other.conf\x00".encode("utf-16-le"))
    assert bootloader.SystemdBoot().hold(host, RUNNING)["efivar"] == "other.conf"


def test_grubby_is_detected_and_refuses_a_root(tmp_path: Path) -> None:
    """grubby has no root option: under a fixture root it must refuse, not touch this
    machine's boot loader (the live path needs a RHEL host: tests/lab)."""
    host = fixture_root(tmp_path, "grubby")
    backend = bootloader.detect(host)
    assert backend is not None and backend.name == "grubby"
    with pytest.raises(HwmgrError, match="live host only"):
        backend.hold(host, "5.14.0-427.el9.x86_64")


def test_no_boot_loader_is_detected_on_an_empty_root(tmp_path: Path) -> None:
    assert bootloader.detect(Host(tmp_path, SubprocessRunner())) is None


# ------------------------------------------------------------------ managed drivers, records
def test_managed_drivers_follow_the_journal(tmp_path: Path) -> None:
    host = fixture_root(tmp_path, "grub")
    state = StateDir(host, STATE)
    assert kernelgate.managed_drivers(state) == []
    txn = manage(host)
    got = kernelgate.managed_drivers(state)
    assert [(m.driver, m.version, m.modules, m.storage) for m in got] == [
        ("e1000e", "3.8.7-lab", ["e1000e"], False)]
    j = state.journal()  # a rollback to inbox undoes it: no longer managed
    j.set_txn(j.begin("rollback", "e1000e", {"undo_upgrade": txn}, []), state="committed")
    assert kernelgate.managed_drivers(state) == []
    state.close()


@needs_editenv
def test_missing_headers_record_hold_check_and_release(tmp_path: Path) -> None:
    """Headers absent for the new kernel: not ready naming the package; the record shows in
    check's items; the hold writes what the lab's firmware reads; a passing run restores."""
    host = fixture_root(tmp_path, "grub")
    manage(host)
    state = StateDir(host, STATE)
    before = files(host, bootloader.GRUB_DEFAULTS, bootloader.GRUBENV)
    assert gaterecord.check_items(host, STATE, RUNNING) == [
        {"driver": "e1000e", "kernel": NEW, "status": "unknown",
         "reason": f"e1000e ready for kernel {NEW}: unknown: e1000e 3.8.7-lab not gated; run "
                   f"hwmgr kernel-gate {NEW}"}]
    (m,) = kernelgate.managed_drivers(state)
    r = kernelgate.gate_driver(host, state, m, NEW, secure_boot=False)
    assert not r.ready and f"install linux-headers-{NEW}" in r.why
    kernelgate.write_record(host, state, NEW, RUNNING, [r])
    (item,) = gaterecord.check_items(host, STATE, RUNNING)
    assert item["status"] == "drift"
    assert item["reason"].startswith(f"e1000e ready for kernel {NEW}: no: kernel headers for")
    held = kernelgate.hold(host, state, NEW, RUNNING)
    assert held["backend"] == "grub" and held["kernels"] == [NEW]
    assert 'GRUB_DEFAULT=saved' in (host.read_text(bootloader.GRUB_DEFAULTS) or "")
    env = bootloader.grubenv_values(host.read_bytes(bootloader.GRUBENV))
    assert env["saved_entry"] == HELD_ID
    assert kernelgate.hold(host, state, NEW, RUNNING)["saved"] == held["saved"]  # idempotent
    released = kernelgate.release(host, state, NEW)
    assert released is not None and released["kernels"] == [NEW]
    assert files(host, bootloader.GRUB_DEFAULTS, bootloader.GRUBENV) == before
    assert gaterecord.read_hold(host, state) is None
    state.close()


def test_no_boot_loader_to_hold_is_an_error_and_records_no_hold(tmp_path: Path) -> None:
    host = Host(tmp_path, SubprocessRunner())
    state = StateDir(host, STATE)
    with pytest.raises(HwmgrError, match="no boot loader hwmgr can hold was found") as e:
        kernelgate.hold(host, state, NEW, RUNNING)
    assert e.value.exit_code == 1 and gaterecord.read_hold(host, state) is None


def test_a_damaged_record_is_bad_input_naming_it(tmp_path: Path) -> None:
    host = fixture_root(tmp_path, "grub")
    manage(host)
    path = host.path(f"{STATE}/kernels/{NEW}.json")
    path.parent.mkdir(parents=True)
    path.write_text("[1]")
    with pytest.raises(HwmgrError, match=f"kernels/{NEW}.json: not a kernel-gate record") as e:
        gaterecord.check_items(host, STATE, RUNNING)
    assert e.value.exit_code == 8


# ------------------------------------------------------------------ the verb and the hooks
def test_gate_exit_codes_on_this_machine(tmp_path: Path) -> None:
    env = {"HWMGR_STATE_DIR": str(tmp_path / "state")}
    running = os.uname().release
    res = run_cli("kernel-gate", running, env=env)
    assert res.returncode == 9 and "is the running kernel" in res.stderr
    res = run_cli("kernel-gate", "9.9.9-none", env=env)
    assert res.returncode == 3 and "kernel 9.9.9-none is not installed" in res.stderr
    state = StateDir(Host("/", SubprocessRunner(), writable=[tmp_path]), str(tmp_path / "state"))
    with state.lock(command="test holds the lock"):
        res = run_cli("kernel-gate", "9.9.9-none", env=env)
    assert res.returncode == 10, res.stderr


@pytest.fixture
def fake_installed_kernel() -> Iterator[str]:
    """A kernel release with /lib/modules/KVER and /boot/vmlinuz-KVER but no headers (a
    name of this test's own, removed afterwards): installed, not running, not buildable."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make /lib/modules/KVER and /boot/vmlinuz-KVER")
    kver = f"9.9.{os.getpid()}-hwmgrgate"
    mods, image = Path(f"/lib/modules/{kver}"), Path(f"/boot/vmlinuz-{kver}")
    if mods.exists() or image.exists():
        pytest.skip(f"{kver} exists on this host; not touching it")
    mods.mkdir(parents=True)
    image.write_bytes(b"")
    try:
        yield kver
    finally:
        shutil.rmtree(mods)
        image.unlink()


def test_gate_verb_without_headers_nor_boot_loader(fake_installed_kernel: str,
                                                   tmp_path: Path) -> None:
    """The whole verb on this machine: nothing managed is 0; a managed driver without
    headers for KVER and no boot loader to hold is 1 naming both; --allow-unready is 0 with
    the warning; the record says why either way."""
    import json

    kver, env = fake_installed_kernel, {"HWMGR_STATE_DIR": str(tmp_path / "state")}
    res = run_cli("kernel-gate", kver, env=env)
    assert res.returncode == 0 and "no hwmgr-managed drivers" in res.stdout, res.stderr
    manage(Host("/", SubprocessRunner(), writable=[tmp_path]), "e1000e", "3.8.7-lab",
           state_dir=str(tmp_path / "state"))
    res = run_cli("kernel-gate", kver, env=env)
    assert res.returncode == 1, res.stderr
    assert (f"not ready for kernel {kver} (e1000e 3.8.7-lab: kernel headers for {kver} are "
            "not installed") in res.stderr
    assert f"install linux-headers-{kver}), and the boot default could NOT be held: no boot " \
           "loader hwmgr can hold was found" in res.stderr
    record = json.loads((tmp_path / f"state/kernels/{kver}.json").read_text())
    assert record["ready"] is False and not record["drivers"]["e1000e"]["ready"]
    res = run_cli("kernel-gate", kver, "--allow-unready", "--json", env=env)
    env_out = json.loads(res.stdout)
    assert res.returncode == 0 and env_out["data"]["held"] is None
    assert env_out["errors"][0].startswith(
        f"warning: not ready for kernel {kver} (--allow-unready: default not held): e1000e")


HOOKS = {
    "postinst.d/zz-hwmgr-gate": ["9.9.9-none", "/boot/vmlinuz-9.9.9-none"],
    "install.d/90-hwmgr-gate.install": ["add", "9.9.9-none", "/boot/efi/x", "/boot/vmlinuz-x"],
}


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_hooks_never_fail_the_package_transaction(hook: str, tmp_path: Path) -> None:
    """The real hook runs the real hwmgr, whose gate fails (the kernel is not installed): the
    hook logs the gate's exit code and still exits 0."""
    hwmgr = f"{sys.executable} -m hwmgr"
    env = {**os.environ, "HWMGR": hwmgr, "HWMGR_STATE_DIR": str(tmp_path / "state"),
           "PYTHONPATH": str(REPO)}
    res = subprocess.run([str(REPO / "contrib/kernel" / hook), *HOOKS[hook]], env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert "kernel 9.9.9-none is not installed" in res.stderr
    assert "hwmgr kernel-gate 9.9.9-none: exit 3 (gate failed)" in res.stderr


def test_kernel_install_hook_ignores_remove(tmp_path: Path) -> None:
    res = subprocess.run([str(REPO / "contrib/kernel/install.d/90-hwmgr-gate.install"),
                          "remove", "9.9.9-none"], env={**os.environ, "HWMGR": "false"},
                         capture_output=True, text=True, timeout=60, check=False)
    assert (res.returncode, res.stderr) == (0, "")


# ------------------------------------------------------------------ a real build (slow)
def _modinfo_fields(kver: str, name: str) -> dict[str, str]:
    """`modinfo -k KVER NAME` as field -> value (a continued field keeps its first line)."""
    info = subprocess.run(["modinfo", "-k", kver, name], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    out: dict[str, str] = {}
    for ln in info.splitlines():
        k, sep, v = ln.partition(":")
        if sep and not k.startswith((" ", "\t")):
            out.setdefault(k.strip(), v.strip())
    return out


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def headers_not_running() -> str:
    """A kernel with headers that this machine does not run (Debian's 6.1 here)."""
    if os.geteuid() != 0 or not shutil.which("dkms") or not shutil.which("rpmbuild"):
        pytest.skip("needs root, dkms and rpmbuild")
    from support.lifecycle_env import headers_kernel

    kver = headers_kernel()
    if kver is None or kver == os.uname().release:
        pytest.skip("no kernel with headers that is not the running one")
    return kver


SB_GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"  # EFI_GLOBAL_VARIABLE


def secure_boot_root(tmp: Path, on: bool) -> Host:
    """A root whose SecureBoot efivar holds what the kernel exposes: 4 bytes of attributes
    (NV|BS|RT = 0x06, little-endian) then the value byte."""
    var = tmp / f"sys/firmware/efi/efivars/SecureBoot-{SB_GUID}"
    var.parent.mkdir(parents=True)
    var.write_bytes(b"\x06\x00\x00\x00" + (b"\x01" if on else b"\x00"))
    return Host(tmp, SubprocessRunner())


@pytest.mark.slow
@pytest.mark.parametrize("case", ["builds", "fails-to-build", "secure-boot-signed",
                                  "secure-boot-no-key"])
def test_real_gate_for_a_kernel_installed_but_not_running(
        case: str, headers_not_running: str, tmp_path: Path) -> None:
    """A managed test module (tests/kmod) in a scratch state dir: the gate's real DKMS build,
    install for that kernel only, depmod and modinfo checks; or, when the source does not
    compile, not ready quoting the make line and the kept log. With Secure Boot on (read from
    the efivar by guard.secure_boot): DKMS signs with the openssl-made key the upgrade
    recorded (sign-file) and modinfo's signer and key serial are that key's; with no key to
    sign with, the gate says not ready and why. /lib/modules/KVER/updates and DKMS end exactly
    as they were."""
    import dataclasses

    from support import srpmfactory
    from support.lifecycle_env import mok_pair, same_serial

    from hwmgr.inventory import guard
    from hwmgr.lifecycle.builds.dkms import Dkms, render_dkms_conf
    from hwmgr.lifecycle.builds.recipe import ModuleSpec, load_recipe
    from hwmgr.lifecycle.builds.srpm import unpack_srpm

    broken, sb = case == "fails-to-build", case.startswith("secure-boot")
    kver = headers_not_running
    name = {"builds": "hwmgrtest_gate", "fails-to-build": "hwmgrtest_gatebad",
            "secure-boot-signed": "hwmgrtest_gatesb",
            "secure-boot-no-key": "hwmgrtest_gatenk"}[case]
    version = f"1.0.{os.getpid()}"
    recipe = dataclasses.replace(load_recipe("hwmgrtest"), driver=name, srpm_name=name,
                                 tarball=f"{name}-{{version}}.tar.gz",
                                 subdir=f"{name}-{{version}}", modules=(ModuleSpec(name),))
    host = Host("/", SubprocessRunner(), writable=[tmp_path])
    updates = Path(f"/lib/modules/{kver}/updates")
    before = _tree(updates)
    existed = {d: d.exists() for d in (updates / "dkms", updates)}
    cn = f"hwmgr test MOK {name} {version}"
    key, cert, serial = mok_pair(tmp_path, cn) if case == "secure-boot-signed" else (
        tmp_path / "mok.key", tmp_path / "mok.pub", "")
    dkms = Dkms(host, mok_key=key, mok_cert=cert)
    if case == "secure-boot-no-key":  # no sign-file to sign with: DKMS says it and goes on
        dkms.env["sign_file"] = str(tmp_path / "no-sign-file")
    secure_boot = guard.secure_boot(secure_boot_root(tmp_path / "efi", True)) if sb \
        else guard.secure_boot(host)
    assert secure_boot is True or not sb, "mokutil answered for this machine, not the efivar"
    if dkms.is_added(name, version) or Path(f"/usr/src/{name}-{version}").exists():
        pytest.skip(f"{name}/{version} exists on this host already; not touching it")
    srpm = srpmfactory.build_srpm(name, version, tmp_path / "srpm", broken=broken)
    tree = unpack_srpm(host, srpm, tmp_path / "work", recipe, version)
    try:
        dkms.add(tree, name, version, dkms_conf=render_dkms_conf(recipe, version))
        state = StateDir(host, str(tmp_path / "state"))
        j = state.journal()
        params = {"driver": name, "version": version, "modules": [name], "kernels": [kver],
                  "initramfs": [], "drivers_dir": str(tmp_path / "no-recipes"),
                  "sign_key": str(key), "sign_cert": str(cert)}
        j.set_txn(j.begin("upgrade", name, params, []), state="committed")
        (m,) = kernelgate.managed_drivers(state)
        assert (m.sign_key, m.sign_cert) == (str(key), str(cert))  # what the gate signs with
        r = kernelgate.gate_driver(host, state, m, kver, secure_boot, dkms=dkms)
        rec = kernelgate.write_record(host, state, kver, os.uname().release, [r])
        state.close()
        if broken:
            log = tmp_path / f"state/logs/gate-{kver}-{name}-{version}.make.log"
            assert not r.ready and f"dkms build of {name}/{version} for kernel {kver} failed" \
                in r.why and f"whole log kept in {log}" in r.why, r.why
            assert r.facts["make_line"] in r.why and "this_does_not_compile" in log.read_text()
            assert not Path(f"/lib/modules/{kver}/updates/dkms/{name}.ko").exists()
            return
        if case == "secure-boot-no-key":
            assert not r.ready and r.why == (
                f"{name}: unsigned while Secure Boot is on: the module would not load (give "
                "DKMS a module-signing key: HWMGR_SIGN_KEY/HWMGR_SIGN_CERT at upgrade, or "
                "/var/lib/dkms/mok.key)"), r.why
            assert rec["ready"] is False and rec["drivers"][name]["ready"] is False
            assert "signer" not in _modinfo_fields(kver, name)
            return
        assert r.ready, r.why
        ko = f"/lib/modules/{kver}/updates/dkms/{name}.ko"
        fields = _modinfo_fields(kver, name)
        if case == "secure-boot-signed":  # signed by the key given, read back by modinfo
            assert fields["signer"] == cn and fields["sig_hashalgo"], fields
            assert same_serial(fields["sig_key"], serial), (fields["sig_key"], serial)
            assert r.facts[name]["signature"] == f"signed by {cn}"
        assert fields["filename"] == ko and fields["version"] == version
        assert fields["vermagic"].split()[0] == kver
        got = r.facts[name]
        assert (got["path"], got["version"], got["vermagic"]) == (ko, version,
                                                                  fields["vermagic"])
        assert got["signature"] == (f"signed by {fields['signer']}" if fields.get("signer")
                                    else "unsigned: Secure Boot off")
        assert r.facts["symvers"] == f"/lib/modules/{kver}/build/Module.symvers"
        assert rec["ready"] is True and rec["drivers"][name]["ready"] is True
        # an armed expectation of the same version gains KVER, so `verify` after booting it
        # checks the files the gate installed (and one of another version is left alone)
        exp_dir = tmp_path / "state/expectations"
        exp_dir.mkdir(parents=True, exist_ok=True)
        armed = {"format": "hwmgr-expectation", "version": 1, "driver": name,
                 "expected_version": version, "modules": [name], "kernels": {"other": {}}}
        (exp_dir / f"{name}.json").write_text(json.dumps(armed))
        assert kernelgate.extend_expectation(host, state, kver, r) == str(exp_dir / f"{name}.json")
        files = json.loads((exp_dir / f"{name}.json").read_text())["kernels"]
        assert set(files) == {"other", kver}
        assert files[kver][name]["path"] == ko and files[kver][name]["version"] == version
        assert files[kver][name]["sha256"] == hashlib.sha256(Path(ko).read_bytes()).hexdigest()
        (exp_dir / f"{name}.json").write_text(json.dumps({**armed, "expected_version": "0.9"}))
        assert kernelgate.extend_expectation(host, state, kver, r) is None
        assert not Path(f"/lib/modules/{os.uname().release}/updates/dkms/{name}.ko").exists()
    finally:
        dkms.remove(name, version, "all", delete_source=True, depmod=False)
        host.remove(f"/lib/modules/{kver}/updates/dkms/{name}.ko")
        for d in (updates / "dkms", updates):  # the dirs DKMS made for it, when now empty
            if not existed[d] and d.is_dir() and not any(d.iterdir()):
                d.rmdir()
        subprocess.run(["depmod", kver], check=False)
    assert _tree(updates) == before and updates.exists() == existed[updates]


def test_check_shows_the_gate_record_of_a_snapshot(tmp_path: Path) -> None:
    """`check --root` of a snapshot whose state dir manages be2net and gated a newer kernel
    that failed: one drift item, valid against check's JSON schema, exit 5."""
    import json

    import jsonschema

    root = tmp_path / "snap"
    shutil.copytree(REPO / "tests/fixtures/hosts/seed002-after", root, symlinks=True)
    meta = json.loads((root / "snapshot.json").read_text())
    (root / "snapshot.json").write_text(json.dumps({**meta, "records": [
        *meta["records"], "state"]}))
    new = "3.10.0-1160.el7.x86_64"
    (root / f"lib/modules/{new}").mkdir(parents=True)
    (root / f"boot/vmlinuz-{new}").parent.mkdir()
    (root / f"boot/vmlinuz-{new}").write_bytes(b"")
    host = Host(root, SubprocessRunner())
    manage(host, "be2net", "12.0.0.0")
    why = f"kernel headers for {new} are not installed: install kernel-devel-{new}"
    kernelgate.write_record(host, StateDir(host, STATE), new, meta["kernel"], [
        kernelgate.Readiness("be2net", "12.0.0.0", False, why)])
    res = run_cli("check", "--root", str(root), "--json", env={"HWMGR_STATE_DIR": STATE})
    data = json.loads(res.stdout)["data"]
    schema = json.loads((REPO / "hwmgr/schemas/check.schema.json").read_text())
    jsonschema.validate(data, schema)
    (item,) = [f for f in data["findings"] if f["item"].startswith("kernel_ready.")]
    assert item == {"layer": "driver", "device": None, "interface": None,
                    "item": f"kernel_ready.be2net.{new}", "expected": "yes", "actual": "no",
                    "status": "drift", "reason": f"be2net ready for kernel {new}: no: {why} "
                                                 f"(then: hwmgr kernel-gate {new})",
                    "fix": None, "source": None}
    assert res.returncode == 5
    table = run_cli("check", "--root", str(root), env={"HWMGR_STATE_DIR": STATE}).stdout
    assert f"be2net ready for kernel {new}: no: kernel headers for {new}" in " ".join(
        table.split())


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_hooks_log_an_interrupted_gate_and_exit_0(hook: str, tmp_path: Path) -> None:
    """A gate that ends 130 (a signal: not gated, default held) is logged as such."""
    gate = tmp_path / "gate"
    gate.write_text("#!/bin/sh\necho 'hwmgr kernel-gate: interrupted by SIGTERM at step 1' >&2\n"
                    "exit 130\n")
    gate.chmod(0o755)
    res = subprocess.run([str(REPO / "contrib/kernel" / hook), *HOOKS[hook]],
                         env={**os.environ, "HWMGR": str(gate)}, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert "hwmgr kernel-gate 9.9.9-none: exit 130 (interrupted: not gated, boot default held " \
           "on the running kernel)" in res.stderr
