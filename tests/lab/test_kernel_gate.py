"""The kernel gate (issue 29) proven with real reboots: `hwmgr kernel-gate KVER2` in the guest,
then the kernel the (emulated) boot loader picks from what the gate left on the disk.

The image has a second kernel, KVER2: another Debian 12 6.1 ABI the lab does not run, with its
headers, pruned modules and initramfs (lab/image.py). Both chains boot with `grub=True`: before
each boot the harness reads /etc/default/grub and grubenv from the guest's disk and boots the
kernel GRUB would (lab/grub.py), with that kernel's own /boot files. KVER2 is an *older* ABI
than the one the lab runs (the newest on the mirror, whose headers the host has), so each run
first points the default at it the way an admin does (`GRUB_DEFAULT=saved`, `update-grub`,
`grub-set-default`): GRUB then boots KVER2 unless the gate holds the default on the running
kernel. The chains fork from chain a's disks (test_lab.py) and add one DKMS build (run a):

  chain g (a's disk after boot 1, 3.8.7 armed): g#1 3.8.7 verified at boot; default → KVER2;
          kernel-gate KVER2 builds 3.8.7 for it → exit 0 | g#2 GRUB boots KVER2: 3.8.7 live
  chain h (a's disk after boot 2, 3.8.8 armed): h#1 3.8.8 verified; default → KVER2;
          kernel-gate: 3.8.8's Makefile refuses KVER2 (lab/srpms.py) → exit 12, held
          | h#2 GRUB boots the old kernel, 3.8.8 live; the admin overrides (--allow-unready:
          exit 0, the hold released, the KVER2 default back); dpkg -r linux-headers-KVER2 →
          kernel-gate exit 12 naming the package, nothing built; held again (read from the
          disk after the boot, as GRUB would read it)
"""

from __future__ import annotations

import os

import pytest

from lab.chain import FORKS, Chain, Plan
from lab.vm import Boot, Lab, e1000e_versions

# part of the lab (make test, make lab); HWMGR_LAB_KERNEL_GATE=0 leaves these chains out
ENABLED = os.environ.get("HWMGR_LAB_KERNEL_GATE", "1") != "0"
pytestmark = [pytest.mark.lab, pytest.mark.skipif(
    not ENABLED, reason="HWMGR_LAB_KERNEL_GATE=0: the kernel gate's lab chains left out")]

V1, V2 = "3.8.7_lab", "3.8.8_lab"
EXIT_NOT_READY = 12
BUILD_BOOT = 1500  # seconds: the gate's DKMS build for KVER2 under TCG, beside other guests
WAIT = 3600  # these chains start after chain a's boots 1 and 2 and share the lab's slots


def _steps(lab: Lab) -> dict[str, str]:
    """The guest-side pieces, with the image's kernels filled in."""
    k2 = lab.img.kver2
    entry = f"Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux {k2}"
    grub_state = ("grep ^GRUB_DEFAULT= /etc/default/grub > /lab/out/grub-default.txt\n"
                  "grub-editenv /boot/grub/grubenv list > /lab/out/grubenv.txt\n")
    gate_json = f"rec gate-json hwmgr kernel-gate {k2} --json\n"
    # runs b and c fail before any build, so the human form (one stderr line) runs too; run a
    # builds, so it runs the gate once (its "ready" line is checked in `hwmgr check`)
    gate = f"rec gate hwmgr kernel-gate {k2}\n" + gate_json + grub_state
    return {
        "gate_once": gate_json + grub_state,
        # the admin's choice: boot KVER2 next (it is older than the running kernel, so GRUB's
        # entry 0 would not be it); update-grub writes the grub.cfg the gate reads entries from
        "point": ("sed -i 's/^GRUB_DEFAULT=.*/GRUB_DEFAULT=saved/' /etc/default/grub\n"
                  "rec update-grub update-grub\n"
                  "grep -E \"^\\s*(menuentry|submenu) \" /boot/grub/grub.cfg "
                  "> /lab/out/grub-menu.txt\n"
                  f"rec set-default grub-set-default '{entry}'\n"),
        "gate": gate,
        "k2_module": (f"modinfo -k {k2} -F version e1000e > /lab/out/k2-version.txt\n"
                      f"modinfo -k {k2} -F vermagic e1000e > /lab/out/k2-vermagic.txt\n"
                      f"modinfo -k {k2} -n e1000e > /lab/out/k2-file.txt\n"),
    }


