"""The command that fixes one drifted item, and the fixes of one interface merged for humans.

`tuned-adm verify` says only "failed"; hwmgr names the command: `ethtool -G enp1s0f0 rx
4096`, `ip link set dev enp1s0f0 txqueuelen 10000`, `sysctl -w net.ipv4.tcp_rmem="4096
87380 4194304"`, `hwmgr upgrade be2net --to 10.2.470.14`. Each finding carries its own
item's command; `merge` joins those of one tool and interface (`ethtool -G enp1s0f0 rx 4096
tx 4096`) for the table. Names from hosts and catalogs are shell-quoted.
"""

from __future__ import annotations

import shlex
from typing import Iterable

from hwmgr.compliance.ethtool import FEATURE_TABLE

_SHORT = {long: short for short, long, _ in FEATURE_TABLE}
# item group -> the ethtool option that sets it (the sub-key is passed as ethtool's own word)
ETHTOOL_SET = {"pause": "-A", "ring": "-G", "channels": "-L", "features": "-K"}


def _word(value: object) -> str:
    """A wanted value as the command-line word: on/off, or the number."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def setting_fix(ifname: str, item: str, value: object) -> str | None:
    """The command that sets `item` of `ifname` to `value` (None for items with no setter)."""
    q = shlex.quote(ifname)
    if item in ("txqueuelen", "mtu"):
        return f"ip link set dev {q} {item} {_word(value)}"
    group, _, key = item.partition(".")
    opt = ETHTOOL_SET.get(group)
    if opt is None or not key:
        return None
    if group == "features":
        key = _SHORT.get(key, key)
    return f"ethtool {opt} {q} {shlex.quote(key)} {_word(value)}"


def sysctl_fix(name: str, value: object) -> str:
    """`sysctl -w name=value`; a multi-field value (ints only) double-quoted as one word."""
    if isinstance(value, list):
        return f'sysctl -w {shlex.quote(name)}="{" ".join(str(int(v)) for v in value)}"'
    return f"sysctl -w {shlex.quote(f'{name}={value}')}"


def upgrade_fix(entry: str, version: str | None) -> str | None:
    """`hwmgr upgrade ENTRY --to VERSION` (None when the catalog recommends no version)."""
    if not version:
        return None
    return f"hwmgr upgrade {shlex.quote(entry)} --to {shlex.quote(version)}"


def merge(commands: Iterable[str | None]) -> list[str]:
    """One command per tool and interface: `ethtool -G IF rx 4096` + `… tx 4096` become
    `ethtool -G IF rx 4096 tx 4096` (first-seen order; other commands kept as they are)."""
    out: list[str] = []
    joined: dict[str, int] = {}
    for cmd in commands:
        if not cmd:
            continue
        words = cmd.split(" ")
        if words[0] == "ethtool" and len(words) >= 5:
            head, rest = " ".join(words[:3]), " ".join(words[3:])
            if head in joined:
                if rest not in out[joined[head]]:
                    out[joined[head]] += f" {rest}"
                continue
            joined[head] = len(out)
        if cmd not in out:
            out.append(cmd)
    return out
