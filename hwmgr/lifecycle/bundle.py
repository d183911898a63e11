"""What `hwmgr snapshot` records beyond the inventory: everything plan, verify and check read.

The record names and the lists of commands and sysctls live in `hwmgr.host.capture` (the
seam's layer, so readers can ask whether a snapshot holds a record); running them needs the
lifecycle's knowledge of kernels, recipes and module files, so it lives here.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from hwmgr.errors import HwmgrError
from hwmgr.host.capture import (
    BOOT_ID_PATH,
    ETHTOOL_QUERIES,
    ETHTOOL_VERSION_ARGV,
    IP_LINK_ARGV,
    KVER,
    NET_SYSCTLS,
    RECORDS,
    SYSTEMCTL_VERSION_ARGV,
    TIMEOUT,
    sysctl_path,
)
from hwmgr.host.ifname import tool_safe
from hwmgr.host.seam import Host
from hwmgr.inventory import guard as safety
from hwmgr.lifecycle import INSTALL_TREE
from hwmgr.lifecycle.builds import kmod
from hwmgr.lifecycle.builds.headers import kernels_with_headers
from hwmgr.lifecycle.builds.recipe import load_recipe


def target_kernels(host: Host) -> list[str]:
    """The running kernel and every kernel with headers (what `plan` targets by default)."""
    running = host.read_attr("/proc/sys/kernel/osrelease")
    return list(dict.fromkeys(([running] if running else []) + kernels_with_headers(host)))


def bound_modules(devices: Iterable[Mapping[str, object]], drivers_dir: str | None = None
                  ) -> list[str]:
    """Module names of every bound driver (and the modules its recipe builds, if any), from
    the inventory's JSON devices."""
    names: list[str] = []
    for d in devices:
        for drv in (d.get("driver"), d.get("pci_driver")):
            if isinstance(drv, str) and drv and drv not in names:
                names.append(drv)
    for drv in list(names):
        try:
            mods = load_recipe(drv, drivers_dir).module_names
        except HwmgrError:
            continue  # most drivers have no recipe: the driver name is the module
        names += [m for m in mods if m not in names]
    return names


def record_all(host: Host, devices: Iterable[Mapping[str, object]],
               drivers_dir: str | None = None,
               sysctls: Iterable[str] = NET_SYSCTLS) -> list[str]:
    """Read and run everything in this module through a recording `host`; the record names.
    `drivers_dir` (the config's) is searched for recipes before the shipped ones; `sysctls`
    (`capture.sysctls_to_record`: the fixed list and the catalog's) are copied."""
    kernels = target_kernels(host)  # lists /lib/modules: HEADERS
    for k in kernels:
        if host.exists(f"{INSTALL_TREE}/{k}/build/Makefile"):
            host.read_bytes(f"{INSTALL_TREE}/{k}/build/Makefile")
    modules = bound_modules(devices, drivers_dir)
    for k in kernels:
        for m in modules:
            host.run(["modinfo", "-k", k, m], timeout=kmod.QUICK)
    safety.default_route_interfaces(host)
    host.run(["ip", "-o", "addr", "show"], timeout=TIMEOUT)
    host.run(list(ETHTOOL_VERSION_ARGV), timeout=TIMEOUT)
    for ifname in host.listdir("/sys/class/net", tool_safe):
        if ifname != "lo":
            for q in ETHTOOL_QUERIES:
                host.run(["ethtool", *q, ifname], timeout=TIMEOUT)
    host.run(list(IP_LINK_ARGV), timeout=TIMEOUT)
    host.run(list(SYSTEMCTL_VERSION_ARGV), timeout=TIMEOUT)
    for name in sysctls:
        host.read_bytes(sysctl_path(name))
    host.read_bytes(BOOT_ID_PATH)
    host.listdir("/sys/firmware", re.compile("efi"))  # EFI or legacy boot, as a name
    safety.secure_boot(host)
    host.listdir("/boot", re.compile(r"initrd\.img-.+|initramfs-.+\.img"))
    for k in kernels:
        if KVER.fullmatch(k):
            kmod.in_initramfs(host, [], k)
    return list(RECORDS)
