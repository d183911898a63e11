"""`ethtool -i NAME` answered in-process: the ETHTOOL_GDRVINFO ioctl ethtool itself sends.

A process per interface (fork, exec, ethtool's start-up: ~5 ms CPU each) is most of a live
inventory's time on a host with many NICs; lspci forks nothing. ethtool 6.1's `-i` is this one
ioctl followed by `dump_drvinfo()`, so the text built here is byte for byte what it prints.
Anything unusual (no such device, no driver info, a name ethtool would refuse, no socket)
answers None and the caller runs the real binary, which then says what went wrong itself.
"""

from __future__ import annotations

import struct

SIOCETHTOOL = 0x8946  # <linux/sockios.h>
ETHTOOL_GDRVINFO = 0x00000003  # <linux/ethtool.h>
IFNAMSIZ = 16
# struct ethtool_drvinfo: cmd; driver[32], version[32], fw_version[32], bus_info[32],
# erom_version[32], reserved2[12]; n_priv_flags, n_stats, testinfo_len, eedump_len, regdump_len
_DRVINFO = struct.Struct("=I32s32s32s32s32s12sIIIII")
# struct ifreq: ifr_name[16], then a union whose ifr_data pointer is used here (40 bytes in all)
_IFREQ = struct.Struct("@16sP16x")


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
    buf = array.array("B", _DRVINFO.pack(ETHTOOL_GDRVINFO, *(b"",) * 6, 0, 0, 0, 0, 0))
    addr, _n = buf.buffer_info()
    req = _IFREQ.pack(name.encode("utf-8", "surrogateescape"), addr)
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
    (_cmd, driver, version, fw, bus, erom, _res, n_priv, n_stats, test_len, eedump_len,
     regdump_len) = _DRVINFO.unpack(buf.tobytes())

    def text(field: bytes) -> str:  # printf("%.*s", 32, field): up to the first NUL
        return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")

    def yes(n: int) -> str:
        return "yes" if n else "no"

    return (f"driver: {text(driver)}\nversion: {text(version)}\n"
            f"firmware-version: {text(fw)}\nexpansion-rom-version: {text(erom)}\n"
            f"bus-info: {text(bus)}\nsupports-statistics: {yes(n_stats)}\n"
            f"supports-test: {yes(test_len)}\nsupports-eeprom-access: {yes(eedump_len)}\n"
            f"supports-register-dump: {yes(regdump_len)}\n"
            f"supports-priv-flags: {yes(n_priv)}\n")
