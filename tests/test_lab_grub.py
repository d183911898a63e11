"""The QEMU lab's GRUB emulation (lab/grub.py): which installed kernel Debian's GRUB boots from
/etc/default/grub, grubenv and /boot, the choice the kernel gate's lab runs rely on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lab.grub import choose  # noqa: E402
from lab.image import LabError  # noqa: E402

K1, K2 = "6.1.0-56-amd64", "6.1.0-55-amd64"
KERNELS = [K2, K1, "6.1.0-9-amd64"]  # 9 < 55 < 56 as GRUB's version sort has it
SAVED = "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_DEFAULT=saved\n"  # the last assignment wins
ENV = "# GRUB Environment Block\nsaved_entry={}\n" + "#" * 900


def test_default_zero_boots_the_newest_by_version_not_by_text() -> None:
    c = choose("GRUB_DEFAULT=0\n", "", KERNELS)
    assert c.kernel == K1 and "entry 0" in c.why
    assert choose("GRUB_TIMEOUT=5\n", "", KERNELS).kernel == K1  # unset: 0


@pytest.mark.parametrize("entry", [
    f"Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux {K2}",
    f"gnulinux-advanced-4f3c>gnulinux-{K2}-advanced-4f3c",  # ids, as update-grub writes them
])
def test_saved_entry_boots_the_kernel_it_names(entry: str) -> None:
    c = choose(SAVED, ENV.format(entry), KERNELS)
    assert c.kernel == K2 and entry in c.why


def test_saved_entry_naming_no_installed_kernel_falls_back_to_entry_0() -> None:
    gone = "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.0-1-amd64"
    assert choose(SAVED, ENV.format(gone), KERNELS).kernel == K1
    assert choose(SAVED, "", KERNELS).kernel == K1
    # a saved_entry is ignored unless GRUB_DEFAULT=saved
    assert choose("GRUB_DEFAULT=0\n", ENV.format(f"gnulinux-{K2}-advanced-x"), KERNELS).kernel \
        == K1


def test_what_is_not_emulated_is_refused() -> None:
    with pytest.raises(LabError, match="grub-reboot is not emulated"):
        choose(SAVED, "next_entry=1\n", KERNELS)
    with pytest.raises(LabError, match="not emulated"):
        choose("GRUB_DEFAULT=2\n", "", KERNELS)
    with pytest.raises(LabError, match="no /boot/vmlinuz"):
        choose(SAVED, "", [])
