"""URLs from the command line, catalogs, site config and servers' redirects: the one place
they are split.

`urllib.parse.urlsplit` raises a bare ValueError for 'http://[::1' (and `.port` for a port
past 65535), which surfaced as an internal error. Here a URL that cannot be split is `None`
and `problem` says why in a few words, so each caller refuses it on one line. This module
imports nothing of hwmgr: `errors` names a download's peer with it.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import SplitResult, urljoin, urlsplit

MAX_URL_CHARS = 8192  # longer is refused unsplit (docs/formats.md, "Bounds")
HTTP = ("http", "https")


class Parts(NamedTuple):
    """A URL that split cleanly: scheme lower-cased, host, port (the scheme's default when
    absent) and the rest as urlsplit gives it."""

    scheme: str
    host: str
    port: int | None
    raw: SplitResult


def split(url: object) -> Parts | None:
    """`url` split into parts, or None when it cannot be (never raises)."""
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS or not url.isprintable():
        return None
    try:
        raw = urlsplit(url)
        port = raw.port
    except ValueError:  # an unclosed '[', a port that is not a number or past 65535
        return None
    scheme = raw.scheme.lower()
    if port is None:
        port = {"https": 443, "http": 80}.get(scheme)
    return Parts(scheme, raw.hostname or "", port, raw)


def problem(url: object, schemes: tuple[str, ...] = HTTP) -> str | None:
    """Why `url` is no URL of one of `schemes` with a host, in a few words; None when it is."""
    if not isinstance(url, str):
        return "not a string"
    if len(url) > MAX_URL_CHARS:
        return f"{len(url)} characters long (at most {MAX_URL_CHARS})"
    if not url.isprintable():
        return "holds a control character"
    parts = split(url)
    if parts is None:
        return "malformed (an unclosed '[' of an IPv6 address, or a bad port)"
    if parts.scheme not in schemes:
        return "not an " + "/".join(schemes) + " URL" if schemes != HTTP else \
            "not an http(s) URL"
    if not parts.host and parts.scheme in HTTP:
        return "no host"
    return None


def join(base: str, location: str) -> str:
    """A redirect's Location resolved against `base`; the Location itself (which `problem`
    then refuses) when the two cannot be joined."""
    try:
        return urljoin(base, location)
    except ValueError:
        return location


def path_of(url: object) -> str:
    """The URL's path ('' when it cannot be split): for file names and file:// mirrors."""
    parts = split(url)
    return parts.raw.path if parts is not None else ""