def plan_g(lab: Lab) -> Plan:
    s = _steps(lab)
    return [(s["point"] + s["gate_once"] + s["k2_module"] + "rec check hwmgr check\nreboot_after",
             {"timeout": BUILD_BOOT}),
            ("rec verify hwmgr verify --json\nrec check hwmgr check", {})]


def plan_h(lab: Lab) -> Plan:
    s, k2 = _steps(lab), lab.img.kver2
    return [(s["point"] + s["gate"] + "rec check hwmgr check\nreboot_after", {}),
            (f"rec override hwmgr kernel-gate {k2} --allow-unready --json\n"
             "grub-editenv /boot/grub/grubenv list > /lab/out/grubenv-override.txt\n"
             f"rec dpkg-r dpkg -r linux-headers-{k2}\n" + s["gate"], {})]


if ENABLED:  # test_lab.py forks only the chains registered here
    FORKS.setdefault("a1", []).append(("g", {"grub": True}, plan_g))
    FORKS.setdefault("a2", []).append(("h", {"grub": True}, plan_h))


# ----------------------------------------------------------------------------- helpers
def chain(chains: dict[str, Chain], name: str) -> Chain:
    c = chains.get(name)
    assert c is not None and c.vm is not None, \
        f"chain {name} was not forked: chain a's upgrade did not commit (see test_lab.py)"
    return c


def grubenv_of(b: Boot, name: str) -> dict[str, str]:
    """`grub-editenv list` as the guest recorded it in `name`."""
    lines = (b.text(name) or "").splitlines()
    return dict(ln.split("=", 1) for ln in lines if "=" in ln)


def grubenv(b: Boot) -> dict[str, str]:
    return grubenv_of(b, "grubenv.txt")


def one_line(b: Boot, name: str) -> str:
    """The single stderr line of a command that must have exited 12 (not ready)."""
    err = [ln for ln in (b.text(f"{name}.err") or "").splitlines() if ln.strip()]
    assert b.rc_of(name) == EXIT_NOT_READY, (b.rc_of(name), err, b.text(f"{name}.out"))
    assert len(err) == 1, err
    return err[0]


def names(entry: str, kver: str) -> bool:
    """A grubenv saved_entry (title path or id path) that boots `kver`."""
    return f"with Linux {kver}" in entry or f"gnulinux-{kver}-" in entry


def assert_vendor(b: Boot, version: str, kver: str, where: str) -> None:
    """uname -r, and ethtool -i, /sys/module and modinfo all say `version` from KVER's DKMS dir."""
    assert b.boot_facts["kernel"] == kver, (where, b.boot_facts.get("kernel"), b.grub)
    v = e1000e_versions(b.boot_facts)
    assert (v["ethtool"], v["sys"], v["modinfo"]) == (version, version, version), (where, v)
    assert v["file"] == f"/lib/modules/{kver}/updates/dkms/e1000e.ko", (where, v)


# ----------------------------------------------------------------------------- run a
@pytest.mark.timeout(WAIT)
def test_gate_a_ready_kernel_boots_with_the_vendor_driver(lab: Lab,
                                                          chains: dict[str, Chain]) -> None:
    """(a) 3.8.7 builds for KVER2 → gate exit 0, default left on KVER2 → reboot → KVER2 runs
    with 3.8.7 live."""
    k1, k2 = lab.img.kver, lab.img.kver2
    g = chain(chains, "g")
    b1 = g.wait(1)
    assert b1.grub and b1.grub[0] == k1, b1.grub  # GRUB_DEFAULT=0: the newest, the lab's own
    assert_vendor(b1, V1, k1, "g#1 (a's disk after 3.8.7 was armed)")
    assert b1.rc_of("update-grub") == 0 and b1.rc_of("set-default") == 0, \
        (b1.text("update-grub.err"), b1.text("set-default.err"))
    assert any(k2 in ln for ln in (b1.text("grub-menu.txt") or "").splitlines()), \
        b1.text("grub-menu.txt")
    data = b1.ok("gate-json")["data"]
    assert (data["kernel"], data["running"], data["ready"], data["held"]) == (k2, k1, True, None)
    assert data["drivers"]["e1000e"]["version"] == V1 and data["drivers"]["e1000e"]["ready"]
    # what the gate installed for KVER2 only, as modinfo -k reads it
    assert (b1.text("k2-version.txt") or "").strip() == V1
    assert (b1.text("k2-vermagic.txt") or "").split()[0] == k2
    assert (b1.text("k2-file.txt") or "").strip() == f"/lib/modules/{k2}/updates/dkms/e1000e.ko"
    # check's row for the gate record: ok, expected yes, actual yes
    assert f"ok kernel_ready.e1000e.{k2} yes yes" in " ".join((b1.text("check.out") or "").split())
    assert names(grubenv(b1).get("saved_entry", ""), k2), grubenv(b1)  # not held: the admin's
    assert b1.reboot_requested

    b2 = g.wait(2)
    assert b2.grub and b2.grub[0] == k2, b2.grub
    assert_vendor(b2, V1, k2, "g#2: GRUB booted the gated kernel")
    assert "eth0" in b2.boot_facts["ethtool"]
    # verify after booting KVER2 checks the module the gate installed there (the gate extended
    # the armed expectation to KVER2), not the running-kernel file it was armed with
    exp = b2.ok("verify")["data"]["expectations"][0]
    assert (exp["expected_version"], exp["status"]) == (V1, "verified"), exp["findings"]
    files = [c["source"] for c in exp["checks"] if c["field"] == "module_file"]
    assert files == [f"/lib/modules/{k2}/updates/dkms/e1000e.ko"], exp["checks"]


