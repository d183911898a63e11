"""Ctrl-C and SIGTERM during a real `hwmgr kernel-gate` (`python -m hwmgr` processes, real
rpmbuild, dkms, make, depmod, grub-editenv): the first signal is answered on stderr at once,
the command in flight is stopped, the gate ends in its safe state (the kernel recorded as not
gated, DKMS for it either finished or undone, the boot default held on the running kernel)
and exits 130; a signal during the hold or release lets it finish. A later run without a
signal gates the kernel and restores every byte of the boot loader's files.

The kernel is this machine's one with headers that it does not run; the boot loader is a
GRUB test root ($HWMGR_TEST_BOOT_ROOT, tests/fixtures/kernelgate/grub with an entry for the
running kernel), never this machine's. Version 2.0 of the module blocks its `dkms build` on
a FIFO (as in tests/test_interrupt.py): the gate can only end if hwmgr stops it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
from support import HWMGR, REPO
from support.lifecycle_env import headers_kernel
from support.srpmfactory import build_srpm

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.dkms import Dkms, render_dkms_conf
from hwmgr.lifecycle.builds.recipe import ModuleSpec, load_recipe
from hwmgr.lifecycle.builds.srpm import unpack_srpm
from hwmgr.lifecycle.gate import bootloader, gaterecord
from hwmgr.transaction.state import StateDir

pytestmark = pytest.mark.slow  # real DKMS builds for another kernel

MODULE = "hwmgrgsig"  # a module of this test's own: other tests clean theirs out of DKMS
RUNNING = os.uname().release
FIXTURE_RUNNING = "6.1.0-56-amd64"  # the running kernel tests/fixtures/kernelgate/grub names
# the steps of a gate whose one managed driver is ready, numbered as the gate numbers them
READY_STEPS = ["dkms-build", "dkms-install", "depmod", "check", "record", "release"]
BOOT_FILES = (bootloader.GRUB_DEFAULTS, bootloader.GRUBENV, bootloader.GRUB_CFG)


def _kbuild(fifo: Path, pidfile: Path) -> tuple[object, bytes]:
    import tarfile

    text = (f"obj-m := {MODULE}.o\nccflags-y += -I$(src)\n"
            f"BLOCK := $(shell sh -c 'echo $$$$ > {pidfile}; exec cat {fifo}')\n").encode()
    info = tarfile.TarInfo(f"{MODULE}-2.0/Kbuild")
    info.size, info.mode, info.mtime = len(text), 0o644, int(time.time())
    return info, text


class Bed:
    """Versions 1.0 (builds) and 2.0 (blocks) of the module added to DKMS, the kernel made
    "installed" (its image), per test a fresh state dir and GRUB test root."""

    def __init__(self, tmp: Path) -> None:
        if os.geteuid() != 0 or not shutil.which("dkms") or not shutil.which("rpmbuild") \
                or not shutil.which("grub-editenv"):
            pytest.skip("needs root, dkms, rpmbuild and grub-editenv")
        kver = headers_kernel()
        if kver is None or kver == RUNNING:
            pytest.skip("no kernel with headers that is not the running one")
        self.kver, self.tmp = kver, tmp
        self.host = Host("/", SubprocessRunner(), writable=[tmp])
        self.dkms = Dkms(self.host)
        if self.dkms.status(MODULE) or list(Path("/usr/src").glob(f"{MODULE}-*")):
            pytest.skip(f"{MODULE} is in DKMS or /usr/src already; not touching it")
        self.image = Path(f"/boot/vmlinuz-{kver}")
        self.made_image = not self.image.exists()
        if self.made_image:  # "installed": Debian's headers came without the kernel image
            self.image.parent.mkdir(exist_ok=True)
            self.image.write_bytes(b"")
        self.fifo, self.pidfile = tmp / "build.fifo", tmp / "build.pid"
        os.mkfifo(self.fifo)
        recipe = dataclasses.replace(load_recipe("hwmgrtest"), driver=MODULE, srpm_name=MODULE,
                                     tarball=f"{MODULE}-{{version}}.tar.gz",
                                     subdir=f"{MODULE}-{{version}}",
                                     modules=(ModuleSpec(MODULE),))
        for v in ("1.0", "2.0"):
            extra = [_kbuild(self.fifo, self.pidfile)] if v == "2.0" else None
            srpm = build_srpm(MODULE, v, tmp / "srpm", extra_members=extra)  # type: ignore[list-item]
            tree = unpack_srpm(self.host, srpm, tmp / f"work-{v}", recipe, v)
            self.dkms.add(tree, MODULE, v, dkms_conf=render_dkms_conf(recipe, v))
        self.keys = tmp / "keys"
        self.keys.mkdir()

    def fresh(self, tmp: Path, version: str) -> dict[str, str]:
        """A new state dir managing `version`, a new GRUB root, nothing built for KVER;
        returns the env a gate runs with."""
        for e in self.dkms.status(MODULE):
            if e.kernel == self.kver:
                subprocess.run(["dkms", "unbuild", "-m", MODULE, "-v", e.version, "-k",
                                self.kver], capture_output=True, check=True, timeout=120)
        boot = tmp / "boot"
        shutil.copytree(REPO / "tests/fixtures/kernelgate/grub", boot, symlinks=True)
        cfg = boot / "boot/grub/grub.cfg"
        cfg.write_text(cfg.read_text().replace(FIXTURE_RUNNING, RUNNING))
        state = StateDir(Host("/", SubprocessRunner(), writable=[tmp]), str(tmp / "state"))
        j = state.journal()
        params = {"driver": MODULE, "version": version, "modules": [MODULE],
                  "kernels": [RUNNING], "initramfs": [], "drivers_dir": str(tmp / "none"),
                  "sign_key": str(self.keys / "mok.key"),
                  "sign_cert": str(self.keys / "mok.pub")}
        j.set_txn(j.begin("upgrade", MODULE, params, []), state="committed")
        state.close()
        env = {**os.environ, "HWMGR_STATE_DIR": str(tmp / "state"),
               "HWMGR_CACHE_DIR": str(tmp / "cache"), "HWMGR_TEST_BOOT_ROOT": str(boot),
               "SSH_CONNECTION": ""}
        env.pop("HWMGR_TEST_CRASH_AT", None)
        return env

    def argv(self) -> list[str]:
        return [*HWMGR, "kernel-gate", self.kver]

    def run(self, env: dict[str, str], hook: str | None = None) -> subprocess.CompletedProcess:
        env = {**env, **({"HWMGR_TEST_CRASH_AT": hook} if hook else {})}
        return subprocess.run(self.argv(), capture_output=True, text=True, env=env, cwd=REPO,
                              timeout=600, check=False)

    def states(self) -> dict[str, str]:
        """DKMS's state of each version of the module for KVER."""
        return {e.version: e.state for e in self.dkms.status(MODULE) if e.kernel == self.kver}

    def cleanup(self) -> None:
        for e in self.dkms.status(MODULE):
            self.dkms.remove(MODULE, e.version, "all", delete_source=True, depmod=False)
        for p in Path("/usr/src").glob(f"{MODULE}-*"):
            shutil.rmtree(p, ignore_errors=True)
        for p in Path(f"/lib/modules/{self.kver}").rglob(f"{MODULE}.ko*"):
            p.unlink()
        shutil.rmtree(f"/var/lib/dkms/{MODULE}", ignore_errors=True)
        subprocess.run(["depmod", self.kver], check=False, timeout=120)
        if self.made_image:
            self.image.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    b = Bed(tmp_path_factory.mktemp("gatesig"))
    try:
        yield b
    finally:
        b.cleanup()


