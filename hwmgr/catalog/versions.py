"""Version schemes: rpm EVR ordering, Linux driver version strings and NIC firmware strings.

Each scheme parses and orders one family of version strings. Comparing across schemes (or
across shapes within a scheme) raises `VersionError`: it is an error, never a guess.

Deliberate rules (documented in docs and tests):

* ``rpm``: a faithful port of rpm 4.18 ``rpmvercmp`` plus ``rpmverCmp`` EVR handling
  (epoch defaults to 0; a version without a release sorts before the same version with one).
* ``driver``: strings are normalised (whitespace, ``version:`` label and a trailing
  parenthesised note dropped), then ordered by their *base* with ``rpmvercmp``. The in-kernel
  marker ``-k``, distro backport tags (``-rh7.6``, ``-rh1``) and flavour words (``-NAPI``)
  never make a version newer than the same base. ``-rcN``/``-betaN`` sort before the base
  (like rpm's ``~``). A driver that reports the kernel release is a different scheme from a
  vendor version; comparing the two raises `VersionError`.
* ``firmware``: strings are split into named parts; the principal part decides, the other parts
  in order break ties; two strings of different shapes are refused.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, TypedDict, Union

from hwmgr.catalog.rpmver import (
    EVR,
    compare_evr,
    is_digit,
    parse_evr,
    rpmvercmp,
    shown,
    vercmp_raw,
)
from hwmgr.errors import VersionError

if TYPE_CHECKING:
    from _typeshed import SupportsAllComparisons

__all__ = [
    "EVR",
    "DriverVersion",
    "Firmware",
    "Scheme",
    "SCHEMES",
    "compare",
    "compare_evr",
    "get_scheme",
    "newest",
    "parse",
    "parse_driver_version",
    "parse_evr",
    "parse_firmware",
    "register_scheme",
    "rpmvercmp",
    "sort_key",
]


# ---------------------------------------------------------------------------------------------
# common normalisation for what the kernel/ethtool report

_LABEL = re.compile(r"^(?:version|firmware-version|firmware version)\s*:\s*", re.IGNORECASE)


MAX_VERSION_LEN = 256  # ethtool and modinfo report at most 32; a catalog's are shorter still


def bounded(raw: object, what: str) -> str:
    """`raw` when it is a string of at most MAX_VERSION_LEN characters; checked before any
    parsing, so no pattern ever runs over a hostile 100,000-character string."""
    if raw is None or not isinstance(raw, str):
        raise VersionError(f"{what} is missing or not a string: {shown(raw)}")
    if len(raw) > MAX_VERSION_LEN:
        raise VersionError(f"{what} {shown(raw)} is {len(raw)} characters long "
                           f"(at most {MAX_VERSION_LEN})")
    return raw


def _split_note(s: str) -> tuple[str, Optional[str]]:
    """`head (note)` → (head, note) when the string ends in one parenthesised note without
    nested parentheses and has a head; else (s, None). Linear: no backtracking pattern."""
    start = s.rfind("(")
    if not s.endswith(")") or start < 0 or ")" in s[start + 1:-1] or not s[:start].strip():
        return s, None
    return s[:start].strip(), s[start + 1:-1].strip() or None


def _normalise(raw: object, what: str) -> tuple[str, Optional[str]]:
    """Strip whitespace, a leading 'version:' label and one trailing '(note)'."""
    text = bounded(raw, what)
    s, note = _split_note(_LABEL.sub("", text.strip()))
    if not s:
        raise VersionError(f"{what} is empty" + (f" (got {shown(raw)})" if text.strip() else ""))
    bad = re.search(r"[^\x20-\x7e]", s)
    if bad:
        raise VersionError(f"{what} {shown(raw)} contains a non-printable or non-ASCII character")
    return s, note


# ---------------------------------------------------------------------------------------------
# driver

_ARCHES = r"x86_64|aarch64|ppc64le|ppc64|s390x|i686|i586|armv7hl"
_KREL_BASE = re.compile(r"^\d+\.\d+(?:\.\d+)?-\d[A-Za-z0-9._+~-]*$")
_KREL_MARK = re.compile(
    r"\.(?:el|fc|es|oe|amzn|an|ky|mga)\d"  # dist tag (RHEL/Fedora/... builds)
    r"|uek"
    rf"|\.(?:{_ARCHES})$"
    r"|-(?:(?:rt|cloud)-)?(?:amd64|arm64|armmp|armmp-lpae|686|686-pae|generic|generic-64k"
    r"|lowlatency|default|azure|aws|gcp|kvm|oracle|oem|virtual|server|xen|pae|rpi|64k"
    r"|powerpc64le|s390x|ppc64el|preempt)$"
)
_KREL_DIST = re.compile(r"\.((?:el|fc|es|oe|amzn|an|ky|mga)\d[A-Za-z0-9_]*)")
_ARCH_TAIL = re.compile(rf"\.(?:{_ARCHES})$")
_K_MARK = re.compile(r"^[kK]\d*$")
_PRE = re.compile(r"^(?:rc|alpha|beta|pre)\d*$", re.IGNORECASE)
_DISTRO = re.compile(
    r"^(?:rh|rhel|el|sles|suse|sle|ubuntu|deb|debian|uek|ol|oe|fc)[0-9._]*$", re.IGNORECASE
)
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9._+]*$")
_BASE = re.compile(r"^\d[A-Za-z0-9._+~^-]*$")
_FLAVOR_TAIL = re.compile(r"^(\d+(?:\.\d+){2,})([A-Za-z])$")


@dataclass(frozen=True)
class DriverVersion:
    """A driver version as the kernel reports it, decomposed.

    `base` is what orders it (rpmvercmp); `in_kernel` is the ``-k`` marker (or an in-tree
    build); `distro` a backport tag such as ``rh7.6``; `kernel_release` means the driver
    reports the kernel release instead of its own version (a different scheme)."""

    raw: str
    base: str
    in_kernel: bool = False
    distro: Optional[str] = None
    kernel_release: bool = False
    prerelease: Optional[str] = None
    flavor: tuple[str, ...] = ()
    note: Optional[str] = None
    normalized: str = ""

    @property
    def key(self) -> str:
        """The string rpmvercmp orders: base, with a pre-release as an rpm '~' suffix."""
        if self.kernel_release:
            return _ARCH_TAIL.sub("", self.base)
        return f"{self.base}~{self.prerelease}" if self.prerelease else self.base

    @property
    def scheme_label(self) -> str:
        """'kernel-release' or 'vendor', for messages and JSON."""
        return "kernel-release" if self.kernel_release else "vendor"


def _looks_like_kernel_release(s: str, kernel: Optional[str]) -> bool:
    if kernel:
        k = kernel.strip()
        if s == k or s == _ARCH_TAIL.sub("", k):
            return True
    return bool(_KREL_BASE.match(s) and _KREL_MARK.search(s))


def parse_driver_version(raw: str, kernel: Optional[str] = None,
                         suffixes: Optional[dict[str, Optional[str]]] = None) -> DriverVersion:
    """Parse what ethtool -i / modinfo / /sys/module/X/version report into a `DriverVersion`;
    `kernel` is the running kernel release, to recognise drivers that report it; `suffixes`
    maps a vendor's trailing build letter to a distro (a vendor scheme's data, schemes.json)."""
    s, note = _normalise(raw, "driver version")
    if any(c.isspace() for c in s):
        raise VersionError(f"driver version {shown(raw)} contains spaces; expected one token")
    if _looks_like_kernel_release(s, kernel):
        dist = _KREL_DIST.search(s)
        return DriverVersion(
            raw=raw, base=s, in_kernel=True, distro=dist.group(1) if dist else None,
            kernel_release=True, note=note, normalized=s,
        )
    body = s[1:] if s[:1] in "vV" and s[1:2].isdigit() else s
    m = _FLAVOR_TAIL.match(body) if suffixes else None
    if m and suffixes and m.group(2) in suffixes:  # e.g. Emulex: 4.1.307r is a RHEL in-tree build
        return DriverVersion(
            raw=raw, base=m.group(1), in_kernel=True, distro=suffixes[m.group(2)],
            flavor=(m.group(2),), note=note, normalized=s,
        )
    parts = body.split("-")
    head = parts[0]
    in_kernel = False
    km = re.match(r"^(.*\d)_([kK]\d*)$", head)  # qla2xxx-style 10.02.06.02_k
    if km:
        head, in_kernel = km.group(1), True
    base_parts = [head]
    distro: Optional[str] = None
    pre: Optional[str] = None
    flavor: list[str] = []
    tagged = False
    for p in parts[1:]:
        if not p:
            raise VersionError(f"driver version {shown(raw)} has an empty '-' component")
        if _K_MARK.match(p):
            in_kernel = tagged = True
        elif _PRE.match(p) and pre is None:
            pre, tagged = p, True
        elif _DISTRO.match(p) and distro is None:
            distro, tagged = p, True
        elif is_digit(p[0]) and not tagged:
            base_parts.append(p)  # numeric release is part of the version: 3.0-1, 4.9-3.1.5
        elif _WORD.match(p) or is_digit(p[0]):
            flavor.append(p)
            tagged = True
        else:
            raise VersionError(f"driver version {shown(raw)} has an unrecognised part {p!r}")
    base = "-".join(base_parts)
    if not _BASE.match(base):
        raise VersionError(
            f"driver version {shown(raw)} does not look like a version (must start with a digit)"
        )
    return DriverVersion(
        raw=raw, base=base, in_kernel=in_kernel, distro=distro, prerelease=pre,
        flavor=tuple(flavor), note=note, normalized=s,
    )


def _split_krel(key: str) -> tuple[str, str]:
    head, _, tail = key.partition("-")
    return head, tail


def compare_driver(a: DriverVersion, b: DriverVersion) -> int:
    """Order two parsed driver versions; refuse kernel-release vs vendor (`VersionError`)."""
    if a.kernel_release != b.kernel_release:
        raise VersionError(
            f"cannot compare driver version {a.normalized!r} ({a.scheme_label}) with "
            f"{b.normalized!r} ({b.scheme_label}): different schemes"
        )
    if a.kernel_release:
        (va, ra), (vb, rb) = _split_krel(a.key), _split_krel(b.key)
        return vercmp_raw(va, vb) or vercmp_raw(ra, rb)
    return vercmp_raw(a.key, b.key)


def _compare_driver(a: str, b: str, kernel: Optional[str] = None) -> int:
    return compare_driver(parse_driver_version(a, kernel), parse_driver_version(b, kernel))


# ---------------------------------------------------------------------------------------------
# firmware

_HEX = re.compile(r"^0[xX][0-9a-fA-F]+$")
_FW_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~^:/-]*$")
_FW_NAME = re.compile(r"^[A-Za-z][A-Za-z_-]*$")
# unnamed layouts by token kinds: names for each position (the first one is principal);
# vendors' own layouts are data (schemes.json) and extend these per scheme
_FW_LAYOUTS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("version",): ("version",),
    ("hex",): ("etrack",),
}


@dataclass(frozen=True)
class Firmware:
    """A firmware version string split into named parts; `principal` orders it.

    `shape` is the tuple of part names and `kinds` their kinds ('version' or 'hex');
    only firmware strings of the same shape and kinds are comparable."""

    raw: str
    parts: dict[str, str] = field(hash=False)
    principal_name: str = ""
    shape: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    note: Optional[str] = None

    @property
    def principal(self) -> str:
        """The principal comparable version (e.g. '5.2.3' for 'bc 5.2.3 NCSI 2.0.12')."""
        return self.parts[self.principal_name]


def _fw_kind(tok: str) -> str:
    return "hex" if _HEX.match(tok) else "version"


def parse_firmware(raw: str,
                   layouts: Optional[dict[tuple[str, ...], tuple[str, ...]]] = None) -> Firmware:
    """Parse an ethtool firmware-version string (Broadcom named parts, Emulex dotted, e1000e
    '2.1-0'; unnamed parts by `layouts`, e.g. Intel NVM/eTrack/OEM) into a `Firmware`."""
    s, note = _normalise(raw, "firmware version")
    tokens = [t for t in re.split(r"[\s,]+", s) if t]
    if not any(is_digit(c) for c in s):
        raise VersionError(f"firmware version {shown(raw)} is not a version (no digits)")
    for t in tokens:
        is_value = any(is_digit(c) for c in t) and _FW_VALUE.match(t)
        if not (is_value or _FW_NAME.match(t)):
            raise VersionError(f"firmware version {shown(raw)} has an unrecognised part {t!r}")
    parts: dict[str, str] = {}
    if any(not any(is_digit(c) for c in t) for t in tokens):  # named form: bc 5.2.3 NCSI 2.0.12
        pending: Optional[str] = None
        for t in tokens:
            if not any(is_digit(c) for c in t):
                if pending is not None:
                    raise VersionError(
                        f"firmware version {shown(raw)}: part {pending!r} has no version"
                    )
                pending = t.lower()
                continue
            name = pending or ("main" if not parts else f"part{len(parts) + 1}")
            if name in parts:
                raise VersionError(f"firmware version {shown(raw)} names {name!r} twice")
            parts[name] = t
            pending = None
        if pending is not None:
            raise VersionError(f"firmware version {shown(raw)}: part {pending!r} has no version")
    else:
        kinds = tuple(_fw_kind(t) for t in tokens)
        names = ((layouts or {}).get(kinds) or _FW_LAYOUTS.get(kinds)
                 or tuple(f"{k}{i}" for i, k in enumerate(kinds, 1)))
        parts = dict(zip(names, tokens))
    shape = tuple(parts)
    return Firmware(
        raw=raw, parts=parts, principal_name=shape[0], shape=shape,
        kinds=tuple(_fw_kind(v) for v in parts.values()), note=note,
    )


def _fw_value_cmp(a: str, b: str) -> int:
    if _HEX.match(a) and _HEX.match(b):
        x, y = int(a, 16), int(b, 16)
        return (x > y) - (x < y)

    def strip_v(v: str) -> str:
        return v[1:] if v[:1] in "vV" and v[1:2].isdigit() else v

    return vercmp_raw(strip_v(a), strip_v(b))


def compare_firmware(a: Firmware, b: Firmware) -> int:
    """Order two parsed firmware versions: principal part first, the others in order break
    ties; different shapes raise `VersionError`."""
    if (a.shape, a.kinds) != (b.shape, b.kinds):
        raise VersionError(
            f"cannot compare firmware {a.raw.strip()!r} ({' '.join(a.shape)}) with "
            f"{b.raw.strip()!r} ({' '.join(b.shape)}): different shapes"
        )
    order = [a.principal_name] + [n for n in a.shape if n != a.principal_name]
    for name in order:
        rc = _fw_value_cmp(a.parts[name], b.parts[name])
        if rc:
            return rc
    return 0


def _compare_firmware(a: str, b: str, kernel: Optional[str] = None) -> int:
    return compare_firmware(parse_firmware(a), parse_firmware(b))


# ---------------------------------------------------------------------------------------------
# registry and the public entry points

Parsed = Union[EVR, DriverVersion, Firmware]


@dataclass(frozen=True)
class Scheme:
    """A named version scheme: how to parse one string and how to order two."""

    name: str
    summary: str
    parse: Callable[[str, Optional[str]], Parsed]
    compare: Callable[[str, str, Optional[str]], int]


SCHEMES: dict[str, Scheme] = {}


def register_scheme(scheme: Scheme) -> None:
    """Add (or replace) a scheme in the registry."""
    SCHEMES[scheme.name] = scheme


def _compare_rpm(a: str, b: str, kernel: Optional[str] = None) -> int:
    return compare_evr(_parse_rpm(a), _parse_rpm(b))


def _parse_rpm(raw: str, kernel: Optional[str] = None) -> EVR:
    return parse_evr(bounded(raw, "rpm version"))


def _parse_firmware(raw: str, kernel: Optional[str] = None) -> Firmware:
    return parse_firmware(raw)


register_scheme(Scheme(
    "rpm", "rpm [epoch:]version[-release], ordered like rpmvercmp/rpmdev-vercmp",
    _parse_rpm, _compare_rpm,
))
register_scheme(Scheme(
    "driver", "driver versions as ethtool -i / modinfo report them (5.1.0-k-rh7.6, 4.1.307r)",
    parse_driver_version, _compare_driver,
))
register_scheme(Scheme(
    "firmware", "NIC firmware strings (bc 5.2.3 NCSI 2.0.12, 6.00 0x800036cb 1.1747.0)",
    _parse_firmware, _compare_firmware,
))


class _SchemeSpec(TypedDict, total=False):
    """One object of schemes.json: a base scheme ("driver" or "firmware") and its data."""

    name: str
    base: str
    summary: str
    flavor_suffixes: Dict[str, Optional[str]]  # driver: trailing build letter -> distro
    rewrites: List[List[str]]  # driver: [regex, replacement] applied before parsing
    layouts: Dict[str, List[str]]  # firmware: token shapes -> part names


def _vendor_scheme(spec: _SchemeSpec) -> Scheme:
    """A scheme from one schemes.json object: a base scheme plus the vendor's data."""
    name, base = spec["name"], spec["base"]
    if base == "driver":
        sfx = dict(spec.get("flavor_suffixes") or {})
        rewrites = [(re.compile(pat), rep) for pat, rep in spec.get("rewrites") or []]

        def parse_d(raw: str, kernel: Optional[str] = None) -> Parsed:
            text = bounded(raw, "driver version")
            if isinstance(raw, str):
                for pat, rep in rewrites:  # what the vendor's driver prints around its version
                    text = pat.sub(rep, text)
            parsed = parse_driver_version(text, kernel, sfx)
            return dataclasses.replace(parsed, raw=raw)

        def cmp_d(a: str, b: str, kernel: Optional[str] = None) -> int:
            return compare_driver(parse_d(a, kernel), parse_d(b, kernel))  # type: ignore[arg-type]

        return Scheme(name, spec["summary"], parse_d, cmp_d)
    if base == "firmware":
        lay = {tuple(k.split()): tuple(v) for k, v in (spec.get("layouts") or {}).items()}

        def parse_f(raw: str, kernel: Optional[str] = None) -> Parsed:
            return parse_firmware(raw, lay)

        def cmp_f(a: str, b: str, kernel: Optional[str] = None) -> int:
            return compare_firmware(parse_firmware(a, lay), parse_firmware(b, lay))

        return Scheme(name, spec["summary"], parse_f, cmp_f)
    raise ValueError(f"schemes.json: scheme {name!r} has an unknown base {base!r}")


