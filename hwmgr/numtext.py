"""Numbers from untrusted text (sysfs, /proc, tool output, headers): the one place they are
converted.

Python's `int()` refuses decimal text past 4,300 digits with a bare ValueError, accepts
hex of any length (whose decimal form then cannot be printed), and takes non-ASCII digits,
underscores and surrounding whitespace. Here the text's length is bounded *before* any
conversion, only ASCII digits of the bases the source allows are taken, and a failure is
`None` (the caller reports *unknown*) or one short `NumberError` naming what was read.
"""

from __future__ import annotations

import re

from hwmgr.errors import BadInputError

# sign + prefix + digits: 128 bits is 39 decimal or 32 hex digits; nothing hwmgr reads is
# wider, so anything longer is refused unconverted (docs/formats.md, "Bounds")
MAX_NUMBER_CHARS = 64
_PATTERNS = {
    10: re.compile(r"[+-]?[0-9]+"),
    16: re.compile(r"(?:0[xX])?[0-9a-fA-F]+"),
    8: re.compile(r"[0-7]+"),
    # base 0: what the source may write as C does (0x.., 0o.., 0b.., decimal)
    0: re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|[0-9]+)"),
}
_PREFIX_BASE = {"x": 16, "o": 8, "b": 2}


class NumberError(BadInputError):
    """Untrusted text is not a number hwmgr can use; the message is one short line."""


def _convert(s: str, base: int) -> int:
    if base != 0:
        return int(s, base)
    sign = -1 if s[:1] == "-" else 1
    body = s.lstrip("+-")
    if len(body) > 2 and body[0] == "0" and body[1].lower() in _PREFIX_BASE:
        return sign * int(body[2:], _PREFIX_BASE[body[1].lower()])
    return sign * int(body, 10)


def why_not(text: str | None, base: int = 10) -> str | None:
    """None when `text` is a number in `base`; else why not, in a few words (no echo of a
    long or hostile value)."""
    if text is None:
        return "missing"
    s = text.strip()
    if not s:
        return "empty"
    if len(s) > MAX_NUMBER_CHARS:
        return f"{len(s)} characters long (a number has at most {MAX_NUMBER_CHARS})"
    if not _PATTERNS[base].fullmatch(s):
        return "not a number"
    return None


def to_int(text: str | None, base: int = 10) -> int | None:
    """`text` (surrounding whitespace ignored) as an int, or None when it is not one."""
    if why_not(text, base) is not None:
        return None
    assert text is not None
    return _convert(text.strip(), base)


def parse_int(text: str | None, what: str, base: int = 10) -> int:
    """`text` as an int, or NumberError naming `what` (the file and field it came from)."""
    reason = why_not(text, base)
    if reason is not None:
        raise NumberError(f"{what}: {reason}")
    assert text is not None
    return _convert(text.strip(), base)


def digits_key(digits: str) -> tuple[int, str]:
    """A sort key that orders ASCII digit strings as numbers without converting them (a
    kernel release's 5,000-digit component sorts last instead of raising)."""
    d = digits.lstrip("0") or "0"
    return len(d), d
