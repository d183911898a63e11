"""Ctrl-C and SIGTERM during real upgrades and rollbacks (`python -m hwmgr` processes, real
rpm, dkms and make): the first signal is answered on stderr before anything is undone, the
command in flight is stopped instead of waited for, the steps done are undone, the exit is
130, and the host's DKMS tree, sources and modules are byte for byte as before.

The blocking step is real: version 2.0 of this module's sources holds a Kbuild file whose
make-time `$(shell ...)` writes its pid and then reads a FIFO nobody writes, so `dkms build`
runs until it is stopped; the upgrade can only end if hwmgr stops it. The other steps get the
signal from the engine's test hook at the moment the journal says they started.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
from support import HWMGR, REPO
from support.lifecycle_env import headers_kernel, serve, write_catalog
from support.srpmfactory import build_srpm

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.dkms import Dkms
from hwmgr.transaction.state import StateDir

pytestmark = pytest.mark.slow  # DKMS builds of a test module of its own

MODULE = "hwmgrsig"  # not hwmgrtest: other tests clean that one out of DKMS while they run
UPGRADE_STEPS = ["fetch", "unpack", "dkms-add", "dkms-build", "backup", "install",
                 "initramfs", "arm"]
ROLLBACK_STEPS = ["backup", "restore", "arm"]
# the points of no return (commit_point steps): a signal after them finishes, as recover does
UPGRADE_COMMIT, ROLLBACK_COMMIT = UPGRADE_STEPS.index("install"), ROLLBACK_STEPS.index("restore")


def _kbuild(fifo: Path, pidfile: Path) -> tarfile.TarInfo:
    text = (f"obj-m := {MODULE}.o\nccflags-y += -I$(src)\n"
            f"BLOCK := $(shell sh -c 'echo $$$$ > {pidfile}; exec cat {fifo}')\n").encode()
    info = tarfile.TarInfo(f"{MODULE}-2.0/Kbuild")
    info.size, info.mode, info.mtime = len(text), 0o644, int(time.time())
    return info, text  # type: ignore[return-value]


class Bed:
    """This module's SRPMs on 127.0.0.1, a catalog and a recipe for them, private state."""

    def __init__(self, tmp: Path) -> None:
        kver = headers_kernel()
        assert kver, "linux-headers-amd64 must be installed (make test installs it)"
        self.kver, self.tmp = kver, tmp
        served = tmp / "served"
        served.mkdir()
        self.fifo, self.pidfile = tmp / "build.fifo", tmp / "build.pid"
        os.mkfifo(self.fifo)
        srpms = {v: build_srpm(MODULE, v, served) for v in ("1.0", "1.1")}
        srpms["2.0"] = build_srpm(MODULE, "2.0", served,
                                  extra_members=[_kbuild(self.fifo, self.pidfile)])
        self.srv, url = serve(served)
        self.catalog = write_catalog(tmp / "catalog.json", url, srpms)
        doc = json.loads(self.catalog.read_text().replace("hwmgrtest", MODULE))
        self.catalog.write_text(json.dumps(doc))
        drivers = tmp / "drivers" / MODULE
        shutil.copytree(REPO / "drivers" / "hwmgrtest", drivers)
        recipe = drivers / "recipe.json"
        recipe.write_text(recipe.read_text().replace("hwmgrtest", MODULE))
        keys = tmp / "keys"
        keys.mkdir()
        self.env = {
            **os.environ, "HWMGR_STATE_DIR": str(tmp / "state"),
            "HWMGR_CACHE_DIR": str(tmp / "cache"), "HWMGR_DRIVERS_DIR": str(tmp / "drivers"),
            "HWMGR_SIGN_KEY": str(keys / "mok.key"), "HWMGR_SIGN_CERT": str(keys / "mok.pub"),
            "SSH_CONNECTION": "",
        }
        self.env.pop("HWMGR_TEST_CRASH_AT", None)
        self.baseline: dict[str, str] | None = None  # the host's files with 1.0 installed

    def argv(self, verb: str, *args: str) -> list[str]:
        cat = ["--catalog", str(self.catalog)] if verb == "upgrade" else []
        kernel = ["--kernel", self.kver] if verb == "upgrade" else []
        return [*HWMGR, verb, MODULE, *args, *kernel, *cat, "--yes"]

    def run(self, verb: str, *args: str, hook: str | None = None) -> subprocess.CompletedProcess:
        env = {**self.env, **({"HWMGR_TEST_CRASH_AT": hook} if hook else {})}
        return subprocess.run(self.argv(verb, *args), capture_output=True, text=True, env=env,
                              cwd=REPO, timeout=600, check=False)

    def cleanup(self) -> None:
        host = Host("/", SubprocessRunner())
        for e in Dkms(host).status(MODULE):
            Dkms(host).remove(MODULE, e.version, "all", delete_source=True, depmod=False)
        for p in Path("/usr/src").glob(f"{MODULE}-*"):
            shutil.rmtree(p, ignore_errors=True)
        for p in Path(f"/lib/modules/{self.kver}").rglob(f"{MODULE}.ko*"):
            p.unlink()
        shutil.rmtree(f"/var/lib/dkms/{MODULE}", ignore_errors=True)
        host.run(["depmod", "-a", self.kver])
        shutil.rmtree(self.tmp / "state", ignore_errors=True)

    def last(self) -> dict:
        state = StateDir(Host("/", SubprocessRunner()), self.env["HWMGR_STATE_DIR"])
        j = state.read_journal()
        assert j is not None
        assert j.open_transactions() == [], "nothing left open"
        return j.transactions(limit=1)[0]


