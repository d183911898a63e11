"""What `hwmgr snapshot` records beyond the inventory, and how readers learn it is missing.

One place lists every file and command output that `plan`, `verify` and `check` read, so a
snapshot taken by this hwmgr answers them offline. The lists are data: the catalog's rules
(and the next verbs) extend them here. A snapshot says what it recorded in
`snapshot.json` ("hwmgr" version, "records" names); a reader that finds a record name
missing reports "unknown" (exit 11) and asks for a retake instead of guessing.
"""

from __future__ import annotations

import re

from hwmgr.errors import BadInputError
from hwmgr.host.seam import Host

# The hwmgr release whose snapshots hold everything below ("retake it with hwmgr ≥ ...").
CAPTURE_SINCE = "0.2.0"

# Record names written to snapshot.json "records"; readers check them with `lacks`.
MODINFO = "modinfo"  # `modinfo -k KVER MODULE` for every bound driver and target kernel
ROUTES = "routes"  # /proc/net/route, /proc/net/ipv6_route, `ip -o addr show`
HEADERS = "headers"  # /lib/modules/*/build/Makefile for every kernel that has headers
ETHTOOL = "ethtool"  # ETHTOOL_QUERIES for every interface but lo (ifname.tool_safe names)
IP_LINK = "ip-link"  # IP_LINK_ARGV
SYSCTL = "sysctl"  # NET_SYSCTLS as files under proc/sys/
SECURE_BOOT = "secure-boot"  # `mokutil --sb-state`, the SecureBoot efivar, /sys/firmware/efi
INITRAMFS = "initramfs"  # /boot initramfs image names + lsinitramfs/lsinitrd listings
BOOT_ID = "boot-id"  # BOOT_ID_PATH: which boot the snapshot saw (reboot pending or not)
SYSTEMD = "systemd"  # SYSTEMCTL_VERSION_ARGV: which .link keys the host's udev reads
RECORDS = (MODINFO, ROUTES, HEADERS, ETHTOOL, IP_LINK, SYSCTL, SECURE_BOOT, INITRAMFS, BOOT_ID,
           SYSTEMD)
SYSTEMCTL_VERSION_ARGV = ("systemctl", "--version")

# The kernel's random id of the running boot: a transaction committed under the same id as
# now installed something the running kernel has not loaded yet.
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
_BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# ethtool queries per interface: driver info, pause, rings, offloads, channels, coalescing,
# and the plain link settings.
ETHTOOL_QUERIES: tuple[tuple[str, ...], ...] = (
    ("-i",), ("-a",), ("-g",), ("-k",), ("-l",), ("-c",), (),
)
IP_LINK_ARGV = ("ip", "-d", "link", "show")

# The network sysctls that decide 10G throughput and routing, recorded as files under
# /proc/sys/. The catalog names none yet; its rules will add theirs to this tuple.
NET_SYSCTLS: tuple[str, ...] = (
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.somaxconn",
    "net.core.default_qdisc",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_mtu_probing",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_low_latency",
    "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding",
)

KVER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]*")
TIMEOUT = 10.0


_SYSCTL_NAME = re.compile(r"net(?:\.[A-Za-z0-9_@:/+-]+)+")
_SWAP = str.maketrans("./", "/.")


def sysctl_path(name: str) -> str:
    """The `/proc/sys` path of a `net.*` sysctl name; BadInputError for anything else."""
    if not _SYSCTL_NAME.fullmatch(name):
        raise BadInputError(f"sysctl {name!r}: not a net.* sysctl name")
    parts = name.translate(_SWAP).split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BadInputError(f"sysctl {name!r}: empty or relative component")
    return "/proc/sys/" + "/".join(parts)


def boot_id(host: Host) -> str | None:
    """The host's current boot id (a snapshot's recorded one), or None when unknown."""
    if lacks(host, BOOT_ID):
        return None
    raw = host.read_attr(BOOT_ID_PATH)
    return raw if raw is not None and _BOOT_ID.fullmatch(raw) else None


def lacks(host: Host, record: str) -> bool:
    """True when `host` is a snapshot that does not say it recorded `record`."""
    if not host.meta:
        return False  # the live host (or a scratch root): everything is readable
    records = host.meta.get("records")
    return not (isinstance(records, list) and record in records)


def retake(what: str) -> str:
    """The one wording for a snapshot that lacks something a verb needs."""
    return f"snapshot has no recorded {what}; retake it with hwmgr ≥ {CAPTURE_SINCE}"
