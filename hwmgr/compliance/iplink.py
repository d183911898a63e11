"""A pure parser of `ip -d link show` text into `LinkInfo`.

Text, not `-j` JSON: every iproute2 (RHEL 6 onwards) prints it, and snapshots of old hosts
carry only text. The parser also takes `ip -o` output (records joined with a backslash) and
copies whose lines were joined into one. Garbled input yields fewer links, never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hwmgr.numtext import to_int

_HEAD_RE = re.compile(r"^\s*\d+:\s+([^\s:@]+)(?:@([^\s:]+))?:\s+<([^>]*)>\s*(.*)$")
_INT_KEYS = {"mtu": "mtu", "qlen": "txqueuelen"}
_STR_KEYS = {"qdisc": "qdisc", "master": "master", "state": "state"}
_NOT_KINDS = {"altname", "vf", "rx:", "tx:", "prop", "link"}
_KIND_RE = re.compile(r"[a-z][a-z0-9_]*")


@dataclass
class LinkInfo:
    """One link's attributes that compliance checks look at; None when not shown."""

    ifname: str
    peer: str | None = None  # the name after '@' (veth peer, vlan parent)
    flags: tuple[str, ...] = ()
    mtu: int | None = None
    txqueuelen: int | None = None
    qdisc: str | None = None
    master: str | None = None
    state: str | None = None
    kind: str | None = None  # veth, bridge, bond, vlan, tun… (None: a plain device)
    slave_kind: str | None = None  # bridge/bond when enslaved


def _int(token: str | None) -> int | None:
    return to_int(token)


def _records(text: str) -> list[list[str]]:
    """Split into one list of lines per link (undoing `ip -o`'s backslash joins)."""
    text = re.sub(r"\\\s+", "\n    ", text)
    text = re.sub(r"\s(\d+:\s+[^\s:@]+(?:@[^\s:]+)?:\s+<)", r"\n\1", text)  # joined copies
    records: list[list[str]] = []
    for line in text.splitlines():
        if _HEAD_RE.match(line):
            records.append([line])
        elif records and line.strip():
            records[-1].append(line)
    return records


def _parse_record(lines: list[str]) -> LinkInfo:
    head = _HEAD_RE.match(lines[0])
    assert head is not None
    info = LinkInfo(ifname=head[1], peer=head[2],
                    flags=tuple(f for f in head[3].split(",") if f))
    tokens = head[4].split()
    for i, tok in enumerate(tokens[:-1]):
        nxt = tokens[i + 1]
        if tok in _INT_KEYS and getattr(info, _INT_KEYS[tok]) is None:
            setattr(info, _INT_KEYS[tok], _int(nxt))
        elif tok in _STR_KEYS and getattr(info, _STR_KEYS[tok]) is None:
            setattr(info, _STR_KEYS[tok], nxt)
        elif tok.startswith("link/"):
            break  # a joined copy: the rest is the next line's
    for line in lines[1:]:
        first = line.split(None, 1)[0] if line.strip() else ""
        if first.startswith("link/") or first.lower() in _NOT_KINDS:
            continue
        if not _KIND_RE.fullmatch(first):
            continue
        if first.endswith("_slave"):
            info.slave_kind = info.slave_kind or first[: -len("_slave")]
        elif info.kind is None and first not in ("promiscuity", "addrgenmode"):
            info.kind = first
    return info


def parse_ip_link(text: str) -> dict[str, LinkInfo]:
    """`ip [-d] [-o] link show` text → links by name."""
    links: dict[str, LinkInfo] = {}
    for rec in _records(text):
        info = _parse_record(rec)
        links.setdefault(info.ifname, info)
    return links

