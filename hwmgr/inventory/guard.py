"""Safety checks before touching a driver: routes, the SSH session, Secure Boot, space.

Each check reads the host through the seam and answers facts; `lifecycle.plan_*` turns them
into refusals with the interface or path named.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Mapping

from hwmgr.host.seam import Host
from hwmgr.numtext import parse_int, to_int

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


# ---------------------------------------------------------------- the branch we sit on
_TCP_LISTEN, _TCP_ESTABLISHED = "0A", "01"


def _hex_addr(text: str) -> tuple[str, int] | None:
    """/proc/net/tcp{,6} `HEXIP:HEXPORT` (little-endian 32-bit words) → (address, port)."""
    addr, _, port = text.partition(":")
    try:
        raw = bytes.fromhex(addr)
        if len(raw) not in (4, 16):
            return None
        ip = ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        return str(ip), parse_int(port, "port", 16)
    except ValueError:
        return None


def _tcp_sockets(host: Host) -> list[tuple[str, tuple[str, int], tuple[str, int]]]:
    """(state, local, remote) of every TCP socket in this network namespace."""
    out = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in (host.read_text(name) or "").splitlines()[1:]:
            f = line.split()
            if len(f) < 4:
                continue
            local, remote = _hex_addr(f[1]), _hex_addr(f[2])
            if local and remote:
                out.append((f[3], local, remote))
    return out


def sshd_ports(host: Host) -> set[int]:
    """TCP ports sshd listens on: from `ss -tlnp` (process names), else sshd_config, else 22."""
    res = host.run(["ss", "-Htlnp"], timeout=10)
    ports = set()
    for line in res.stdout.splitlines() if res.ok else []:
        if '"sshd' in line:
            f = line.split()
            port = to_int(f[3].rpartition(":")[2]) if len(f) >= 4 else None
            if port is not None and port >= 0:
                ports.add(port)
    if ports:
        return ports
    for line in (host.read_text("/etc/ssh/sshd_config") or "").splitlines():
        f = line.split()
        port = to_int(f[1]) if len(f) == 2 and f[0].lower() == "port" else None
        if port is not None and port >= 0:
            ports.add(port)
    return ports or {22}


def route_interface(host: Host, peer: str) -> str | None:
    """The interface `ip route get PEER` sends through (None when unroutable)."""
    res = host.run(["ip", "route", "get", peer], timeout=10)
    f = res.stdout.split() if res.ok else []
    return f[f.index("dev") + 1] if "dev" in f and f.index("dev") + 1 < len(f) else None


def ssh_peer_interfaces(host: Host) -> dict[str, str]:
    """interface → peer of every ESTABLISHED connection to sshd's listening port(s): works
    where sudo or Ansible's become stripped SSH_CONNECTION."""
    ports = sshd_ports(host)
    out: dict[str, str] = {}
    for state, local, remote in _tcp_sockets(host):
        if state == _TCP_ESTABLISHED and local[1] in ports:
            ifname = route_interface(host, remote[0])
            if ifname and ifname not in out:
                out[ifname] = remote[0]
    return out


def interface_stack(host: Host, ifname: str) -> set[str]:
    """`ifname` and every interface above or below it (bond, bridge, VLAN, macvlan …), from
    sysfs `upper_*` / `lower_*` links and `master`, followed transitively."""
    seen: set[str] = set()
    todo = [ifname]
    while todo:
        cur = todo.pop()
        if cur in seen or not cur or "/" in cur:
            continue
        seen.add(cur)
        base = f"/sys/class/net/{cur}"
        for entry in host.listdir(base):
            if entry.startswith(("upper_", "lower_")):
                todo.append(entry.split("_", 1)[1])
        master = host.readlink(f"{base}/master")
        if master:
            todo.append(master.rstrip("/").rsplit("/", 1)[-1])
    return seen


def other_netns(host: Host) -> str | None:
    """This process's network namespace when it is not the host's (PID 1's; when PID 1's
    cannot be read, as in a container: a namespace `ip netns` names), else None; for a
    snapshot, the "netns" it recorded."""
    if not host.live:
        netns = (host.meta or {}).get("netns")
        return netns if isinstance(netns, str) and netns else None
    mine, init = host.readlink("/proc/self/ns/net"), host.readlink("/proc/1/ns/net")
    if mine and init:
        return mine if mine != init else None
    res = host.run(["ip", "netns", "identify"], timeout=10)
    name = res.stdout.strip() if res.ok else ""
    return f"{name} ({mine or 'net:[?]'})" if name else None


def protected_interfaces(host: Host, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every interface whose link reset would cut this host off → why (default route, SSH
    session or SSH peer socket), including the whole bond/bridge/VLAN stack around it."""
    why: dict[str, str] = {}
    for ifname in sorted(default_route_interfaces(host)):
        why.setdefault(ifname, "carries the default route")
    ssh = ssh_interface(host, env)
    if ssh:
        why.setdefault(ssh, "carries this SSH session (SSH_CONNECTION)")
    for ifname, peer in ssh_peer_interfaces(host).items():
        why.setdefault(ifname, f"carries an SSH session from {peer}")
    out: dict[str, str] = {}
    for ifname, reason in why.items():
        for member in sorted(interface_stack(host, ifname)):
            out.setdefault(member, reason if member == ifname else f"{reason} via {ifname}")
    return out


def _and(words: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def cut_off_refusal(guarded: Mapping[str, tuple[str, list[str]]]) -> str:
    """One refusal, in a few sentences, for every change apply would make on an interface
    this host hangs by: interface → (why it is protected, the items that would change)."""
    parts = [f"{ifname} {why}: changing its {_and(items)} may reset the link and cut this "
             "host off." for ifname, (why, items) in guarded.items()]
    return " ".join(parts + [
        "Nothing was changed. Arrange console access, then add --force: these changes are "
        "then applied last and reverted unless confirmed from a new session."])