def boot_bytes(env: dict[str, str]) -> dict[str, bytes]:
    root = Path(env["HWMGR_TEST_BOOT_ROOT"])
    return {p: (root / p.lstrip("/")).read_bytes() for p in BOOT_FILES}


def held_on_running(env: dict[str, str]) -> bool:
    """The GRUB root boots the running kernel's entry by default: GRUB_DEFAULT=saved and
    grubenv's saved_entry is its entry (what GRUB reads at the next boot)."""
    root = Path(env["HWMGR_TEST_BOOT_ROOT"])
    cfg = (root / "boot/grub/grub.cfg").read_text()
    entry = bootloader.grub_entry(cfg, RUNNING)
    env_vals = bootloader.grubenv_values((root / "boot/grub/grubenv").read_bytes())
    defaults = (root / "etc/default/grub").read_text().splitlines()
    return entry is not None and env_vals.get("saved_entry") == entry \
        and "GRUB_DEFAULT=saved" in defaults


def record(env: dict[str, str], kver: str) -> dict:
    return json.loads((Path(env["HWMGR_STATE_DIR"]) / f"kernels/{kver}.json").read_text())


def answered_once(stderr: str, line: str) -> None:
    assert stderr.splitlines().count(f"hwmgr: {line}") == 1, stderr


# each step before it runs; and when it has run, before the next begins (a finished build is
# kept, a finished install undone, depmod run again, a checked install kept)
POINTS = [*((s, "before") for s in READY_STEPS[:-1]),
          *((s, "after") for s in READY_STEPS[:4])]
# what DKMS says for KVER afterwards: never built, a finished build (install undone), installed
BUILT = {"1.0": "built"}
DKMS_AFTER = {("dkms-build", "before"): {}, ("dkms-install", "before"): BUILT,
              ("dkms-build", "after"): BUILT, ("dkms-install", "after"): BUILT}


