"""Pure parsers of `ethtool -a/-g/-l/-k/-c` text, from the 2007 ioctl era to netlink ethtool.

Text, not `--json`: every ethtool version prints text and snapshots of old hosts carry only
text, so one code path serves live hosts and snapshots alike. The parsers look for known
labels rather than line layouts, so copies whose tabs were expanded or whose lines were
joined still parse. Each returns a `Reading`: values under canonical keys, maxima where
ethtool has them, and a `Status` — `UNSUPPORTED` when ethtool said the device cannot answer
("Operation not supported", "no offload info available", exit 95), `UNKNOWN` when the output
says nothing usable (usage text, "No such device", empty); `rejected` when that is because
this ethtool does not know the sub-command (too old: it printed its usage or "bad command line
argument(s)"). A value is None when its line is missing or says "n/a".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Union

from hwmgr.compliance.items import Status
from hwmgr.numtext import MAX_NUMBER_CHARS, to_int, why_not

RC_EOPNOTSUPP = 95

Value = Union[int, bool, str, None]


@dataclass
class Reading:
    """One parsed sub-command: values by canonical key, maxima, and why values may be absent."""

    status: Status
    values: dict[str, Value] = field(default_factory=dict)
    maxima: dict[str, Value] = field(default_factory=dict)
    fixed: frozenset[str] = frozenset()  # features ethtool marks "[fixed]"
    requested: dict[str, bool] = field(default_factory=dict)  # "[requested on|off]"
    unsupported: frozenset[str] = frozenset()  # keys ethtool said it cannot read
    reason: str | None = None  # the error line ethtool printed, if any
    rejected: bool = False  # ethtool did not know the sub-command (an ethtool too old for it)


# ---------------------------------------------------------------- the feature-name table
# (short -K name, canonical long name as `ethtool -k` prints it today, other spellings: the
# kernel's feature string and the spaced names / error-message names of 2007-era ethtool)
FEATURE_TABLE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("rx", "rx-checksumming", ("rx-checksum", "rx checksumming", "rx csum")),
    ("tx", "tx-checksumming", ("tx checksumming", "tx csum")),
    ("sg", "scatter-gather", ("scatter gather", "tx-scatter-gather")),
    ("tso", "tcp-segmentation-offload", ("tcp segmentation offload", "tcp seg offload")),
    ("ufo", "udp-fragmentation-offload",
     ("udp fragmentation offload", "udp large send offload", "tx-udp-fragmentation")),
    ("gso", "generic-segmentation-offload",
     ("generic segmentation offload", "tx-generic-segmentation")),
    ("gro", "generic-receive-offload", ("generic receive offload", "rx-gro")),
    ("lro", "large-receive-offload", ("large receive offload", "rx-lro")),
    ("rxvlan", "rx-vlan-offload", ("rx vlan offload", "rx-vlan-hw-parse")),
    ("txvlan", "tx-vlan-offload", ("tx vlan offload", "tx-vlan-hw-insert")),
    ("ntuple", "ntuple-filters", ("ntuple filters", "rx-ntuple-filter")),
    ("rxhash", "receive-hashing", ("receive hashing", "rx-hashing")),
)

_FEATURE_ALIASES: dict[str, str] = {}
for _short, _long, _others in FEATURE_TABLE:
    for _name in (_short, _long, *_others):
        _FEATURE_ALIASES[_name] = _long

WELL_KNOWN_FEATURES: tuple[str, ...] = tuple(long for _, long, _ in FEATURE_TABLE)


def canonical_feature(name: str) -> str:
    """The long `ethtool -k` name for any spelling a user, a snapshot or old ethtool uses."""
    key = " ".join(name.strip().lower().split())
    hit = _FEATURE_ALIASES.get(key)
    if hit is not None:
        return hit
    return key.replace(" ", "-")


# ---------------------------------------------------------------- shared helpers
_UNSUPPORTED_RE = re.compile(
    r"operation not supported|function not implemented|not supported by device"
    r"|^no [\w -]*?(?:info available|settings)\s*$",
    re.I | re.M,
)
_ERROR_LINE_RE = re.compile(
    r"^\s*(?:netlink error|cannot |no such device|no offload|ethtool: |\S*: ?operation not)"
    r"|not supported|not implemented|no such device",
    re.I,
)
_HEADER_RE = re.compile(
    r"\b(?:pause|ring|channel|coalesce) parameters for \S*?:|\bfeatures for \S*?:"
    r"|\boffload parameters for \S*?:",
    re.I,
)
_PRESET_RE = re.compile(r"pre-set maximums:", re.I)
_CURRENT_RE = re.compile(r"current hardware settings:", re.I)


def _split_errors(text: str) -> tuple[str, str | None]:
    """Drop ethtool's error lines; return the rest and the first error line (the reason)."""
    keep: list[str] = []
    reason: str | None = None
    for line in text.splitlines():
        if _ERROR_LINE_RE.search(line):
            if reason is None:
                reason = line.strip()
            continue
        keep.append(line)
    return "\n".join(keep), reason


