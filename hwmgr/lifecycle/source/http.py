"""One checked HTTP GET for vendor downloads: redirects followed only to http(s) and never
down from https, a resumable `Range`, retryable failures told apart from final ones, and the
body streamed with requests (`resp.raw.read`, undecoded). `fetch` builds caching, resume and
verification on top of this.
"""

from __future__ import annotations

import http.client
import re
import socket
from typing import TYPE_CHECKING, NoReturn

from hwmgr import __version__, urls
from hwmgr.errors import HwmgrError, NotFoundError, RefusedError, network_reason
from hwmgr.host.deadline import MAX_REDIRECTS, Deadline
from hwmgr.numtext import to_int
from hwmgr.output import printable

# requests (and urllib3 under it) costs tens of milliseconds to import: it is imported when
# a download starts, so the verbs that only plan or inspect never pay for it
# (tests/test_fetch.py pins this); annotations are strings (PEP 563)
if TYPE_CHECKING:
    import requests

MAX_BACKOFF = 30.0
MIN_RATE = 16 * 1024  # bytes/s: a slower download is stopped at its deadline
MIN_DEADLINE = 300.0  # seconds every download gets, however small
_REDIRECTS = (301, 302, 303, 307, 308)
NO_FILE = "nothing placed in the cache"  # what a download stopped at its deadline left
_ERRNO_TEXT = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")


