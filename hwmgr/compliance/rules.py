"""What the catalog wants of one interface and of the host, as canonical items.

A driver entry's `settings` (`pause`, `ring`, `channels`, `features`, `txqueuelen`, `mtu`)
become wants on canonical items (`pause.rx`, `ring.rx`, `features.generic-receive-offload`,
…); the enabled `conditional_settings` whose `when` holds on this interface add to or
override them. Conditions are evaluated here, against the interface's root qdisc and the
host's sysctls: a condition that cannot be read makes its items *unknown*, never silently
absent. Pure functions: the reads happen in `hwmgr.compliance.check`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from hwmgr.catalog.refs import Cite, cite
from hwmgr.compliance.ethtool import canonical_feature
from hwmgr.compliance.items import ItemValue, Status

# settings key -> (item group, sub-key of a bare level, sub-keys the schema allows)
_LEVELS = {"ring": ("rx", "tx"), "channels": ("combined",)}
_RING_KEYS = {"rx_mini": "rx-mini", "rx_jumbo": "rx-jumbo"}


@dataclass(frozen=True)
class Want:
    """One wanted item: the catalog's rule for it, where the rule comes from, and why."""

    item: str  # canonical item name
    rule: object  # as the catalog has it: "on"/"off", an int, "max", {"min": N} / {"max": N}
    source: str  # the entry name or the conditional rule's id
    cite: Cite | None = None
    unknown: str | None = None  # set when the rule's condition could not be read
    condition: str | None = None  # "net.ipv4.ip_forward = 1 (rule …)" for conditional wants


def _object(value: object) -> Mapping[str, object]:
    """A JSON object the schema allows here, or an empty one (a key that is absent)."""
    return value if isinstance(value, dict) else {}


def settings_wants(settings: Mapping[str, object] | None, source: str,
                   unknown: str | None = None) -> dict[str, Want]:
    """A `settings` object (driver entry or conditional rule) as wants by item."""
    out: dict[str, Want] = {}
    if not settings:
        return out
    why = cite(f"settings:{source}", settings.get("evidence"))

    def add(item: str, rule: object) -> None:
        out[item] = Want(item, rule, source, why, unknown)

    pause = _object(settings.get("pause"))
    for key in ("autoneg", "rx", "tx"):
        if key in pause:
            add(f"pause.{key}", pause[key])
    for group, bare in _LEVELS.items():
        spec = settings.get(group)
        if spec is None:
            continue
        levels: Mapping[str, object] = spec if isinstance(spec, dict) and not (
            {"min", "max"} & set(spec)) else {k: spec for k in bare}
        for key, rule in levels.items():
            add(f"{group}.{_RING_KEYS.get(key, key)}", rule)
    for name, state in _object(settings.get("features")).items():
        add(f"features.{canonical_feature(name)}", state)
    for key in ("txqueuelen", "mtu"):
        if key in settings:
            add(key, settings[key])
    return out


def same_value(want: object, have: ItemValue | None) -> bool:
    """A sysctl condition's or rule's value against what was read (ints, lists, text)."""
    if isinstance(want, list):
        return isinstance(have, list) and have == want
    if isinstance(want, str) and isinstance(have, str):
        return " ".join(want.split()) == " ".join(have.split())
    if isinstance(want, str) and isinstance(have, int):
        return want.strip() == str(have)
    return isinstance(have, int) and not isinstance(have, bool) and have == want


def holds(when: object, qdisc: ItemValue | None,
          sysctls: Mapping[str, ItemValue]) -> tuple[bool | None, str]:
    """(True/False, why) when every condition could be judged, (None, why) when one could not.

    `qdisc` is the interface's root qdisc kind (None for host-wide rules); `sysctls` maps
    `sysctl.<name>` to what was read.
    """
    if not when:
        return True, "always"
    cond = _object(when)
    why: list[str] = []
    if "qdisc" in cond:
        if qdisc is None or isinstance(qdisc, Status):
            return None, "the interface's qdisc could not be read"
        kinds = cond["qdisc"]
        if not isinstance(kinds, list) or qdisc not in kinds:
            return False, f"qdisc is {qdisc}"
        why.append(f"qdisc is {qdisc}")
    for name, want in _object(cond.get("sysctl")).items():
        have = sysctls.get(f"sysctl.{name}")
        if have is None or isinstance(have, Status):
            return None, f"{name} could not be read"
        if not same_value(want, have):
            return False, f"{name} is {have}"
        why.append(f"{name} = {have}")
    return True, " and ".join(why)


def interface_wants(entry: str, settings: Mapping[str, object] | None,
                    conditionals: Iterable[Mapping[str, object]], qdisc: ItemValue | None,
                    sysctls: Mapping[str, ItemValue]) -> dict[str, Want]:
    """Every want on one interface governed by `entry`: its settings, then each enabled
    conditional rule for this entry whose condition holds (later rules override)."""
    wants = settings_wants(settings, entry)
    for rule in conditionals:
        drivers = rule.get("drivers")
        if drivers and isinstance(drivers, list) and entry not in drivers:
            continue
        ok, why = holds(rule.get("when"), qdisc, sysctls)
        if ok is False:
            continue
        rid = str(rule["id"])
        unknown = None if ok else f"rule {rid} applies only if {_when_text(rule)}; {why}"
        extra = settings_wants(_object(rule.get("settings")), rid, unknown)
        for item, want in extra.items():
            wants[item] = Want(item, want.rule, rid, cite(f"rule:{rid}", rule.get("evidence")),
                               want.unknown, f"{why} (rule {rid})" if ok else None)
    return wants


def _when_text(rule: Mapping[str, object]) -> str:
    """A conditional rule's `when` in words (for unknown reasons)."""
    when = _object(rule.get("when"))
    parts = []
    kinds = when.get("qdisc")
    if isinstance(kinds, list):
        parts.append("the qdisc is " + "/".join(kinds))
    parts += [f"{k} = {v}" for k, v in _object(when.get("sysctl")).items()]
    return " and ".join(parts) or "always"


def needed_sysctls(sysctl_rules: Iterable[Mapping[str, object]],
                   conditionals: Iterable[Mapping[str, object]]) -> list[str]:
    """Every sysctl name the rules and conditions read, sorted."""
    sysctl_rules, conditionals = list(sysctl_rules), list(conditionals)
    names = {str(r["name"]) for r in sysctl_rules}
    for rule in [*sysctl_rules, *conditionals]:
        names |= set(_object(_object(rule.get("when")).get("sysctl")))
    return sorted(names)