def _no_values_status(text: str, rc: int | None) -> Status:
    """UNSUPPORTED when ethtool said so (text or exit 95), otherwise UNKNOWN."""
    if rc == RC_EOPNOTSUPP or _UNSUPPORTED_RE.search(text):
        return Status.UNSUPPORTED
    return Status.UNKNOWN


# An ethtool that does not know a sub-command: the 2007 releases print their usage text
# (exit 0), later ones "ethtool: bad command line argument(s)" (exit 1); getopt wordings too.
_REJECTED_RE = re.compile(
    r"^\s*usage:|bad command line argument|unrecognized option|invalid option", re.I | re.M)
_VERSION_RE = re.compile(r"^\s*ethtool version (\S+)", re.I | re.M)


def _empty(text: str, rc: int | None, reason: str | None,
           unsupported: frozenset[str] = frozenset()) -> Reading:
    """The Reading of a sub-command that gave no values, saying whether ethtool rejected it."""
    status = _no_values_status(text, rc)
    rejected = status is Status.UNKNOWN and bool(_REJECTED_RE.search(text))
    return Reading(status, unsupported=unsupported, reason=reason, rejected=rejected)


def parse_version(text: str) -> str | None:
    """`ethtool --version` (or the usage text of old releases): "6", "3.5", "6.1"; None."""
    m = _VERSION_RE.search(text)
    return m[1] if m else None


def _value(token: str) -> Value:
    """An ethtool value token as int, bool (on/off), None (n/a) or the raw string."""
    low = token.lower()
    if low in ("n/a", "unknown"):
        return None
    if low == "on":
        return True
    if low == "off":
        return False
    number = to_int(token, 16 if low.startswith("0x") else 10)
    if number is not None:
        return number
    if len(token) > MAX_NUMBER_CHARS:  # shown in findings: a few words, not the token
        return f"unreadable: {why_not(token)}"
    return token


def _label_pattern(labels: tuple[str, ...]) -> re.Pattern[str]:
    """Match `Label: value` anywhere (labels longest first so "RX Mini" beats "RX")."""
    alts = "|".join(re.escape(lab).replace(r"\ ", r"\s+")
                    for lab in sorted(labels, key=len, reverse=True))
    return re.compile(rf"(?:(?<=\s)|^)({alts})\s*:\s*(\S+)", re.I | re.M)


def _key(label: str) -> str:
    return "-".join(label.lower().split())


def _parse_blocks(text: str, rc: int | None, labels: tuple[str, ...],
                  aliases: dict[str, str]) -> Reading:
    """Shared -g/-l parser: a "Pre-set maximums" block and a "Current hardware settings" one.

    Without headers (the newest `-g`) the first block is the maxima and a repeated label
    starts the current block. A maximum of 0 (ioctl era) or n/a (netlink era) means the
    device has no such ring/channel: both numbers become None, the same in every era.
    """
    body, reason = _split_errors(text)
    body = _HEADER_RE.sub(" ", body)
    pattern = _label_pattern(labels)
    preset = _PRESET_RE.search(body)
    current = _CURRENT_RE.search(body)
    maxima: dict[str, Value] = {}
    values: dict[str, Value] = {}
    if preset or current:
        cut = current.start() if current else len(body)
        start = preset.end() if preset else cut
        for m in pattern.finditer(body[start:cut] if preset else ""):
            maxima.setdefault(aliases.get(_key(m[1]), _key(m[1])), _value(m[2]))
        for m in pattern.finditer(body[current.end():] if current else ""):
            values.setdefault(aliases.get(_key(m[1]), _key(m[1])), _value(m[2]))
    else:
        target = maxima
        for m in pattern.finditer(body):
            key = aliases.get(_key(m[1]), _key(m[1]))
            if key in target and target is maxima:
                target = values
            target.setdefault(key, _value(m[2]))
        if target is maxima:  # one block only: it can only be the current settings
            values, maxima = maxima, {}
    if not values and not maxima:
        return _empty(text, rc, reason)
    for key, top in list(maxima.items()):
        if top in (0, None):
            maxima[key] = None
            if key in values:
                values[key] = None
    return Reading(Status.OK, values=values, maxima=maxima, reason=reason)


# ---------------------------------------------------------------- the five parsers
PAUSE_LABELS = ("Autonegotiate", "RX", "TX", "RX negotiated", "TX negotiated")
RING_LABELS = ("RX", "RX Mini", "RX Jumbo", "TX", "RX Buf Len", "CQE Size", "TX Push",
               "RX Push", "TX push buff len", "TCP data split", "HDS thresh")
