"""Read one interface's settings through a `Host` into canonical items.

`read_interface(host, "eth0")` runs `ethtool -a/-g/-l/-k/-c eth0` and `ip -d link show dev
eth0` through the host's runner and reads `/sys/class/net/eth0/{mtu,tx_queue_len}`, so a
snapshot's recorded outputs read the same way as a live host. The result is one dict:
`pause.rx`, `ring.rx`, `ring.rx.max`, `channels.combined`, `features.<long name>`,
`coalesce.<key>`, `mtu`, `txqueuelen`, `qdisc`, `kind`, `master` ("" for none) → a value
or a `Status`.
Each ethtool group also has its own key (`pause`, `ring`, …) holding the sub-command's
Status, so `lookup()` can answer for items the output did not mention.
"""

from __future__ import annotations

from typing import Callable, Iterable

from hwmgr.compliance.ethtool import (
    WELL_KNOWN_FEATURES,
    Reading,
    canonical_feature,
    parse_channels,
    parse_coalesce,
    parse_features,
    parse_pause,
    parse_rings,
    parse_version,
)
from hwmgr.compliance.iplink import LinkInfo, parse_ip_link
from hwmgr.compliance.items import ItemValue, Status
from hwmgr.host.ifname import check_tool_safe
from hwmgr.host.seam import Host
from hwmgr.numtext import to_int

# (ethtool option, item group, parser, items always reported, what a None value means)
GROUPS: tuple[tuple[str, str, Callable[[str, int | None], Reading], tuple[str, ...], Status],
              ...] = (
    ("-a", "pause", parse_pause, ("autoneg", "rx", "tx"), Status.UNKNOWN),
    ("-g", "ring", parse_rings, ("rx", "tx"), Status.UNSUPPORTED),
    ("-l", "channels", parse_channels, ("rx", "tx", "other", "combined"), Status.UNSUPPORTED),
    ("-k", "features", parse_features, WELL_KNOWN_FEATURES, Status.UNKNOWN),
    ("-c", "coalesce", parse_coalesce, (), Status.UNSUPPORTED),
)
GROUPS_BY_NAME = tuple(g[1] for g in GROUPS)
# what each sub-command reports, for "this ethtool cannot report ..."
GROUP_WHAT = {"pause": "pause settings", "ring": "ring sizes", "channels": "channel counts",
              "features": "offload features", "coalesce": "interrupt coalescing"}
WITH_MAXIMA = ("ring", "channels")


def _group_items(group: str, reading: Reading, always: tuple[str, ...],
                 none_means: Status) -> dict[str, ItemValue]:
    """Flatten one sub-command's Reading into `group.key` (and `group.key.max`) items."""
    items: dict[str, ItemValue] = {group: reading.status}
    keys = list(always) + [k for k in reading.values if k not in always]
    for key in keys:
        name = f"{group}.{key}"
        if reading.status is not Status.OK:
            items[name] = reading.status
        elif key in reading.unsupported:
            items[name] = Status.UNSUPPORTED
        elif key not in reading.values:
            items[name] = Status.UNKNOWN
        else:
            value = reading.values[key]
            items[name] = none_means if value is None else value
            if key in reading.fixed:  # ethtool's "[fixed]": the driver will not change it
                items[f"{name}.fixed"] = True
        if group in WITH_MAXIMA:
            if reading.status is not Status.OK:
                items[f"{name}.max"] = reading.status
            elif key not in reading.maxima:
                items[f"{name}.max"] = Status.UNKNOWN
            else:
                top = reading.maxima[key]
                items[f"{name}.max"] = none_means if top is None else top
    return items


def _int_attr(host: Host, ifname: str, attr: str) -> int | None:
    return to_int(host.read_attr(f"/sys/class/net/{ifname}/{attr}"))


def read_interface(host: Host, ifname: str, *, ethtool: str = "ethtool",
                   ip: str = "ip", groups: Iterable[str] | None = None,
                   links: dict[str, LinkInfo] | None = None,
                   rejected: dict[str, str | None] | None = None) -> dict[str, ItemValue]:
    """Every readable setting of `ifname` as canonical item → value or Status.

    `groups` limits the ethtool sub-commands run (default: all five; check runs only those
    its rules need); `links` is an already parsed `ip -d link show` of every link, which
    spares one `ip` call per interface (and is what a snapshot records). `rejected`, when
    given, receives each group whose sub-command this ethtool does not know (too old), with
    the version its output names (old releases print it atop their usage text) or None.
    """
    check_tool_safe(ifname)
    wanted = set(GROUPS_BY_NAME if groups is None else groups)
    items: dict[str, ItemValue] = {}
    for option, group, parser, always, none_means in GROUPS:
        if group not in wanted:
            continue
        res = host.run([ethtool, option, ifname])
        if not res.available:
            reading = Reading(Status.UNKNOWN, reason=res.describe())
        else:
            reading = parser(f"{res.stdout}\n{res.stderr}", res.rc)
            if reading.rejected and rejected is not None:
                rejected[group] = parse_version(f"{res.stdout}\n{res.stderr}")
        items.update(_group_items(group, reading, always, none_means))
    if links is None:
        res = host.run([ip, "-d", "link", "show", "dev", ifname])
        links = parse_ip_link(res.stdout) if res.ok else {}
    link = links.get(ifname)
    mtu = _int_attr(host, ifname, "mtu")
    qlen = _int_attr(host, ifname, "tx_queue_len")
    if mtu is None and link is not None:
        mtu = link.mtu
    if qlen is None and link is not None:
        qlen = link.txqueuelen
    items["mtu"] = Status.UNKNOWN if mtu is None else mtu
    items["txqueuelen"] = Status.UNKNOWN if qlen is None else qlen
    items["qdisc"] = link.qdisc if link and link.qdisc else Status.UNKNOWN
    items["kind"] = (link.kind or "") if link else Status.UNKNOWN
    items["master"] = (link.master or "") if link else Status.UNKNOWN
    return items


def canonical_item(name: str) -> str:
    """A user's item name in canonical form (`features.gro` → `features.generic-receive-…`)."""
    name = name.strip()
    if name.lower().startswith("features."):
        return "features." + canonical_feature(name[len("features."):])
    return name


def lookup(items: dict[str, ItemValue], name: str) -> ItemValue:
    """An item's value; for one the output never mentioned, its group's Status or UNKNOWN."""
    name = canonical_item(name)
    if name in items:
        return items[name]
    group = items.get(name.split(".", 1)[0])
    return Status.UNSUPPORTED if group is Status.UNSUPPORTED else Status.UNKNOWN
