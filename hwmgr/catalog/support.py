"""End of support: when upstream kernel series and distribution releases stopped getting free
fixes (the catalog's `kernel_builds.lifecycle`, with sources), and whether every kernel the
catalog knows to print an in-tree version string has (docs/known-issues.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

SUPPORTED = "supported"
_EL = {"rhel", "centos", "rocky", "almalinux", "alma", "oracle", "ol"}
_LABEL = re.compile(r"^([a-z][a-z0-9]*)-(\d+)(?:\.(\d+))?$")
_SERIES = re.compile(r"^(\d+)\.(\d+)$")


def _series_key(series: str) -> tuple[int, int] | None:
    m = _SERIES.match(series)
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Ended:
    """A line's end of support: `month` YYYY-MM, or None when only known to be over (a
    non-longterm upstream series)."""

    line: str
    month: str | None


@dataclass(frozen=True)
class Support:
    """The lifecycle table: longterm series and distribution releases -> end month or
    'supported', as of one month."""

    as_of: str = ""
    longterm: Mapping[str, str] = field(default_factory=dict)
    releases: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_table(cls, table: object) -> Support:
        """From `kernel_builds.lifecycle` (validated by the schema); empty when absent."""
        if not isinstance(table, Mapping):
            return cls()
        return cls(str(table.get("as_of", "")), dict(table.get("longterm") or {}),
                   dict(table.get("releases") or {}))

    def _over(self, month: str) -> bool:
        return month != SUPPORTED and bool(self.as_of) and month < self.as_of

    def series(self, series: str) -> Ended | None:
        """The end of an upstream series, or None (still supported, or not known): a series
        the longterm table omits but that is older than its newest is a non-longterm one,
        over once the next mainline release came (kernel.org)."""
        month = self.longterm.get(series)
        if month is not None:
            return Ended(f"Linux {series}", month) if self._over(month) else None
        key = _series_key(series)
        known = [k for k in map(_series_key, self.longterm) if k]
        if key and known and key < max(known):
            return Ended(f"Linux {series}", None)
        return None

    def release(self, label: str) -> Ended | None:
        """The end of a distribution release (`rhel-7.9`, `centos-7.3`, `debian-10`): the
        minor release's own row, else its major's; the RHEL rebuilds read as RHEL."""
        m = _LABEL.match(label)
        if not m or not self.as_of:
            return None
        fam = "rhel" if m.group(1) in _EL else m.group(1)
        major = f"{fam}-{m.group(2)}"
        rows = [f"{major}.{m.group(3)}", major] if m.group(3) is not None else [major]
        for row in rows:
            month = self.releases.get(row)
            if month is not None:
                return Ended(label, month) if self._over(month) else None
        return None

    def all_over(self, releases: Iterable[str], series: Iterable[str]) -> list[Ended] | None:
        """Each line's end when every one of them has ended by as_of, else None (one still
        supported or of unknown support, or no line at all)."""
        ends: list[Ended] = []
        for label in releases:
            got = self.release(label)
            if got is None:
                return None
            ends.append(got)
        for s in series:
            got = self.series(s)
            if got is None:
                return None
            ends.append(got)
        return ends or None


def last_month(ends: Iterable[Ended]) -> str | None:
    """The latest recorded end month among `ends` (None when none has a month)."""
    months = [e.month for e in ends if e.month]
    return max(months) if months else None
