"""What `hwmgr snapshot` records beyond the inventory, and how readers learn it is missing.

One place lists every file and command output that `plan`, `verify` and `check` read, so a
snapshot taken by this hwmgr answers them offline. The lists are data: the catalog's rules
(and the next verbs) extend them here. A snapshot says what it recorded in
`snapshot.json` ("hwmgr" version, "records" names, and the "sysctls" it copied: the fixed
list plus every one the catalog in force names); a reader that finds a record or a sysctl
missing reports "unknown" (exit 11) and says how to take a snapshot that has it — with the
collector's own words for a collector's archive (its host may have no Python).
"""

from __future__ import annotations

import re
from typing import Iterable

from hwmgr.errors import BadInputError
from hwmgr.host.seam import Host

# The hwmgr release whose snapshots hold everything below ("retake it with hwmgr ≥ ...").
CAPTURE_SINCE = "0.2.0"

# Record names written to snapshot.json "records"; readers check them with `lacks`.
MODINFO = "modinfo"  # `modinfo -k KVER MODULE` for every bound driver and target kernel
ROUTES = "routes"  # /proc/net/route, /proc/net/ipv6_route, `ip -o addr show`
HEADERS = "headers"  # /lib/modules/*/build/Makefile for every kernel that has headers
ETHTOOL = "ethtool"  # ETHTOOL_QUERIES for every interface but lo (ifname.tool_safe names) + version
IP_LINK = "ip-link"  # IP_LINK_ARGV
SYSCTL = "sysctl"  # NET_SYSCTLS as files under proc/sys/
SECURE_BOOT = "secure-boot"  # `mokutil --sb-state`, the SecureBoot efivar, /sys/firmware/efi
INITRAMFS = "initramfs"  # /boot initramfs image names + lsinitramfs/lsinitrd listings
BOOT_ID = "boot-id"  # BOOT_ID_PATH: which boot the snapshot saw (reboot pending or not)
STATE = "state"  # the state dir's journal, check history and armed expectations (copied whole)
SYSTEMD = "systemd"  # SYSTEMCTL_VERSION_ARGV: which .link keys the host's udev reads
RECORDS = (MODINFO, ROUTES, HEADERS, ETHTOOL, IP_LINK, SYSCTL, SECURE_BOOT, INITRAMFS, BOOT_ID,
           SYSTEMD)
SYSTEMCTL_VERSION_ARGV = ("systemctl", "--version")
# What the POSIX collector (hwmgr/fleet/collect.sh) records in full: everything `check`
# reads, the routes and the boot id; not the kernel headers, Secure Boot, initramfs or
# systemd listings that only `plan` and `apply` read.
COLLECTOR_RECORDS = (MODINFO, ROUTES, ETHTOOL, IP_LINK, SYSCTL, BOOT_ID)
COLLECTOR = "hwmgr-collect.sh"  # snapshot.json "collector" of the collector's archives

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
# which ethtool answered (part of the ETHTOOL record): an old one does not know -l or -g
ETHTOOL_VERSION_ARGV = ("ethtool", "--version")

# The network sysctls that decide 10G throughput and routing, recorded as files under
# /proc/sys/ by `snapshot` and the collector alike; both add every sysctl the catalog in
# force names (`sysctls_to_record`) and list what they copied in snapshot.json "sysctls".
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


def sysctls_to_record(catalog_names: Iterable[str] = ()) -> list[str]:
    """NET_SYSCTLS, then the catalog's own names (checked: BadInputError for a bad one)."""
    names = list(NET_SYSCTLS)
    for name in catalog_names:
        sysctl_path(name)
        if name not in names:
            names.append(name)
    return names


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


def lacks_sysctl(host: Host, name: str) -> bool:
    """True when `host` is a snapshot that did not copy sysctl `name` (absent from its
    "sysctls" list; before that list, anything outside NET_SYSCTLS was never copied)."""
    if not host.meta:
        return False
    if lacks(host, SYSCTL):
        return True
    listed = host.meta.get("sysctls")
    return name not in (listed if isinstance(listed, list) else NET_SYSCTLS)


def from_collector(host: Host) -> bool:
    """True for an archive written by the POSIX collector (its host may have no Python)."""
    return bool(host.meta) and host.meta.get("collector") == COLLECTOR


def retake(what: str, host: Host | None = None, record: str | None = None) -> str:
    """The one wording for a snapshot that lacks something a verb needs (`record`, when it is
    one of RECORDS): how to take one that has it, on the snapshot's own kind of host. A
    collector's archive comes from a host that may have no Python: the advice is the script
    `hwmgr collect-script` prints, or, for what the collector never records, that fact."""
    if host is None or not from_collector(host):
        return f"snapshot has no recorded {what}; retake it with hwmgr ≥ {CAPTURE_SINCE}"
    if record is not None and record not in COLLECTOR_RECORDS:
        return (f"the collector's archive has no {what}: the shell collector does not record "
                "it (it records what check and inventory read, for the running kernel only); "
                "a `hwmgr snapshot` taken on the host (Python ≥ 3.9) records it")
    return (f"the collector's archive has no recorded {what}; collect again with the script "
            "`hwmgr collect-script` prints, made with the catalog you check against")


def no_state(host: Host, verb: str) -> str:
    """The refusal of `history`/`verify --root` on a snapshot that carries no state dir."""
    if from_collector(host):
        return (f"{verb} --root: the collector's archive carries no hwmgr journal or armed "
                f"expectations (the collector cannot read them); run `hwmgr {verb}` on the host")
    return (f"{verb} --root: this snapshot carries no hwmgr journal or armed expectations; "
            f"retake it with `hwmgr snapshot` ≥ {CAPTURE_SINCE} as root while no transaction "
            "holds the state dir (it copies it then), or "
            f"run `hwmgr {verb}` on the host")


def sysctl_missing(host: Host, name: str) -> str:
    """Why a snapshot has no value for sysctl `name`: made for a catalog that did not name
    it (a collector or snapshot taken for another catalog), with how to get one that has it."""
    how = ("collect again with `hwmgr collect-script --site-catalog ...` for this catalog"
           if from_collector(host) else
           "retake it with `hwmgr snapshot --site-catalog ...` for this catalog")
    return (f"the snapshot did not record {name} (it was made for a catalog that does not "
            f"name it); {how}")