CHANNEL_LABELS = ("RX", "TX", "Other", "Combined")


def parse_pause(text: str, rc: int | None = None) -> Reading:
    """`ethtool -a IF`: autoneg, rx, tx (and rx/tx-negotiated when autoneg is on)."""
    body, reason = _split_errors(text)
    body = _HEADER_RE.sub(" ", body)
    values: dict[str, Value] = {}
    for m in _label_pattern(PAUSE_LABELS).finditer(body):
        key = {"autonegotiate": "autoneg"}.get(_key(m[1]), _key(m[1]))
        val = _value(m[2])
        values.setdefault(key, val if isinstance(val, bool) or val is None else None)
    if not values:
        return _empty(text, rc, reason)
    return Reading(Status.OK, values=values, reason=reason)


def parse_rings(text: str, rc: int | None = None) -> Reading:
    """`ethtool -g IF`: current ring sizes and the pre-set maxima (rx, rx-mini, rx-jumbo, tx…)."""
    return _parse_blocks(text, rc, RING_LABELS, {})


def parse_channels(text: str, rc: int | None = None) -> Reading:
    """`ethtool -l IF`: current channel counts and maxima (rx, tx, other, combined)."""
    return _parse_blocks(text, rc, CHANNEL_LABELS, {})


_FEATURE_LINE_RE = re.compile(
    r"^\s*([A-Za-z][\w.-]*(?: [\w.-]+)*)\s*:\s*(on|off)\b"
    r"(?:\s*\[(fixed|requested on|requested off)\])?", re.I)
_FEATURE_PAIR_RE = re.compile(
    r"(?:(?<=\s)|^)([a-z][a-z0-9_-]*)\s*:\s*(on|off)\b"
    r"(?:\s*\[(fixed|requested on|requested off)\])?", re.I)
_CANNOT_GET_RE = re.compile(r"cannot get device (.+?) settings\s*:?\s*$", re.I)


def parse_features(text: str, rc: int | None = None) -> Reading:
    """`ethtool -k IF`: each feature's on/off under its canonical name, `[fixed]`, requests.

    A feature ethtool said it "cannot get" is unsupported even though old versions print a
    default "off" for it afterwards.
    """
    values: dict[str, Value] = {}
    fixed: set[str] = set()
    requested: dict[str, bool] = {}
    cannot: set[str] = set()
    reason: str | None = None
    for line in text.splitlines():
        err = _ERROR_LINE_RE.search(line)
        if err:
            reason = reason or line.strip()
            head = line.split(":", 1)[0] + ":" if ":" in line else line
            got = _CANNOT_GET_RE.search(head.strip())
            if got:
                cannot.add(canonical_feature(got[1]))
            continue
        line = _HEADER_RE.sub(" ", line)
        pairs = list(_FEATURE_PAIR_RE.finditer(line))
        matches = pairs if len(pairs) > 1 else [m for m in [_FEATURE_LINE_RE.match(line)] if m]
        for m in matches:
            name = canonical_feature(m[1])
            values.setdefault(name, m[2].lower() == "on")
            mark = (m[3] or "").lower()
            if mark == "fixed":
                fixed.add(name)
            elif mark.startswith("requested"):
                requested[name] = mark.endswith(" on")
    for name in cannot:
        values.pop(name, None)
    if not values:
        return _empty(text, rc, reason, frozenset(cannot))
    return Reading(Status.OK, values=values, fixed=frozenset(fixed), requested=requested,
                   unsupported=frozenset(cannot), reason=reason)


_COALESCE_PAIR_RE = re.compile(r"\b(Adaptive|CQE mode)\s+RX\s*:\s*(\S+)\s+TX\s*:\s*(\S+)", re.I)
_COALESCE_KEY_RE = re.compile(r"(?:(?<=\s)|^)([a-z][a-z0-9-]*[a-z0-9])\s*:\s*(\S+)", re.I | re.M)


def parse_coalesce(text: str, rc: int | None = None) -> Reading:
    """`ethtool -c IF`: adaptive-rx/tx, cqe-mode-rx/tx and every `key: value` (rx-usecs…)."""
    body, reason = _split_errors(text)
    body = _HEADER_RE.sub(" ", body)
    values: dict[str, Value] = {}
    for m in _COALESCE_PAIR_RE.finditer(body):
        prefix = _key(m[1])
        values[f"{prefix}-rx"] = _value(m[2])
        values[f"{prefix}-tx"] = _value(m[3])
    body = _COALESCE_PAIR_RE.sub(" ", body)
    for m in _COALESCE_KEY_RE.finditer(body):
        values.setdefault(m[1].lower(), _value(m[2]))
    if not values:
        return _empty(text, rc, reason)
    return Reading(Status.OK, values=values, reason=reason)