@pytest.mark.parametrize(("step", "phase"), POINTS)
def test_a_signal_at_each_gate_step_holds_the_default_and_exits_130(
        bed: Bed, step: str, phase: str, tmp_path: Path) -> None:
    env = bed.fresh(tmp_path, "1.0")
    before = boot_bytes(env)
    n = READY_STEPS.index(step) + 1
    sig = "TERM" if (n + (phase == "after")) % 2 else "INT"
    res = bed.run(env, hook=f"{step}:{phase}:{sig}")
    print(f"\n{step}:{phase}:", res.stderr, f"exit {res.returncode}", sep="\n")
    who = "interrupted" if sig == "INT" else "interrupted by SIGTERM"
    assert res.returncode == 130, res.stderr
    answered_once(res.stderr, f"{who}: undoing step {n} ({step}); Ctrl-C again is ignored "
                  "until the host is consistent")
    why = f"interrupted by SIG{sig} at step {n} ({step}): not gated"
    assert res.stderr.splitlines()[-1] == (
        f"hwmgr kernel-gate: {why}; boot default held on {RUNNING} (grub); run hwmgr "
        f"kernel-gate {bed.kver} again")
    assert held_on_running(env)
    rec = record(env, bed.kver)
    assert (rec["ready"], rec["interrupted"]) == (False, why)
    assert rec["drivers"][MODULE]["ready"] is False
    (item,) = gaterecord.check_items(Host("/", SubprocessRunner()), env["HWMGR_STATE_DIR"],
                                     RUNNING)
    assert item["status"] == "drift" and why in item["reason"], item
    # DKMS for KVER: never built, a finished build (its install undone), or installed
    want = DKMS_AFTER.get((step, phase), {"1.0": "installed"})
    assert bed.states() == want, bed.states()
    ko = Path(f"/lib/modules/{bed.kver}/updates/dkms/{MODULE}.ko")
    assert ko.exists() == (want == {"1.0": "installed"})
    if (step, phase) == ("dkms-install", "after"):  # run again: gated, every byte restored
        again = bed.run(env)
        assert again.returncode == 0, again.stderr
        assert "boot default restored (grub): the hold is released" in again.stdout
        assert boot_bytes(env) == before and record(env, bed.kver)["ready"] is True
        assert gaterecord.read_hold(Host("/", SubprocessRunner()),
                                    StateDir(Host("/", SubprocessRunner()),
                                             env["HWMGR_STATE_DIR"])) is None


def test_a_signal_during_release_or_hold_lets_it_finish(bed: Bed, tmp_path: Path) -> None:
    """The hold and the release are the point of no return: answered, finished, the gate's
    own outcome stands (0 ready and released; 12 not ready and held)."""
    env = bed.fresh(tmp_path / "ready", "1.0")
    before = boot_bytes(env)
    res = bed.run(env, hook="release:before:INT")
    assert res.returncode == 0, res.stderr
    answered_once(res.stderr, "interrupted: past the point of no return: finishing step 6 "
                  "(release) and the rest so the host ends in the new state; Ctrl-C again is "
                  "ignored")
    assert record(env, bed.kver)["ready"] is True and boot_bytes(env) == before
    env = bed.fresh(tmp_path / "unready", "9.9")  # not in DKMS: not ready before any build
    res = bed.run(env, hook="hold:before:TERM")
    assert res.returncode == 12, res.stderr
    answered_once(res.stderr, "interrupted by SIGTERM: past the point of no return: "
                  "finishing step 2 (hold) and the rest so the host ends in the new state; "
                  "Ctrl-C again is ignored")
    assert held_on_running(env) and record(env, bed.kver)["interrupted"] is None


def test_ctrl_c_during_the_dkms_build_stops_it_at_once_and_holds(bed: Bed,
                                                                 tmp_path: Path) -> None:
    """A real Ctrl-C from outside while `dkms build` blocks: answered within a second, the
    build's processes gone, nothing registered for KVER, a second Ctrl-C (during the hold)
    answered and ignored, the default held, exit 130."""
    env = bed.fresh(tmp_path, "2.0")
    bed.pidfile.unlink(missing_ok=True)
    env["HWMGR_TEST_CRASH_AT"] = "hold:before:INT"  # the second Ctrl-C, while settling
    proc = subprocess.Popen(bed.argv(), env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: lines.extend(
        (time.monotonic(), ln.rstrip("\n")) for ln in proc.stderr), daemon=True)  # type: ignore[union-attr]
    reader.start()
    deadline = time.monotonic() + 300
    while not bed.pidfile.exists() or not bed.pidfile.read_text().strip():
        assert proc.poll() is None and time.monotonic() < deadline, lines
        time.sleep(0.05)
    build = int(bed.pidfile.read_text())
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()  # type: ignore[union-attr]
    proc.wait(timeout=300)
    reader.join(timeout=30)
    ended = time.monotonic() - sent
    err = [ln for _, ln in lines]
    print("\n" + "\n".join(err), out, f"exit {proc.returncode}", sep="\n")
    first = "hwmgr: interrupted: undoing step 1 (dkms-build); Ctrl-C again is ignored until " \
            "the host is consistent"
    (at,) = [t for t, ln in lines if ln == first]
    print(f"answered {at - sent:.3f} s after SIGINT; exited {ended:.3f} s after it")
    assert at - sent < 1.0 and proc.returncode == 130
    assert ("hwmgr: SIGINT again: still finishing step 2 (hold); ignored until the host is "
            "consistent") in err
    assert not Path(f"/proc/{build}").exists() or \
        Path(f"/proc/{build}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    assert bed.states() == {}, bed.states()  # the stopped build left nothing for KVER
    assert held_on_running(env)
    assert record(env, bed.kver)["interrupted"] == (
        "interrupted by SIGINT at step 1 (dkms-build): not gated")