def host_files(bed: Bed) -> dict[str, str]:
    """Every file and link of this module on the host (DKMS tree, sources, module files), by
    sha256 or link target: what "byte for byte as before" compares."""
    out: dict[str, str] = {}
    roots = [Path("/var/lib/dkms") / MODULE, *Path("/usr/src").glob(f"{MODULE}-*")]
    for root in roots:
        for p in sorted([root, *root.rglob("*")]):
            if p.is_symlink():
                out[str(p)] = "-> " + os.readlink(p)
            elif p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    for p in Path(f"/lib/modules/{bed.kver}").rglob(f"{MODULE}.ko*"):
        out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory):
    b = Bed(tmp_path_factory.mktemp("interrupt"))
    b.cleanup()
    yield b
    b.srv.shutdown()
    b.cleanup()


def _installed(bed: Bed, version: str) -> dict[str, str]:
    """Make `version` the one installed (from nothing), return the host's files then; built
    once: every test leaves the host as it found it, and the next one checks that."""
    if bed.baseline is None or host_files(bed) != bed.baseline:
        bed.cleanup()
        res = bed.run("upgrade", "--to", version)
        assert res.returncode == 0, res.stderr
        bed.baseline = host_files(bed)
    return bed.baseline


def _dead(pid: int) -> bool:
    """The process is gone, or a zombie its new parent has not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _answered_before_undo(stderr: str, line: str) -> list[str]:
    """The stderr lines from the answer on: it is there once, before any undo line."""
    lines = stderr.splitlines()
    at = [i for i, x in enumerate(lines) if x == f"hwmgr: {line}"]
    assert len(at) == 1, stderr
    assert not any(": undo" in x for x in lines[:at[0]]), stderr
    return lines[at[0]:]


def test_ctrl_c_during_dkms_build_stops_it_and_undoes(bed: Bed) -> None:
    before = _installed(bed, "1.0")
    bed.pidfile.unlink(missing_ok=True)
    env = {**bed.env, "HWMGR_TEST_CRASH_AT": "dkms-add:undo:INT"}  # the second Ctrl-C, mid-undo
    proc = subprocess.Popen(bed.argv("upgrade", "--to", "2.0"), env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not bed.pidfile.exists() or not bed.pidfile.read_text().strip():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    build = int(bed.pidfile.read_text())  # make's shell, blocked on the FIFO: dkms build runs
    print(f"\nSIGINT to hwmgr (pid {proc.pid}), dkms build running (make's shell {build})")
    proc.send_signal(signal.SIGINT)  # the FIFO is never written: only stopping it ends this
    out, err = proc.communicate(timeout=300)
    print(err, out, f"exit {proc.returncode}", sep="\n")
    assert proc.returncode == 130, err
    assert _dead(build), "the build was stopped, not left running"
    rest = _answered_before_undo(err, "interrupted: undoing step 4 (dkms-build); Ctrl-C again "
                                 "is ignored until the host is consistent")
    assert "step dkms-add: undo" in "\n".join(rest)
    assert ("hwmgr: SIGINT again: still undoing step 3 (dkms-add); ignored until the host is "
            "consistent") in rest
    assert "rolled back: interrupted by SIGINT during step 'dkms-build'" in err, err
    assert "stopped: hwmgr was interrupted" in err and "the host is as it was before" in err
    last = bed.last()
    assert (last["kind"], last["state"]) == ("upgrade", "rolled-back")
    assert "SIGINT" in last["error"] and "dkms-build" in last["error"]
    assert host_files(bed) == before


@pytest.mark.parametrize("step", [s for s in UPGRADE_STEPS if s != "dkms-build"])
def test_a_signal_at_each_upgrade_step_is_answered_and_undone(bed: Bed, step: str) -> None:
    before = _installed(bed, "1.0")
    sig = "TERM" if UPGRADE_STEPS.index(step) % 2 else "INT"
    res = bed.run("upgrade", "--to", "1.1", hook=f"{step}:before:{sig}")
    n = UPGRADE_STEPS.index(step) + 1
    who = "interrupted" if sig == "INT" else "interrupted by SIGTERM"
    if n - 1 > UPGRADE_COMMIT:
        _finished(bed, res, "upgrade", f"{who}: past the point of no return: finishing step "
                  f"{n} ({step}) and the rest so the host ends in the new state; Ctrl-C "
                  "again is ignored")
        assert host_files(bed) != before and any(f"{MODULE}-1.1" in k for k in host_files(bed))
        return
    assert res.returncode == 130, res.stderr
    _answered_before_undo(res.stderr, f"{who}: undoing step {n} ({step}); Ctrl-C again is "
                          "ignored until the host is consistent")
    last = bed.last()
    assert (last["kind"], last["state"]) == ("upgrade", "rolled-back")
    assert f"SIG{sig}" in last["error"]
    assert host_files(bed) == before


def _finished(bed: Bed, res: subprocess.CompletedProcess, kind: str, line: str) -> None:
    """Past the point of no return: answered at once, nothing undone, committed."""
    assert res.returncode == 0, res.stderr
    rest = _answered_before_undo(res.stderr, line)
    assert not any(": undo" in x for x in rest), res.stderr
    last = bed.last()
    assert (last["kind"], last["state"]) == (kind, "committed")


@pytest.mark.parametrize("step", ROLLBACK_STEPS)
def test_a_signal_at_each_rollback_step_is_answered_and_undone(bed: Bed, step: str) -> None:
    """Before `restore` the rollback is undone; after it (dkms remove has run, the source is
    gone) it finishes, as `recover` would: the first version of this test found that undoing
    `restore` left the DKMS registration and /usr/src/<driver>-<version> behind."""
    before = _installed(bed, "1.0")
    sig = "TERM" if ROLLBACK_STEPS.index(step) % 2 else "INT"
    res = bed.run("rollback", hook=f"{step}:before:{sig}")  # to the inbox state: no module
    n = ROLLBACK_STEPS.index(step) + 1
    who = "interrupted" if sig == "INT" else "interrupted by SIGTERM"
    if n - 1 > ROLLBACK_COMMIT:
        _finished(bed, res, "rollback", f"{who}: past the point of no return: finishing step "
                  f"{n} ({step}) and the rest so the host ends in the new state; Ctrl-C "
                  "again is ignored")
        assert host_files(bed) == {}  # the inbox state: no module of its own
        return
    assert res.returncode == 130, res.stderr
    _answered_before_undo(res.stderr, f"{who}: undoing step {n} ({step}); Ctrl-C again is "
                          "ignored until the host is consistent")
    last = bed.last()
    assert (last["kind"], last["state"]) == ("rollback", "rolled-back")
    assert host_files(bed) == before


# ---------------------------------------------------------------- one answer about reboots
def _hw(bed: Bed, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*HWMGR, *args], capture_output=True, text=True, env=bed.env,
                          cwd=REPO, timeout=600, check=False)


def _statements(bed: Bed) -> dict[str, object]:
    """What each verb says about a pending reboot of this driver now, and its exit code."""
    plan = _hw(bed, "plan", "upgrade", MODULE, "--to", "2.0", "--kernel", bed.kver,
               "--catalog", str(bed.catalog), "--json")
    check = _hw(bed, "check", "--layer", "driver", "--catalog", str(bed.catalog))
    verify = _hw(bed, "verify", "--json")
    history = _hw(bed, "history", "--json")
    rows = json.loads(history.stdout)["data"]["transactions"]
    return {
        "plan": bool(json.loads(plan.stdout)["data"]["reboot_pending"]),
        "check": f"reboot pending: {MODULE}: " in check.stdout,
        "check exit": check.returncode, "check headline": check.stdout.splitlines()[0],
        "verify": json.loads(verify.stdout)["status"], "verify exit": verify.returncode,
        "history": rows[0]["reboot_pending"] == "pending",
    }


PATHS = [("upgrade", ["upgrade", "--to", "1.1"]), ("rollback", ["rollback"]),
         ("rollback to inbox", ["rollback", "--to", "inbox"])]


def test_plan_check_verify_and_history_agree_on_every_path(bed: Bed) -> None:
    """After each path, the plan's promise ("reboot required after this") is what every verb
    says: plan's "pending now", check's reboot_pending and exit 7 (headline REBOOT PENDING),
    verify's reboot-pending (exit 7), history's newest row."""
    _installed(bed, "1.0")
    for name, argv in PATHS:
        verb, *rest = argv
        planned = _hw(bed, "plan", verb, MODULE, *rest, *(
            ["--kernel", bed.kver, "--catalog", str(bed.catalog)] if verb == "upgrade" else []),
            "--json")
        assert planned.returncode == 0, planned.stdout
        promised = json.loads(planned.stdout)["data"]["reboot_required"]
        res = bed.run(verb, *rest)
        assert res.returncode == 0, res.stderr
        said = _statements(bed)
        print(f"\n{name}: plan promised reboot required: {promised}; then {said}")
        want = {"plan": promised, "check": promised, "check exit": 7 if promised else 0,
                "verify": "reboot-pending" if promised else "ok",
                "verify exit": 7 if promised else 0, "history": promised}
        assert {k: said[k] for k in want} == want, (name, said)
        assert ("REBOOT PENDING" if promised else "compliant") in str(said["check headline"])
    bed.baseline = None  # nothing installed now: the next test installs 1.0 again


def _kernel_ready(bed: Bed) -> list[tuple[str, int]]:
    """check's kernel_ready findings for this module (status, and check's exit code)."""
    res = _hw(bed, "check", "--layer", "driver", "--catalog", str(bed.catalog), "--json")
    found = [f["status"] for f in json.loads(res.stdout)["data"]["findings"]
             if f["item"].startswith(f"kernel_ready.{MODULE}.")]
    return [(s, res.returncode) for s in found]


def test_plan_check_verify_and_history_agree_after_a_kernel_gate(bed: Bed,
                                                                  tmp_path: Path) -> None:
    """The kernel-gate path: the gate readies a kernel not yet booted and journals nothing,
    so it neither makes a reboot pending nor settles one. After an upgrade (reboot pending),
    a gate that passes allows the new kernel (boot default untouched) and one that fails
    (here: a site config it cannot read, so it fails closed) holds the default; either way
    plan, check (exit 7: pending, the gate's item ok or drift), verify and history say what
    they said before the gate, and check's kernel_ready item says what the gate decided."""
    _installed(bed, "1.0")
    res = bed.run("upgrade", "--to", "1.1")
    assert res.returncode == 0, res.stderr
    pending = _statements(bed)
    want = {"plan": True, "check": True, "check exit": 7, "verify": "reboot-pending",
            "verify exit": 7, "history": True}
    assert {k: pending[k] for k in want} == want, pending
    image = Path(f"/boot/vmlinuz-{bed.kver}")  # "installed": the headers came without it
    made = not image.exists()
    boot = tmp_path / "boot"
    shutil.copytree(REPO / "tests/fixtures/kernelgate/grub", boot, symlinks=True)
    cfg = boot / "boot/grub/grub.cfg"
    cfg.write_text(cfg.read_text().replace("6.1.0-56-amd64", os.uname().release))
    grub = [boot / "etc/default/grub", boot / "boot/grub/grubenv"]
    before = [p.read_bytes() for p in grub]
    bad = tmp_path / "hwmgr.json"
    bad.write_text("{not json")
    env = {**bed.env, "HWMGR_TEST_BOOT_ROOT": str(boot)}
    try:
        if made:
            image.write_bytes(b"")
        for name, extra, code in (("passed", {}, 0), ("failed", {"HWMGR_CONFIG": str(bad)}, 12),
                                  ("passed again", {}, 0)):
            gate = subprocess.run([*HWMGR, "kernel-gate", bed.kver], capture_output=True,
                                  text=True, env={**env, **extra}, cwd=REPO, timeout=600,
                                  check=False)
            print(f"\ngate {name}: exit {gate.returncode}\n{gate.stdout}{gate.stderr}")
            assert gate.returncode == code, gate.stderr
            said = _statements(bed)
            assert {k: said[k] for k in want} == want, (name, said)
            held = [p.read_bytes() for p in grub] != before
            assert held == (code == 12), name  # passed: the default is the boot loader's own
            assert _kernel_ready(bed) == [("ok" if code == 0 else "drift", 7)], name
    finally:
        if made:
            image.unlink(missing_ok=True)
    bed.baseline = None  # 1.1 installed now
