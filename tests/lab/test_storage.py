"""A storage driver's upgrade → reboot → verify → rollback → reboot on the SAS 2108, with the
initramfs (issue 23, part 4), proven with real boots of the QEMU lab guest, in every `make
test` and `make lab` (HWMGR_LAB_STORAGE=0 leaves it out).

It shares chain a's disk and its last boot (lab/storage.py): from a#5 on, the guest boots the
initramfs its own /boot holds (not the lab's busybox one), read off the disk as a boot loader
would, and a 64 MiB data disk sits behind the emulated SAS 2108 (`megasas-gen2`). The root
disk stays on virtio; megaraid_sas is in the initramfs because it is listed in
/etc/initramfs-tools/modules, as an admin lists a controller that must come up early. That it
was loaded from the initramfs is read from the kernel log: the driver's `megasas: VERSION`
line comes before the root filesystem is mounted, which only the initramfs can do.

  a#5 (s#1, after the e1000e story ends there) inbox (07.719.03.00-rc1) from the initramfs;
      upgrade to the lab's vendor release from the binary package built once on the host
      (lab/binpkg.py: no DKMS build under TCG), the initramfs kept, rebuilt, checked → reboot
  a#6 (s#2) hwmgr-verify: the loaded module is the new one (version, srcversion = modinfo's),
      loaded from the new initramfs; rollback: the kept initramfs back byte for byte → reboot
  a#7 (s#3) hwmgr-verify: inbox again, from the restored initramfs
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from lab.chain import Chain
from lab.storage import INBOX, V, enabled
from lab.vm import Boot

pytestmark = [pytest.mark.lab, pytest.mark.skipif(
    not enabled(), reason="HWMGR_LAB_STORAGE=0 (or HWMGR_LAB_CHAINS without s): the storage "
                          "scenario left out")]

WAIT = 3600  # a#6 and a#7 queue for the lab's slots behind the forked chains


def loaded(b: Boot) -> dict[str, Any]:
    """megaraid_sas as the guest's own tools saw it: /sys/module, modinfo, its SCSI host."""
    m = b.facts["modules"]["megaraid_sas"]
    return {"sys": m["sys_version"], "srcversion": m["sys_srcversion"],
            "modinfo": m["modinfo"].get("version"), "file": m["modinfo"].get("filename"),
            "modinfo_srcversion": m["modinfo"].get("srcversion"),
            "hosts": sorted(set(b.facts["scsi_hosts"].values()))}


def from_initramfs(b: Boot, version: str) -> bool:
    """The kernel log says `megasas: VERSION` before the root filesystem was mounted."""
    log = b.text("dmesg.txt") or ""
    drv = re.search(rf"megasas: {re.escape(version)}\b", log)
    root = re.search(r"EXT4-fs \(vda\): mounted filesystem", log)
    assert drv and root, f"no megasas {version} / root mount line in the kernel log\n{b.where()}"
    return drv.start() < root.start()


def verified(b: Boot, version: str) -> None:
    doc = b.verify
    assert doc is not None, f"hwmgr-verify.service did not run\n{b.where()}"
    exps = doc["data"]["expectations"]
    assert [(e["driver"], e["expected_version"]) for e in exps] == [("megaraid_sas", version)]
    assert exps[0]["status"] == "verified", (exps[0], b.where())


@pytest.mark.timeout(WAIT)
def test_storage_driver_upgrade_with_initramfs(chains: dict[str, Chain]) -> None:
    b1 = chains["a"].data.get("boot5")
    assert b1 is not None, "chain a did not reach boot 5, which carries the storage upgrade"
    now = loaded(b1)
    assert (now["sys"], now["modinfo"]) == (INBOX, INBOX), now
    assert from_initramfs(b1, INBOX), "the inbox megaraid_sas must come from the initramfs"
    assert "megaraid_sas" in now["hosts"], now  # the SAS 2108 with its data disk is served
    before = (b1.text("initrd.sha") or "").strip()
    upgrade = b1.ok("upgrade")["data"]
    plan, doc = upgrade["plan"], upgrade["transaction"]
    kver = b1.boot_facts["kernel"]  # the running kernel only (--kernel): its image is kept
    assert (plan["kernels"], plan["initramfs"]) == ([kver], {kver: True}), plan
    assert f"initramfs: keep the initramfs of {kver} in the state dir, rebuild it and check " \
        "it holds the new module" in plan["steps"], plan["steps"]
    assert doc["state"] == "committed", doc
    assert [s["name"] for s in doc["steps"]][-2:] == ["initramfs", "arm"], doc["steps"]
    names = [s["name"] for s in doc["steps"]]
    assert not any(n.startswith("dkms") for n in names), names  # installed, not built here
    assert "/updates/hwmgr/megaraid_sas.ko" in (b1.text("initrd-after.list") or ""), \
        "the rebuilt initramfs must hold the packaged module"
    assert (b1.text("initrd-after.sha") or "").strip() not in ("", before)

    b2 = chains["s"].wait(1)  # a#6
    verified(b2, V)
    now = loaded(b2)
    assert (now["sys"], now["modinfo"]) == (V, V), now
    assert now["srcversion"] == now["modinfo_srcversion"], now  # the file it loaded
    assert now["file"].endswith("/updates/hwmgr/megaraid_sas.ko"), now
    assert from_initramfs(b2, V), "the new megaraid_sas must come from the new initramfs"
    assert b2.ok("rollback")["data"]["transaction"]["state"] == "committed"
    assert (b2.text("initrd-after.sha") or "").strip() == before, \
        "the rollback must put the initramfs back byte for byte"

    b3 = chains["s"].wait(2)  # a#7
    verified(b3, INBOX)  # the rollback restores the in-tree version
    now = loaded(b3)
    assert (now["sys"], now["modinfo"]) == (INBOX, INBOX), now
    assert now["srcversion"] == now["modinfo_srcversion"], now
    assert from_initramfs(b3, INBOX) and (b3.text("initrd.sha") or "").strip() == before
    kinds = [(t["kind"], t["state"]) for t in b3.ok("history")["data"]["transactions"]]
    assert kinds[:2] == [("rollback", "committed"), ("upgrade", "committed")], kinds
