"""Safety checks before touching a driver: routes, the SSH session, Secure Boot, space.

Each check reads the host through the seam and answers facts; `lifecycle.plan_*` turns them
into refusals with the interface or path named.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Mapping

from hwmgr.host.seam import Host

SB_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
DKMS_MOK_KEY = "/var/lib/dkms/mok.key"
DKMS_MOK_CERT = "/var/lib/dkms/mok.pub"


def default_route_interfaces(host: Host) -> set[str]:
    """Interfaces carrying an IPv4 or IPv6 default route (from /proc/net)."""
    out: set[str] = set()
    for line in (host.read_text("/proc/net/route") or "").splitlines()[1:]:
        f = line.split()
        if len(f) >= 8 and f[1] == "00000000" and f[7] == "00000000":
            out.add(f[0])
    for line in (host.read_text("/proc/net/ipv6_route") or "").splitlines():
        f = line.split()
        if len(f) >= 10 and f[0] == "0" * 32 and f[1] == "00" and f[9] != "lo":
            out.add(f[9])
    return out


def ssh_interface(host: Host, env: Mapping[str, str] | None = None) -> str | None:
    """The interface holding the local address of the current SSH session, if any."""
    conn = (env if env is not None else os.environ).get("SSH_CONNECTION", "").split()
    if len(conn) != 4:
        return None
    try:
        local = ipaddress.ip_address(conn[2])
    except ValueError:
        return None
    res = host.run(["ip", "-o", "addr", "show"], timeout=10)
    for line in res.stdout.splitlines() if res.ok else []:
        f = line.split()
        if len(f) >= 4 and f[2] in ("inet", "inet6"):
            try:
                if ipaddress.ip_interface(f[3]).ip == local:
                    return f[1].rstrip(":").split("@")[0]
            except ValueError:
                continue
    return None


def secure_boot(host: Host) -> bool | None:
    """True/False when Secure Boot state is known (mokutil, else efivars), None otherwise."""
    res = host.run(["mokutil", "--sb-state"], timeout=10)
    text = (res.stdout + res.stderr).lower()
    if "secureboot enabled" in text:
        return True
    if "secureboot disabled" in text or "not supported" in text:
        return False
    data = host.read_bytes(SB_VAR)
    if data is not None and len(data) >= 5:
        return data[4] == 1
    if not host.is_dir("/sys/firmware/efi"):
        return False  # legacy BIOS boot: no Secure Boot
    return None


def signing_key(host: Host, key: str | None = None, cert: str | None = None) -> bool:
    """True when a module-signing key and certificate are configured (DKMS's MOK by default)."""
    return host.exists(key or DKMS_MOK_KEY) and host.exists(cert or DKMS_MOK_CERT)
