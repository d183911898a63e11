"""`net.*` sysctls read through a `Host` from `/proc/sys`, parsed into ints, int lists or text.

A sysctl name is dotted; a dot inside an interface name is written `/` (`net.ipv4.conf.
eth0/100.rp_filter` is `/proc/sys/net/ipv4/conf/eth0.100/rp_filter`), as sysctl(8) does.
Multi-value sysctls (`tcp_rmem`) are tab-separated in /proc and space-separated in copies;
both parse to a list of ints. Names come from catalogs, so they are checked before any path
is built: only `net.` names of plain components.
"""

from __future__ import annotations

from typing import Iterable, Union

from hwmgr.compliance.items import ItemValue, Status
from hwmgr.host.capture import sysctl_path
from hwmgr.host.seam import Host
from hwmgr.numtext import to_int

MAX_TEXT = 4096  # a sysctl's text past this is cut: its value is shown, never judged

SysctlValue = Union[int, list[int], str]


def parse_sysctl_value(text: str | None) -> SysctlValue | None:
    """A sysctl's text as int, list of ints (triples), or whitespace-normalised text."""
    if text is None:
        return None
    tokens = text.split()
    if not tokens:
        return None
    ints = [to_int(t) for t in tokens]
    if any(n is None for n in ints):
        return " ".join(tokens)[:MAX_TEXT]
    nums = [n for n in ints if n is not None]
    return nums[0] if len(nums) == 1 else nums


def read_sysctls(host: Host, names: Iterable[str]) -> dict[str, ItemValue]:
    """`sysctl.<name>` → value for each name (UNKNOWN when the file is missing or empty)."""
    out: dict[str, ItemValue] = {}
    for name in names:
        value = parse_sysctl_value(host.read_text(sysctl_path(name)))
        out[f"sysctl.{name}"] = Status.UNKNOWN if value is None else value
    return out
