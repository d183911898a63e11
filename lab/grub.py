"""The lab's firmware + GRUB: which installed kernel the guest boots next, read from its disk.

The lab starts QEMU with -kernel/-initrd, so for a VM made with `grub=True` the harness plays
the boot loader. Debian's GRUB (grub-mkconfig's 10_linux) lists the installed kernels newest
first, so menu entry 0 is the newest. With `GRUB_DEFAULT=saved` in /etc/default/grub it boots
/boot/grub/grubenv's `saved_entry` (a title path such as "Advanced options for Debian
GNU/Linux>Debian GNU/Linux, with Linux K", or an id such as "gnulinux-K-advanced-UUID"), and
entry 0 when that entry names no installed kernel; `GRUB_DEFAULT=0` (Debian's default) boots
entry 0. Before each boot the harness reads the two files and /boot from the guest's disk (a
raw copy of the qcow2 overlay read with debugfs, no mounts) and hands QEMU that kernel's own
/boot/vmlinuz-K and /boot/initrd.img-K. Not emulated (a LabError says so): grub-reboot's
`next_entry`, and numeric defaults other than 0.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab.image import LabError, run


@dataclass(frozen=True)
class Choice:
    """The kernel GRUB boots next, why, and its boot files copied out of the guest's /boot."""

    kernel: str
    why: str
    vmlinuz: Path | None = None
    initrd: Path | None = None


def _natural(kver: str) -> list[tuple[int, str]]:
    """Sort key close to GRUB's version_sort: digit runs compare as numbers."""
    return [(int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"(\d+)", kver) if p]


def names(entry: str, kver: str) -> bool:
    """Whether a GRUB menu entry (title path or id) boots kernel `kver`."""
    title = re.search(r"with Linux (\S+)(?: \(recovery mode\))?$", entry)
    return (title is not None and title.group(1) == kver) or f"gnulinux-{kver}-" in entry


def grub_default(text: str) -> str:
    """GRUB_DEFAULT's value in /etc/default/grub (its last assignment; 0 when unset)."""
    found = re.findall(r"^\s*GRUB_DEFAULT=(.*)$", text, re.M)
    return found[-1].strip().strip("\"'") if found else "0"


def grubenv(text: str) -> dict[str, str]:
    """The variables of /boot/grub/grubenv (key=value lines; the '#' padding skipped)."""
    env = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, _, v = line.partition("=")
            env[k] = v
    return env


def choose(default_text: str, env_text: str, kernels: list[str]) -> Choice:
    """The kernel Debian's GRUB boots with these two files and these installed kernels."""
    if not kernels:
        raise LabError("no /boot/vmlinuz-* on the guest's disk")
    newest = max(kernels, key=_natural)
    default, env = grub_default(default_text), grubenv(env_text)
    if env.get("next_entry"):
        raise LabError(f"grubenv next_entry={env['next_entry']!r}: grub-reboot is not emulated")
    if default == "saved":
        entry = env.get("saved_entry", "")
        for k in kernels:
            if entry and names(entry, k):
                return Choice(k, f"GRUB_DEFAULT=saved, saved_entry={entry!r}")
        return Choice(newest, f"GRUB_DEFAULT=saved, saved_entry={entry!r} names no installed "
                              "kernel: entry 0, the newest")
    if default == "0":
        return Choice(newest, "GRUB_DEFAULT=0: entry 0, the newest kernel")
    for k in kernels:
        if names(default, k):
            return Choice(k, f"GRUB_DEFAULT={default!r}")
    raise LabError(f"GRUB_DEFAULT={default!r} is not emulated by the lab (saved, 0, or a title)")


def _debugfs(raw: Path, request: str) -> str:
    res = subprocess.run(["debugfs", "-R", request, str(raw)], capture_output=True, text=True,
                         timeout=120, check=False)
    return res.stdout


def next_boot(overlay: Path, work: Path) -> Choice:
    """What GRUB boots next from this qcow2 disk, with that kernel's vmlinuz and initrd."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    raw = work / "disk.raw"
    try:
        run(["qemu-img", "convert", "-f", "qcow2", "-O", "raw", str(overlay), str(raw)],
            what="qemu-img convert (reading the guest's /boot)", timeout=600)
        listing = _debugfs(raw, "ls -p /boot")
        kernels = sorted({m.group(1) for m in re.finditer(r"/vmlinuz-([^/]+)/", listing)})
        c = choose(_debugfs(raw, "cat /etc/default/grub"),
                   _debugfs(raw, "cat /boot/grub/grubenv"), kernels)
        files = {}
        for name in ("vmlinuz", "initrd.img"):
            dest = work / f"{name}-{c.kernel}"
            _debugfs(raw, f"dump /boot/{name}-{c.kernel} {dest}")
            if not dest.is_file() or dest.stat().st_size == 0:
                raise LabError(f"the guest's disk has no /boot/{name}-{c.kernel}")
            files[name] = dest
        return Choice(c.kernel, c.why, files["vmlinuz"], files["initrd.img"])
    finally:
        raw.unlink(missing_ok=True)
