"""Which kernels have headers here, and which package gives them: what a build needs first."""

from __future__ import annotations

import re

from hwmgr.host.seam import Host
from hwmgr.lifecycle import INSTALL_TREE

OS_RELEASE = "/etc/os-release"


def os_ids(host: Host) -> list[str]:
    """ID and ID_LIKE words from the host's /etc/os-release (lower case)."""
    ids: list[str] = []
    for line in (host.read_text(OS_RELEASE) or "").splitlines():
        key, _, value = line.partition("=")
        if key in ("ID", "ID_LIKE"):
            ids += value.strip().strip("\"'").lower().split()
    return ids


def headers_package(host: Host, kver: str) -> str:
    """The distribution package that provides kernel headers for `kver` (EL 6 has no
    os-release: its redhat-release, or an `.elN` kernel, says EL)."""
    ids = os_ids(host)
    if not ids and (host.exists("/etc/redhat-release") or re.search(r"\.el\d", kver)):
        ids = ["rhel"]
    if any(i in ("rhel", "fedora", "centos", "rocky", "almalinux", "ol") for i in ids):
        return f"kernel-devel-{kver}"
    if any(i in ("suse", "sles", "opensuse") for i in ids):
        return "kernel-default-devel"
    return f"linux-headers-{kver}"


def kernels_with_headers(host: Host) -> list[str]:
    """Kernel releases under /lib/modules whose `build` dir holds usable headers."""
    found = []
    for kver in host.listdir(INSTALL_TREE):
        if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+~-]*", kver) and host.exists(
            f"{INSTALL_TREE}/{kver}/build/Makefile"
        ):
            found.append(kver)
    return found
