"""The rpm version scheme: a faithful port of rpm 4.18's rpmvercmp and EVR handling.

Split from hwmgr.catalog.versions (which registers it as the `rpm` scheme) so each module keeps
to one job; the ASCII helpers here are shared by the other schemes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from hwmgr.errors import VersionError


def shown(raw: object, limit: int = 60) -> str:
    """A short printable repr of user input for one-line error messages."""
    text = repr(raw)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def is_digit(c: str) -> bool:
    return "0" <= c <= "9"


def is_alpha(c: str) -> bool:
    return "a" <= c <= "z" or "A" <= c <= "Z"


def is_alnum(c: str) -> bool:
    return is_digit(c) or is_alpha(c)


# ---------------------------------------------------------------------------------------------
# rpm: rpmvercmp and EVR


def vercmp_raw(a: str, b: str) -> int:
    """rpm 4.18 rpmvercmp on two str (ASCII classes only, as rpm's risalnum/risdigit)."""
    if a == b:
        return 0
    i = j = 0
    n, m = len(a), len(b)
    while i < n or j < m:
        # skip separators: anything that is not ASCII alnum, '~' or '^'
        while i < n and not is_alnum(a[i]) and a[i] not in "~^":
            i += 1
        while j < m and not is_alnum(b[j]) and b[j] not in "~^":
            j += 1
        ca = a[i] if i < n else ""
        cb = b[j] if j < m else ""
        # tilde sorts before everything, even the end of the string
        if ca == "~" or cb == "~":
            if ca != "~":
                return 1
            if cb != "~":
                return -1
            i += 1
            j += 1
            continue
        # caret sorts after the end of the string but before anything else
        if ca == "^" or cb == "^":
            if not ca:
                return -1
            if not cb:
                return 1
            if ca != "^":
                return 1
            if cb != "^":
                return -1
            i += 1
            j += 1
            continue
        if not (ca and cb):
            break
        si, sj = i, j
        isnum = is_digit(ca)
        same = is_digit if isnum else is_alpha
        while i < n and same(a[i]):
            i += 1
        while j < m and same(b[j]):
            j += 1
        seg1, seg2 = a[si:i], b[sj:j]
        if not seg2:  # segments of different types: numeric is newer than alpha
            return 1 if isnum else -1
        if isnum:
            seg1 = seg1.lstrip("0")
            seg2 = seg2.lstrip("0")
            if len(seg1) != len(seg2):
                return 1 if len(seg1) > len(seg2) else -1
        if seg1 != seg2:
            return 1 if seg1 > seg2 else -1
    if i >= n and j >= m:
        return 0
    return -1 if i >= n else 1


def rpmvercmp(a: str, b: str) -> int:
    """Compare two version (or release) strings exactly like rpm's rpmvercmp: -1, 0 or 1."""
    for s in (a, b):
        if not isinstance(s, str):
            raise VersionError(f"version must be a string, got {type(s).__name__} {shown(s)}")
        if "\0" in s:
            raise VersionError(f"version {shown(s)} contains a NUL byte")
    return vercmp_raw(a, b)


@dataclass(frozen=True)
class EVR:
    """An rpm [epoch:]version[-release], split the way rpm's parseEVR splits it."""

    epoch: Optional[str]
    version: str
    release: Optional[str]

    def __str__(self) -> str:
        head = f"{self.epoch}:" if self.epoch is not None else ""
        tail = f"-{self.release}" if self.release is not None else ""
        return f"{head}{self.version}{tail}"


_BAD_CHARS = re.compile(r"[^\x21-\x7e]")


def parse_evr(raw: str) -> EVR:
    """Split an rpm EVR string as rpm does (epoch = leading digits before ':', release after
    the last '-'); reject empty, whitespace, control or non-ASCII input with `VersionError`."""
    if raw is None or not isinstance(raw, str):
        raise VersionError(f"rpm version is missing or not a string: {shown(raw)}")
    s = raw.strip()
    if not s:
        raise VersionError("rpm version is empty")
    bad = _BAD_CHARS.search(s)
    if bad:
        raise VersionError(
            f"rpm version {shown(raw)} contains {bad.group()!r}: only printable ASCII "
            "without spaces is allowed"
        )
    k = 0
    while k < len(s) and is_digit(s[k]):
        k += 1
    se = s.rfind("-", k)  # strrchr from the end of the epoch digits
    if k < len(s) and s[k] == ":":
        epoch: Optional[str] = s[:k] or "0"
        vstart = k + 1
    else:
        epoch = None
        vstart = 0
    if se != -1:
        version, release = s[vstart:se], s[se + 1 :]
    else:
        version, release = s[vstart:], None
    if not any(is_alnum(c) for c in version):
        raise VersionError(f"rpm version {shown(raw)} has no version part (no letters or digits)")
    if release is not None and not any(is_alnum(c) for c in release):
        raise VersionError(f"rpm version {shown(raw)} has an empty release after '-'")
    return EVR(epoch, version, release)


def compare_evr(a: EVR, b: EVR) -> int:
    """Order two EVRs like rpm 4.18's rpmverCmp (rpm.vercmp, labelCompare, rpmdev-vercmp):
    epoch (missing = 0), version, then release; a missing release sorts before any release."""
    rc = vercmp_raw("0" if a.epoch is None else a.epoch, "0" if b.epoch is None else b.epoch)
    if rc:
        return rc
    rc = vercmp_raw(a.version, b.version)
    if rc:
        return rc
    if a.release is None or b.release is None:  # verified against rpm: '1.0-~1' > '1.0'
        return (a.release is not None) - (b.release is not None)
    return vercmp_raw(a.release, b.release)
