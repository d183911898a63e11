"""Interface names: the one rule for what a netdev may be called and what may reach a tool.

`valid` is the kernel's own rule (`dev_valid_name()` in net/core/dev.c), so a name read from
/sys/class/net of a real host always passes and a name no kernel could have made (a damaged
snapshot, a typo) never does. `tool_safe` adds the one thing the kernel allows but a tool
argument cannot carry: a leading '-'. ethtool has no `--`, so `ethtool -x` would be read as an
option (show the RX flow hash), not as the device "-x"; such an interface is listed, but no
ethtool or ip command is run for it and what those tools would tell stays unknown.
"""

from __future__ import annotations

from hwmgr.errors import BadInputError

IFNAMSIZ = 16  # <linux/if.h>: the name and its NUL terminator
# the bytes the kernel's isspace() accepts (lib/ctype.c: \t \n \v \f \r, space and 0xA0;
# dev_valid_name checks each byte, so a UTF-8 character holding 0xA0, like "à", is refused)
_SPACE = frozenset(b"\t\n\v\f\r \xa0")
_FORBIDDEN = _SPACE | frozenset(b"/:\0")  # NUL: the kernel would see a shorter name


def why_invalid(name: str) -> str | None:
    """Why the kernel would refuse `name` as a device name, or None when it would accept it.

    Names are compared as the kernel sees them: UTF-8 bytes (os.listdir's undecodable bytes,
    kept as surrogate escapes, count as the bytes they stand for).
    """
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeError:
        return "not encodable as bytes"
    if not raw:
        return "empty"
    if len(raw) >= IFNAMSIZ:
        return f"{len(raw)} bytes long (at most {IFNAMSIZ - 1})"
    if raw in (b".", b".."):
        return "'.' and '..' are not device names"
    if any(byte in _FORBIDDEN for byte in raw):
        return "contains '/', ':', NUL or white space"
    return None


def valid(name: str) -> bool:
    """Whether the kernel could have named a device `name` (dev_valid_name)."""
    return why_invalid(name) is None


def why_not_tool_safe(name: str) -> str | None:
    """Why `name` must not be passed to ethtool or ip, or None when it may."""
    why = why_invalid(name)
    if why is None and name.startswith("-"):
        why = "starts with '-', which ethtool would read as an option"
    return why


def tool_safe(name: str) -> bool:
    """Whether `name` is a valid device name that may be passed as an ethtool/ip argument."""
    return why_not_tool_safe(name) is None


def check_tool_safe(name: str) -> str:
    """`name` when it may be passed to ethtool or ip; BadInputError (exit 8) naming it if not."""
    why = why_not_tool_safe(name)
    if why is not None:
        raise BadInputError(f"interface {name!r}: not a valid interface name ({why})")
    return name
