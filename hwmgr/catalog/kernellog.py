"""Known-bad kernel log signatures (data in kernellog.json) and the matcher over log text.

The signatures are data with sources: each a regular expression searched in one kernel log
line after its prefixes (syslog time and host, `kernel:`, a `[ 12.345]` or `[Thu Jan ...]`
stamp, a pdsh `node:`) are removed. The log text is hostile: at most `MAX_BYTES` of its
end and `MAX_LINE` characters of a line are looked at, and what is quoted back is escaped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from hwmgr.output import printable

MAX_BYTES = 4 << 20  # of a log's end read: a kernel ring buffer is 128 KiB to a few MiB
MAX_LINE = 1024  # characters of a line matched and quoted
MAX_HITS = 64  # matches kept per signature and driver (the first and last are what matter)
DATA = Path(__file__).resolve().parent / "kernellog.json"

# a line's prefixes, in the order they stand: syslog/journal head up to "kernel:", a
# Talos "kern: err: [time]:" head, a pdsh "node: ", then the printk stamp
_HEAD = re.compile(
    r"^(?:[^\[]{0,80}?\bkernel: ?|kern: {0,8}[a-z]{1,8}: \[[^\]]{1,40}\]: "
    r"|[A-Za-z0-9_.-]{1,64}: (?=\[))?"
    r"(?:\[ {0,12}(?P<mono>[0-9]{1,10}\.[0-9]{1,9})\] ?|\[[^\]]{1,40}\] ?)?")


@dataclass(frozen=True)
class Signature:
    """One known-bad line: what it means, the fix its source gives, where it comes from."""

    id: str
    drivers: tuple[str, ...]  # the modules it concerns; empty: the `driver` group says
    pattern: re.Pattern[str]
    severity: str
    symptom: str
    fix: str
    urls: tuple[str, ...]


@dataclass(frozen=True)
class Hit:
    """A log line that matched: which signature, the driver and device it names, when."""

    signature: Signature
    driver: str
    device: str | None
    interface: str | None
    seconds: float | None  # since boot (the printk stamp), None when the line has none
    line: str  # escaped, cut to MAX_LINE

    def to_json(self) -> dict[str, object]:
        """The hit as evidence in a finding or a gate result."""
        return {"signature": self.signature.id, "driver": self.driver, "device": self.device,
                "interface": self.interface, "seconds": self.seconds, "line": self.line,
                "source": self.signature.urls[0] if self.signature.urls else None}


def load(path: Path = DATA) -> tuple[Signature, ...]:
    """The signatures of a kernellog.json; ValueError naming the signature and field."""
    doc = json.loads(path.read_text())
    out = []
    for i, raw in enumerate(doc.get("signatures", [])):
        where = f"{path.name}: signatures[{i}]"
        try:
            pattern = re.compile(raw["pattern"])
            drivers = tuple(raw["drivers"])
            if not drivers and "driver" not in pattern.groupindex:
                raise ValueError("a signature for any driver needs a (?P<driver>...) group")
            out.append(Signature(raw["id"], drivers, pattern, raw["severity"], raw["symptom"],
                                 raw["fix"], tuple(s["url"] for s in raw["sources"])))
        except (KeyError, TypeError, re.error, ValueError) as e:
            raise ValueError(f"{where} ({raw.get('id') if isinstance(raw, dict) else '?'}): "
                             f"{e}") from None
        if not out[-1].urls:
            raise ValueError(f"{where} ({raw['id']}): no source")
    return tuple(out)


@lru_cache(maxsize=1)
def shipped() -> tuple[Signature, ...]:
    """The signatures shipped with hwmgr (read once per process)."""
    return load()


def split(line: str) -> tuple[float | None, str]:
    """(seconds since boot or None, the message) of one log line without its prefixes."""
    m = _HEAD.match(line)
    if not m:
        return None, line
    mono = m.group("mono")
    return (float(mono) if mono else None), line[m.end():]


def scan(text: str, signatures: Iterable[Signature] | None = None, *,
         after: float | None = None) -> list[Hit]:
    """Every line of `text` (its last MAX_BYTES) matching a signature; with `after`, only
    lines stamped later than that many seconds since boot (unstamped lines are kept)."""
    sigs = tuple(shipped() if signatures is None else signatures)
    if len(text) > MAX_BYTES:
        text = text[-MAX_BYTES:]
    hits: list[Hit] = []
    count: dict[tuple[str, str], int] = {}
    for raw in text.splitlines():
        line = raw[:MAX_LINE]
        seconds, msg = split(line)
        if after is not None and seconds is not None and seconds <= after:
            continue
        for sig in sigs:
            m = sig.pattern.search(msg)
            if m is None:
                continue
            groups = m.groupdict()
            driver = groups.get("driver") or (sig.drivers[0] if sig.drivers else "")
            key = (sig.id, driver)
            count[key] = count.get(key, 0) + 1
            if count[key] > MAX_HITS:
                continue
            hits.append(Hit(sig, driver, groups.get("device"), groups.get("interface"),
                            seconds, printable(line)))
    return hits


def for_drivers(hits: Iterable[Hit], drivers: Iterable[str]) -> list[Hit]:
    """The hits about one of `drivers` (module names; '-' and '_' alike)."""
    want = {d.replace("-", "_") for d in drivers}
    return [h for h in hits if h.driver.replace("-", "_") in want]
