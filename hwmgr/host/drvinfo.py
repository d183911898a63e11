"""`ethtool -i NAME` answered in-process: the ETHTOOL_GDRVINFO ioctl ethtool itself sends.

A process per interface (fork, exec, ethtool's start-up: ~5 ms CPU each) is most of a live
inventory's time on a host with many NICs; lspci forks nothing. ethtool 6.1's `-i` is this one
ioctl followed by `dump_drvinfo()`, so the text built here is byte for byte what it prints.
Anything unusual (no such device, no driver info, a name ethtool would refuse, no socket)
answers None and the caller runs the real binary, which then says what went wrong itself.
"""

from __future__ import annotations

import sys

SIOCETHTOOL = 0x8946  # <linux/sockios.h>
ETHTOOL_GDRVINFO = 0x00000003  # <linux/ethtool.h>
IFNAMSIZ = 16
# struct ethtool_drvinfo (196 bytes, native byte order; slices instead of `struct`, whose
# import costs ~0.5 ms): cmd u32; driver, version, fw_version, bus_info, erom_version: 32
# bytes each; reserved2[12]; then n_priv_flags, n_stats, testinfo_len, eedump_len, regdump_len
DRVINFO_SIZE = 196
_TEXT = {"driver": 4, "version": 36, "fw": 68, "bus": 100, "erom": 132}  # offsets, 32 bytes
_COUNTS = {"n_priv": 176, "n_stats": 180, "test": 184, "eedump": 188, "regdump": 192}
# struct ifreq: ifr_name[16], then a union whose ifr_data pointer is used; the union is 24
# bytes on 64-bit (struct ifmap), 16 on 32-bit
_POINTER = 8 if sys.maxsize > 2**32 else 4
IFREQ_SIZE = IFNAMSIZ + (24 if _POINTER == 8 else 16)


def valid_ifname(name: str) -> bool:
    """A name the kernel could have given a device (its dev_valid_name rules)."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except (AttributeError, UnicodeError):
        return False
    return 0 < len(raw) < IFNAMSIZ and raw not in (b".", b"..") and \
        not any(ch in b"/: \t\n\r\x0b\x0c\0" for ch in raw)


def ethtool_i(name: str) -> str | None:
    """ethtool -i's stdout for interface `name`, or None when the ioctl cannot answer."""
    if not valid_ifname(name):
        return None
    try:
        import _socket
        import array
        import fcntl
    except ImportError:  # pragma: no cover - every CPython on Linux has them
        return None
    buf = array.array("B", ETHTOOL_GDRVINFO.to_bytes(4, sys.byteorder) +
                      bytes(DRVINFO_SIZE - 4))
    addr, _n = buf.buffer_info()
    req = (name.encode("utf-8", "surrogateescape").ljust(IFNAMSIZ, b"\0") +
           addr.to_bytes(_POINTER, sys.byteorder)).ljust(IFREQ_SIZE, b"\0")
    try:
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM, 0)
    except OSError:
        return None
    try:
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, req)
    except OSError:
        return None
    finally:
        sock.close()
    return format_drvinfo(buf.tobytes())


def format_drvinfo(raw: bytes) -> str:
    """dump_drvinfo()'s text for a filled struct ethtool_drvinfo, decoded as the runner decodes
    a real ethtool's stdout (UTF-8, bad bytes replaced), so both paths give the same string."""

    def text(field: str) -> bytes:  # printf("%.*s", 32, field): up to the first NUL
        at = _TEXT[field]
        return raw[at:at + 32].split(b"\0", 1)[0]

    def yes(count: str) -> bytes:
        at = _COUNTS[count]
        return b"yes" if int.from_bytes(raw[at:at + 4], sys.byteorder) else b"no"

    out = (b"driver: " + text("driver") + b"\nversion: " + text("version") +
           b"\nfirmware-version: " + text("fw") + b"\nexpansion-rom-version: " + text("erom") +
           b"\nbus-info: " + text("bus") + b"\nsupports-statistics: " + yes("n_stats") +
           b"\nsupports-test: " + yes("test") + b"\nsupports-eeprom-access: " + yes("eedump") +
           b"\nsupports-register-dump: " + yes("regdump") +
           b"\nsupports-priv-flags: " + yes("n_priv") + b"\n")
    return out.decode("utf-8", errors="replace")
