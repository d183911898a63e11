"""Wanted vs actual: one `Finding` per item, with its status, reason, fix and source.

Statuses: `ok`; `drift` (readable and not what the catalog wants: the finding names the
command that fixes it); `unknown` (could not be read: a missing tool, an unrecorded
snapshot output, an unreadable condition); `uncatalogued` (read, but the catalog has no
verdict on it: a driver version it does not list); `unsupported` (the device or kernel said
it cannot do this: veth has no rings). Pure functions over what `hwmgr.compliance.read` and
`hwmgr.compliance.sysctl` returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Tuple, TypedDict

from hwmgr.catalog.refs import Cite, cite
from hwmgr.compliance.fixes import setting_fix, sysctl_fix
from hwmgr.compliance.items import ItemValue, Status
from hwmgr.compliance.rules import Want, same_value

STATUSES = ("drift", "unknown", "uncatalogued", "unsupported", "ok")  # worst first
SUMMARY_KEYS = ("ok", "drift", "unknown", "uncatalogued", "unsupported")  # as JSON lists them
LAYERS = ("driver", "firmware", "setting", "sysctl")
ITEM_KEYS = ("layer", "device", "interface", "item")  # what names one item of one host
ItemKey = Tuple[str, str, str, str]  # ITEM_KEYS' values, "" for null
_RANK = {s: i for i, s in enumerate(STATUSES)}


class SourceJSON(TypedDict):
    """A finding's citation: a reference into the catalog and its evidence's first URL."""

    ref: str
    url: str | None


class FindingJSON(TypedDict):
    """One finding as `check --json` prints it (hwmgr/schemas/check.schema.json)."""

    layer: str  # one of LAYERS
    device: str | None  # PCI address
    interface: str | None
    item: str  # canonical item name
    expected: object  # the rule, as people read it (on/off, a number, {"min": N} …)
    actual: object  # what was read (None when it could not be)
    status: str  # one of STATUSES
    reason: str
    fix: str | None  # the command that fixes a drift
    source: SourceJSON | None  # where the rule or verdict comes from (schema 3)


@dataclass
class Finding:
    """One compliance item of one device, interface or host (the `check --json` shape)."""

    layer: str
    device: str | None
    interface: str | None
    item: str
    expected: object
    actual: object
    status: str
    reason: str
    fix: str | None = None
    source: Cite | None = None  # the result carries ref and URL; the text stays here

    def to_json(self) -> FindingJSON:
        """The finding as the JSON object `check --json` prints."""
        return {"layer": self.layer, "device": self.device, "interface": self.interface,
                "item": self.item, "expected": self.expected, "actual": self.actual,
                "status": self.status, "reason": self.reason, "fix": self.fix,
                "source": {"ref": self.source.ref, "url": self.source.url}
                if self.source else None}


def citation(f: Mapping[str, object]) -> str | None:
    """A finding's source as one line for a plan ('ref <url>'): check schema 3 cites a
    catalog reference and URL, schema 1-2 carried the evidence text."""
    src = f.get("source")
    if isinstance(src, dict) and isinstance(src.get("ref"), str):
        url = src.get("url")
        return f"{src['ref']} <{url}>" if isinstance(url, str) and url else src["ref"]
    ev = f.get("evidence")
    return ev if isinstance(ev, str) else None

def show(value: object) -> object:
    """A value as JSON and people read it: booleans as on/off, a Status as null."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Status):
        return None
    return value


def bounds(rule: Mapping[str, object]) -> str | None:
    """{min, max} in words (`10..20`, `≥ 10000`, `≤ 9000`); None when it has neither."""
    if "min" in rule and "max" in rule:
        return f"{rule['min']}..{rule['max']}"
    if "min" in rule:
        return f"≥ {rule['min']}"
    if "max" in rule:
        return f"≤ {rule['max']}"
    return None


def describe(rule: object) -> str:
    """A rule in words: `on`, `4096`, `≥ 10000`, `≤ 9000`, `[*, *, ≥ 4194304]`."""
    if isinstance(rule, dict):
        words = bounds(rule)
        if words is not None:
            return words
        if "value" in rule:
            return str(rule["value"])
    if isinstance(rule, list):
        return "[" + ", ".join("*" if r is None else describe(r) for r in rule) + "]"
    return str(show(rule))


def _in_bounds(rule: Mapping[str, object], have: int) -> int | None:
    """None when `have` meets {min, max} (numbers, as the schema has them); else the nearest
    value that would."""
    low, high = rule.get("min"), rule.get("max")
    if isinstance(low, (int, float)) and have < low:
        return int(low)
    if isinstance(high, (int, float)) and have > high:
        return int(high)
    return None