def _load_vendor_schemes() -> None:
    doc = json.loads((Path(__file__).resolve().parent / "schemes.json").read_text())
    for spec in doc["schemes"]:
        register_scheme(_vendor_scheme(spec))


_load_vendor_schemes()


def get_scheme(name: str) -> Scheme:
    """The registered scheme called `name`; `VersionError` listing the known ones otherwise."""
    try:
        return SCHEMES[name]
    except (KeyError, TypeError):
        raise VersionError(
            f"unknown version scheme {shown(name)}; known schemes: {', '.join(SCHEMES)}"
        ) from None


def parse(raw: str, scheme: str = "rpm", *, kernel: Optional[str] = None) -> Parsed:
    """Parse one version string with a scheme (validates it; raises `VersionError`)."""
    return get_scheme(scheme).parse(raw, kernel)


def compare(a: str, b: str, scheme: str = "rpm", *, kernel: Optional[str] = None) -> int:
    """Compare two version strings under `scheme`: -1 (a older), 0 (same), 1 (a newer).

    `kernel` (running kernel release) only matters to the driver scheme."""
    return get_scheme(scheme).compare(a, b, kernel)


def sort_key(scheme: str = "rpm", *,
             kernel: Optional[str] = None) -> Callable[[str], SupportsAllComparisons]:
    """A `key=` function for sorted() that orders version strings by `scheme`, oldest first."""
    sch = get_scheme(scheme)
    return functools.cmp_to_key(lambda x, y: sch.compare(x, y, kernel))


def newest(versions: Iterable[str], scheme: str = "rpm", *, kernel: Optional[str] = None) -> str:
    """The newest of `versions` under `scheme` (`VersionError` when the list is empty)."""
    items = list(versions)
    if not items:
        raise VersionError("no versions to choose from")
    return max(items, key=sort_key(scheme, kernel=kernel))
