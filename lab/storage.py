"""The storage scenario's guest steps (issue 23, part 4): megaraid_sas on the SAS 2108 with the
initramfs, riding on chain a's disk so it costs no boot of its own to start.

Its first step runs at the end of chain a's boot 5 (the e1000e story is over there: inbox
driver, nothing armed); its next two boots continue that disk (tests/lab/test_storage.py).
`HWMGR_LAB_STORAGE=0` leaves it out (chain a then ends at boot 5 as before).
"""

from __future__ import annotations

import os

from lab import raidsrpm
from lab.chain import wanted
from lab.vm import PKGS

V = raidsrpm.VERSION
INBOX = "07.719.03.00-rc1"  # Debian 12's in-tree megaraid_sas (kernel 6.1)
BUILD_BOOT = 900  # seconds: install the package built on the host (lab/binpkg.py), initramfs
IMAGE = "/boot/initrd.img-$(uname -r)"
RECORD = (f"sha256sum {IMAGE} | cut -d' ' -f1 > /lab/out/initrd.sha\n"
          f"lsinitramfs {IMAGE} | grep megaraid_sas > /lab/out/initrd.list\n"
          "dmesg > /lab/out/dmesg.txt\nfacts_end\n")
# s#1 (the tail of chain a's boot 5): inbox from the initramfs; upgrade (its JSON holds the
# plan it carried out) → reboot
UPGRADE = (RECORD +
           # the running kernel only: the image's second kernel is the kernel gate's
           # the binary package built once on the host (the rollout's build-once path): no
           # DKMS build under TCG on chain a's path
           f"install -D -m644 -t /etc/hwmgr/catalog.d {PKGS}/*.json\n"
           f"rec upgrade hwmgr upgrade megaraid_sas --to {V} --package {PKGS}/megaraid*.deb "
           "--kernel \"$(uname -r)\" --yes --json\n"
           f"sha256sum {IMAGE} | cut -d' ' -f1 > /lab/out/initrd-after.sha\n"
           f"lsinitramfs {IMAGE} | grep megaraid_sas > /lab/out/initrd-after.list\n"
           "reboot_after")
# s#2 and s#3: the boots of their own (boot() keywords with each)
PLAN = [(RECORD + "rec rollback hwmgr rollback megaraid_sas --yes --json\n"
         f"sha256sum {IMAGE} | cut -d' ' -f1 > /lab/out/initrd-after.sha\nreboot_after",
         {"timeout": 900}),
        (RECORD + "rec history hwmgr history megaraid_sas --json", {"timeout": 600})]


def enabled() -> bool:
    """Whether this run carries the storage scenario (HWMGR_LAB_STORAGE=0 or a
    HWMGR_LAB_CHAINS list without "s" leave it out)."""
    return os.environ.get("HWMGR_LAB_STORAGE", "1") != "0" and wanted("s")