def judge_setting(want: Want, items: Mapping[str, ItemValue], ifname: str,
                  device: str | None, missing: str) -> Finding:
    """One interface item against its want. `missing` says why an unknown item is unknown."""
    def finding(status: str, reason: str, expected: object = want.rule, actual: object = None,
                fix: str | None = None) -> Finding:
        return Finding("setting", device, ifname, want.item, show(expected), show(actual),
                       status, reason, fix, want.cite)

    if want.unknown:
        return finding("unknown", want.unknown)
    if want.condition:
        inner = finding

        def finding(status: str, reason: str, expected: object = want.rule,
                    actual: object = None, fix: str | None = None) -> Finding:
            return inner(status, f"{reason} while {want.condition}", expected, actual, fix)

    have = items.get(want.item, items.get(want.item.split(".", 1)[0], Status.UNKNOWN))
    if have is Status.UNSUPPORTED:
        return finding("unsupported", f"{ifname} cannot report or set {want.item} "
                                      "(the driver does not support it)")
    if isinstance(have, Status) or have is None:
        return finding("unknown", f"{want.item} could not be read: {missing}")
    rule = want.rule
    if rule in ("on", "off"):
        target = rule == "on"
        if have is target:
            return finding("ok", f"{want.item} is {rule}", actual=have)
        if items.get(f"{want.item}.fixed") is True:
            return finding("unsupported", f"{want.item} is {show(have)} and [fixed] by the "
                                          "driver: it cannot be changed", actual=have)
        return finding("drift", f"{want.item} is {show(have)}, the catalog wants {rule}",
                       actual=have, fix=setting_fix(ifname, want.item, target))
    if not isinstance(have, int) or isinstance(have, bool):
        return finding("unknown", f"{want.item} reads {have!r}, not a number", actual=have)
    if rule == "max":
        top = items.get(f"{want.item}.max", Status.UNKNOWN)
        if top is Status.UNSUPPORTED:
            return finding("unsupported", f"{ifname} has no {want.item} maximum", actual=have)
        if not isinstance(top, int) or isinstance(top, bool):
            return finding("unknown", f"the pre-set maximum of {want.item} could not be read",
                           actual=have)
        if have == top:
            return finding("ok", f"{want.item} is at the pre-set maximum {top}", top, have)
        return finding("drift", f"{want.item} is {have}, the catalog wants the pre-set "
                                f"maximum {top}", top, have,
                       setting_fix(ifname, want.item, top))
    if isinstance(rule, dict):
        nearest = _in_bounds(rule, have)
        if nearest is None:
            return finding("ok", f"{want.item} is {have} ({describe(rule)})", actual=have)
        return finding("drift", f"{want.item} is {have}, the catalog wants {describe(rule)}",
                       actual=have, fix=setting_fix(ifname, want.item, nearest))
    if have == rule:
        return finding("ok", f"{want.item} is {have}", actual=have)
    return finding("drift", f"{want.item} is {have}, the catalog wants {rule}", actual=have,
                   fix=setting_fix(ifname, want.item, rule))


def judge_sysctl(rule: Mapping[str, object], have: ItemValue, missing: str) -> Finding:
    """One host sysctl rule (value, min, max or per-field bounds) against what was read."""
    name = str(rule["name"])
    item = f"sysctl.{name}"
    expected: object = next((rule[k] for k in ("value", "fields") if k in rule),
                         {k: rule[k] for k in ("min", "max") if k in rule})

    def finding(status: str, reason: str, fix: str | None = None) -> Finding:
        return Finding("sysctl", None, None, item, expected, show(have), status, reason, fix,
                       cite(f"sysctl:{name}", rule.get("evidence")))

    if isinstance(have, Status):
        return finding("unknown", f"{name} could not be read: {missing}")
    if "value" in rule:
        if same_value(rule["value"], have):
            return finding("ok", f"{name} is {_text(have)}")
        return finding("drift", f"{name} is {_text(have)}, the catalog wants "
                                f"{_text(rule['value'])}", sysctl_fix(name, rule["value"]))
    fields = rule.get("fields")
    if not isinstance(fields, list) or not fields:
        fields = [expected]
    read = have if isinstance(have, list) else [have]
    values = [v for v in read if isinstance(v, int) and not isinstance(v, bool)]
    if len(values) < len(read) or len(values) < len(fields):
        return finding("unknown", f"{name} is {_text(have)}: not {len(fields)} number(s)")
    fixed, bad = list(values), []
    for i, spec in enumerate(fields):
        if not isinstance(spec, dict):  # None: any value will do in this field
            continue
        bound = {"min": spec["value"], "max": spec["value"]} if "value" in spec else spec
        target = _in_bounds(bound, values[i])
        if target is not None:
            fixed[i] = target
            bad.append(f"field {i + 1} is {values[i]}, wants {describe(spec)}"
                       if len(fields) > 1 else f"wants {describe(spec)}")
    if not bad:
        return finding("ok", f"{name} is {_text(have)} ({describe(expected)})")
    value = fixed if isinstance(have, list) else fixed[0]
    return finding("drift", f"{name} is {_text(have)}: {'; '.join(bad)}",
                   sysctl_fix(name, value))


def _text(value: object) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def worst_per_item(findings: object) -> dict[ItemKey, Mapping[str, object]]:
    """Each item's worst finding among `check --json` findings (read back from a file, so
    anything that is not a finding with a known status is skipped)."""
    out: dict[ItemKey, Mapping[str, object]] = {}
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, dict) or f.get("status") not in _RANK:
            continue
        layer, device, interface, item = ("" if f.get(k) is None else str(f[k])
                                          for k in ITEM_KEYS)
        key = (layer, device, interface, item)
        old = out.get(key)
        if old is None or _RANK[f["status"]] < _RANK[str(old["status"])]:
            out[key] = f
    return out


def summary(findings: list[Finding]) -> dict[str, int]:
    """Counts by status (every status present, zeros included)."""
    out = dict.fromkeys(SUMMARY_KEYS, 0)
    for f in findings:
        out[f.status] += 1
    return out
