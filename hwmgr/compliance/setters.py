"""Set one canonical item on a live host and read it back: ethtool -A/-G/-L/-K, ip link, /proc/sys.

Each item maps to one command (shown in the plan before anything runs) or, for sysctls, to a
write of `/proc/sys/...` through the Host. Read-back uses the same readers as `check`
(`read.read_interface`, `sysctl.read_sysctls`), so "applied" means what `check` will see.
"""

from __future__ import annotations

from typing import Union

from hwmgr.compliance.fixes import ETHTOOL_SET
from hwmgr.compliance.items import ItemValue, Status
from hwmgr.compliance.read import canonical_item, lookup, read_interface
from hwmgr.compliance.sysctl import SysctlValue, parse_sysctl_value, read_sysctls
from hwmgr.errors import BadInputError, HwmgrError
from hwmgr.host.capture import sysctl_path
from hwmgr.host.ifname import check_tool_safe
from hwmgr.host.seam import Host
from hwmgr.numtext import to_int

PAUSE_KEYS = ("autoneg", "rx", "tx")
RING_KEYS = ("rx", "tx", "rx-mini", "rx-jumbo")
CHANNEL_KEYS = ("rx", "tx", "other", "combined")
LINK_ITEMS = ("txqueuelen", "mtu")


# a value as the readers report it once normalised (None: a sysctl text that parsed to nothing)
Normalised = Union[bool, int, SysctlValue, None]


class SetError(HwmgrError):
    """A setter command failed (the message names the item, interface and the tool's error)."""


def settable(item: str) -> bool:
    """True when `item` is one apply knows how to set."""
    group, _, key = item.partition(".")
    if item in LINK_ITEMS or group == "sysctl" and key:
        return True
    return (group == "pause" and key in PAUSE_KEYS or group == "ring" and key in RING_KEYS
            or group == "channels" and key in CHANNEL_KEYS or group == "features" and bool(key))


def normalise(item: str, value: object) -> Normalised:
    """A value in the form `read_interface` reports: bool for pause/features, int for counts,
    sysctl text parsed like /proc/sys."""
    group = item.split(".", 1)[0]
    if group in ("pause", "features"):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("on", "off"):
            return value.lower() == "on"
        raise BadInputError(f"{item}: value {value!r} is not on/off")
    if group == "sysctl":
        if isinstance(value, list):
            return parse_sysctl_value(" ".join(str(v) for v in value))
        return parse_sysctl_value(str(value))
    if isinstance(value, bool) or not isinstance(value, int):
        number = to_int(str(value))
        if number is None:
            shown_value = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise BadInputError(f"{item}: value {shown_value} is not an integer")
        return number
    return value


def shown(value: object) -> str:
    """A value as ethtool and sysctl files spell it (on/off, ints, space-separated lists)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def command(ifname: str | None, item: str, value: object) -> list[str]:
    """The argv (or, for a sysctl, the pseudo-command `sysctl -w`) that sets `item`."""
    item = canonical_item(item)
    group, _, key = item.partition(".")
    if group == "sysctl":
        sysctl_path(key)  # validates the name
        return ["sysctl", "-w", f"{key}={shown(normalise(item, value))}"]
    if ifname is None:
        raise BadInputError(f"{item}: needs an interface")
    check_tool_safe(ifname)
    if not settable(item):
        raise BadInputError(f"{item}: apply cannot set this item")
    v = shown(normalise(item, value))
    if item in LINK_ITEMS:
        return ["ip", "link", "set", "dev", ifname, item, v]
    return ["ethtool", ETHTOOL_SET[group], ifname, key, v]


def apply_item(host: Host, ifname: str | None, item: str, value: object) -> None:
    """Set `item` to `value` now; SetError naming the item and the tool's message on failure."""
    item = canonical_item(item)
    argv = command(ifname, item, value)
    if item.startswith("sysctl."):
        name = item[len("sysctl."):]
        try:
            host.write_attr(sysctl_path(name), shown(normalise(item, value)) + "\n")
        except OSError as exc:
            raise SetError(f"{name}: cannot write {sysctl_path(name)}: {exc.strerror}") from None
        return
    res = host.run(argv, timeout=30)
    if not res.ok:
        msg = " ".join((res.stderr or res.stdout or f"rc {res.rc}").split())
        raise SetError(f"{ifname} {item}: `{' '.join(argv)}` failed: {msg}")


def read_item(host: Host, ifname: str | None, item: str) -> Normalised | ItemValue:
    """The item's live value (normalised), or a Status when it cannot be read."""
    item = canonical_item(item)
    if item.startswith("sysctl."):
        value = read_sysctls(host, [item[len("sysctl."):]])[item]
    else:
        if ifname is None:
            return Status.UNKNOWN
        value = lookup(read_interface(host, ifname), item)
    if isinstance(value, Status):
        return value
    try:
        return normalise(item, value)
    except BadInputError:
        return value


def same(item: str, a: object, b: object) -> bool:
    """True when two values of `item` are equal once normalised."""
    try:
        return bool(normalise(item, a) == normalise(item, b))
    except BadInputError:
        return False
