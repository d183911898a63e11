"""Which group (site, role) each host of a fleet report belongs to.

A site chooses: its Ansible groups (`--groups FILE`, a JSON object {group: [hosts]} such as
the playbook writes from Ansible's `groups`; a host in several takes the first listed), or a
host-name pattern (`--group-by REGEX`: the named group `group`, else the first capture group,
else the whole match). Without either, a host's group is its domain (`web01.dc1.example.net`
→ `dc1.example.net`), or `ungrouped` for a bare name.
"""

from __future__ import annotations

import re
from pathlib import Path

from hwmgr.errors import BadInputError, UsageError
from hwmgr.fleet.results import read_json
from hwmgr.output import printable

UNGROUPED = "ungrouped"
ANSIBLE_IMPLICIT = ("all", "ungrouped")  # Ansible's own groups: they say nothing about a host


def compile_pattern(text: str) -> re.Pattern[str]:
    """--group-by's regular expression, or a usage error saying what is wrong with it."""
    try:
        return re.compile(text)
    except re.error as exc:
        raise UsageError(f"--group-by {printable(text)}: not a regular expression ({exc})") \
            from None


def read_groups(path: Path) -> dict[str, str]:
    """--groups FILE: {group: [hosts]} → {host: first group listing it}."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise BadInputError(f"{path}: expected an object {{group: [hosts]}}")
    out: dict[str, str] = {}
    for group, members in doc.items():
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise BadInputError(f"{path}: {printable(group)}: expected a list of host names")
        if group in ANSIBLE_IMPLICIT:
            continue
        for host in members:
            out.setdefault(host, group)
    return out


def by_pattern(name: str, pattern: re.Pattern[str]) -> str:
    """The part of `name` the pattern picks out, or `ungrouped` when it does not match."""
    m = pattern.search(name)
    if m is None:
        return UNGROUPED
    if "group" in pattern.groupindex:
        return m.group("group") or UNGROUPED
    return (m.group(1) if pattern.groups else m.group(0)) or UNGROUPED


def by_domain(name: str) -> str:
    """The domain of a dotted host name, else `ungrouped`."""
    _, dot, domain = name.partition(".")
    return domain if dot and domain else UNGROUPED


def assign(names: list[str], *, groups: dict[str, str] | None = None,
           pattern: re.Pattern[str] | None = None) -> dict[str, str]:
    """{host: group} for every host: the groups file first, then the pattern, then the domain."""
    out = {}
    for name in names:
        if groups and name in groups:
            out[name] = groups[name]
        elif pattern is not None:
            out[name] = by_pattern(name, pattern)
        else:
            out[name] = by_domain(name)
    return out