class Transient(Exception):
    """A failure worth retrying: connection error, timeout, 5xx, or a body cut short."""

    def __init__(self, reason: str, *, cut: bool = False, retry_after: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cut = cut
        self.retry_after = retry_after


def new_session() -> requests.Session:
    """A new requests session for one fetch (the caller closes it)."""
    import requests

    return requests.Session()


def _short(exc: BaseException) -> str:
    """A short one-line reason for a network exception (`Connection refused`, ...)."""
    text = str(exc)
    found = _ERRNO_TEXT.search(text)
    if found:
        return found.group(1).strip()
    line = text.splitlines()[0].strip() if text else ""
    return line[:160] or "no reason given"


def _check_redirect(current: str, target: str, allow_http: bool) -> None:
    """Refuse a redirect hop to another scheme than http(s), or any downgrade to http."""
    parts, here = urls.split(target), urls.split(current)
    if parts is None or urls.problem(target) is not None:
        raise RefusedError(f"refusing redirect from {current} to {printable(target)[:200]} "
                           "(not an http(s) URL)")
    if parts.scheme == "http":
        if here is not None and here.scheme == "https":
            raise RefusedError(f"refusing redirect from {current} to {target} (https -> http)")
        if not allow_http:
            raise RefusedError(f"refusing redirect to plain-http {target} (allow_http is off)")


def _status_error(url: str, resp: requests.Response) -> HwmgrError:
    reason = f"HTTP {resp.status_code}" + (f" {resp.reason}" if resp.reason else "")
    if resp.status_code in (404, 410):
        return NotFoundError(f"{url}: {reason}")
    return HwmgrError(f"{url}: {reason}")


def _ascii_int(value: str | None, digits: int) -> int | None:
    """A header's decimal number: ASCII digits only (`int()` also takes '٣' and str.isdigit
    '²'), at most `digits` of them; None for anything else."""
    if value is None or len(value.strip()) > digits or value.strip()[:1] in ("+", "-"):
        return None
    return to_int(value)


def _retry_after(resp: requests.Response) -> float:
    """Retry-After in seconds (the delta form; an HTTP date is ignored), capped at
    MAX_BACKOFF."""
    seconds = _ascii_int(resp.headers.get("Retry-After"), 9)
    return 0.0 if seconds is None else min(float(seconds), MAX_BACKOFF)


def open_get(
    session: requests.Session, url: str, offset: int, allow_http: bool, timeout: float,
    deadline: Deadline | None = None,
) -> tuple[requests.Response, str]:
    """GET `url` (from byte `offset`), following at most MAX_REDIRECTS checked hops, all
    within `deadline` (whose watchdog, `host.deadline`, cuts a read that drips past it)."""
    import requests

    headers = {"Accept-Encoding": "identity", "User-Agent": f"hwmgr/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    origin = url
    for _hop in range(MAX_REDIRECTS + 1):
        if deadline is not None and deadline.passed():
            raise deadline.exceeded(origin, "before the headers arrived", NO_FILE)
        wait = timeout if deadline is None else max(min(timeout, deadline.left()), 0.001)
        try:
            resp = session.get(
                url,
                headers=headers,
                stream=True,
                allow_redirects=False,
                timeout=(wait, wait),
                # pass the session's own CA choice: REQUESTS_CA_BUNDLE would override it
                verify=getattr(session, "verify", True),
            )
        except requests.RequestException as exc:
            if deadline is not None and deadline.passed():  # the watchdog cut the socket
                raise deadline.exceeded(origin, "before the headers arrived", NO_FILE) from exc
            _request_error(exc, url, timeout)
        code = resp.status_code
        if code in _REDIRECTS:
            location = resp.headers.get("Location")
            resp.close()
            if not location:
                raise HwmgrError(f"{url}: HTTP {code} redirect without a Location header")
            target = urls.join(url, location)
            _check_redirect(url, target, allow_http)
            url = target
            continue
        if 200 <= code < 300:
            # a body cut short reads as fewer bytes (the caller compares with the catalog's
            # size and resumes from exactly what arrived), not as an error that drops them
            resp.raw.enforce_content_length = False
            return resp, url
        resp.close()
        if code >= 500 or code in (408, 429):
            raise Transient(
                f"HTTP {code} {resp.reason or ''}".strip(), retry_after=_retry_after(resp)
            )
        raise _status_error(url, resp)
    raise RefusedError(f"refusing more than {MAX_REDIRECTS} redirects starting at {origin}")


def _request_error(exc: requests.RequestException, url: str, timeout: float) -> NoReturn:
    """Raise what a failed request means: Transient (worth a retry) or HwmgrError."""
    import requests

    if isinstance(exc, requests.Timeout):
        raise Transient(network_reason(exc, url, timeout)) from exc
    if isinstance(exc, requests.exceptions.SSLError):
        raise HwmgrError(f"{url}: TLS error: {_short(exc)}") from exc
    if isinstance(exc, requests.ConnectionError):
        raise Transient(network_reason(exc, url)) from exc
    raise HwmgrError(f"{url}: {_short(exc)}") from exc


def content_length(resp: requests.Response) -> int | None:
    value = resp.headers.get("Content-Length")
    if value is None or "chunked" in resp.headers.get("Transfer-Encoding", "").lower():
        return None
    return _ascii_int(value, 19)  # 19 digits: any size a 64-bit counter can hold


class DeadlineExceeded(OSError):
    """The download's total deadline passed (a server dripping bytes within every per-read
    timeout); the bytes that arrived are kept for a resume."""


def deadline_for(size: int, timeout: float) -> Deadline:
    """The total time one download may take, headers, redirects and retries included: the
    per-read timeout plus `size` at MIN_RATE, at least MIN_DEADLINE (a dripping server
    cannot hold a fetch forever)."""
    return Deadline.after(timeout + max(size / MIN_RATE, MIN_DEADLINE))


def read_body(resp: requests.Response, amount: int, deadline: Deadline | None = None,
              ) -> tuple[bytes, Exception | None]:
    """Up to `amount` bytes of the body as sent (no content decoding), fewer only at its end,
    where the connection failed or at `deadline`: (the bytes that arrived, the network error
    if any; DeadlineExceeded once the deadline passed, also when its watchdog cut the read
    short). Reads return what one receive brought (`read1`, urllib3 2), so the deadline is
    checked between them; on urllib3 1.26 (RHEL 9) the watchdog ends a blocked read."""
    import urllib3

    parts: list[bytes] = []
    got = 0
    read = getattr(resp.raw, "read1", None) if deadline is not None else None
    try:
        while got < amount:
            if deadline is not None and deadline.passed():
                break
            data = (read(amount - got, decode_content=False) if read is not None
                    else resp.raw.read(amount - got, decode_content=False))
            if not data:
                break
            parts.append(data)
            got += len(data)
    except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as exc:
        if deadline is None or not deadline.passed():
            return b"".join(parts), exc
    if deadline is not None and deadline.passed():
        return b"".join(parts), DeadlineExceeded(
            f"the download's deadline passed after {got} more bytes")
    return b"".join(parts), None


def stalled(error: Exception) -> bool:
    """True when a body read failed because no data came within the timeout."""
    import urllib3

    return isinstance(error, (socket.timeout, urllib3.exceptions.ReadTimeoutError))