# ----------------------------------------------------------------------------- runs b and c
@pytest.mark.timeout(WAIT)
def test_gate_b_unbuildable_driver_holds_the_old_kernel(lab: Lab,
                                                        chains: dict[str, Chain]) -> None:
    """(b) 3.8.8 does not build on KVER2 → gate exit 12 naming e1000e and the error → the
    default held on the running kernel → reboot → the old kernel with 3.8.8 live."""
    k1, k2 = lab.img.kver, lab.img.kver2
    h = chain(chains, "h")
    b1 = h.wait(1)
    assert_vendor(b1, V2, k1, "h#1 (a's disk after 3.8.8 was armed)")
    line = one_line(b1, "gate")
    assert "e1000e" in line and V2 in line and k2 in line, line
    assert "does not support kernel" in line or "build" in line, line
    doc = b1.json("gate-json.out")
    assert b1.rc_of("gate-json") == EXIT_NOT_READY and doc["status"] == "not-ready", doc
    assert doc["data"]["held"]["backend"] == "grub", doc["data"]["held"]
    env = grubenv(b1)
    assert names(env.get("saved_entry", ""), k1), env  # the admin's KVER2 choice was replaced
    assert "GRUB_DEFAULT=saved" in (b1.text("grub-default.txt") or "")
    assert f"e1000e ready for kernel {k2}: no" in " ".join((b1.text("check.out") or "").split())
    assert b1.reboot_requested

    b2 = h.wait(2)
    assert b2.grub and b2.grub[0] == k1, b2.grub
    assert_vendor(b2, V2, k1, "h#2: back on the old kernel")


@pytest.mark.timeout(WAIT)
def test_gate_c_missing_headers_name_the_package(lab: Lab, chains: dict[str, Chain]) -> None:
    """(c) linux-headers-KVER2 removed (dpkg -r) → gate exit 12 naming the package, nothing
    built, the default held: GRUB would boot the running kernel next."""
    k1, k2 = lab.img.kver, lab.img.kver2
    h = chain(chains, "h")
    b2 = h.wait(2)
    # the override first: still not ready (3.8.8), exit 0, the hold released and what the
    # boot loader had before it (the admin's KVER2 default) put back
    over = b2.ok("override")["data"]
    assert over["ready"] is False and over["held"] is None and over["released"], over
    assert names(grubenv_of(b2, "grubenv-override.txt").get("saved_entry", ""), k2)
    assert b2.rc_of("dpkg-r") == 0, b2.text("dpkg-r.err")
    line = one_line(b2, "gate")
    assert f"linux-headers-{k2}" in line and "e1000e" in line, line
    doc = b2.json("gate-json.out")
    why = doc["data"]["drivers"]["e1000e"]["why"]
    assert f"linux-headers-{k2}" in why, why  # stopped before DKMS: nothing was built
    assert doc["data"]["held"]["backend"] == "grub", doc["data"]
    assert names(grubenv(b2).get("saved_entry", ""), k1), grubenv(b2)
    nxt = h.vm.next_kernel()  # what the boot loader would boot now, from the disk itself
    assert nxt.kernel == k1, nxt
