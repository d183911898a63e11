"""Safe vendor-package downloads: the Fetch step of an upgrade transaction.

Files are cached by sha256, fetched over HTTPS (HTTP only when the catalog allows it), resumed
with `Range` after a cut, verified against the catalog's size and checksum while they stream,
and only ever appear under their final name complete and verified (`.part` + fsync + rename).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping
from urllib.parse import unquote

from hwmgr import urls
from hwmgr.errors import BadInputError, HwmgrError, NotFoundError, RefusedError
from hwmgr.host.deadline import Deadline, guard
from hwmgr.host.seam import Host
from hwmgr.lifecycle.source.cache import (
    CacheFile,
    Sink,
    finish,
    from_mirror,
    hash_file,
    locked,
    mirror_files,
    verified,
)
from hwmgr.lifecycle.source.http import (
    MAX_BACKOFF,
    DeadlineExceeded,
    Transient,
    content_length,
    deadline_for,
    new_session,
    open_get,
    read_body,
    stalled,
)
from hwmgr.numtext import to_int
from hwmgr.output import printable

if TYPE_CHECKING:  # requests is imported when a download starts (hwmgr.lifecycle.source.http)
    import requests

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_UNSAFE_NAME = re.compile(r"[/\\\0]|\A\.|\.part\Z")  # no paths, dot-files or .part names
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)\s*\Z", re.IGNORECASE)

Progress = Callable[[int, int], None]
STEP = 64 << 10  # bytes read (and reported to the progress callback) at a time


@dataclass
class Source:
    """One downloadable artifact as a catalog names it: where, its sha256 and exact size.
    No `url`: a file the site obtained by hand, served only by the cache or a mirror."""

    url: str | None
    sha256: str
    size: int
    allow_http: bool = False
    filename: str | None = None

    @classmethod
    def from_catalog(cls, entry: Mapping[str, Any], *, where: str = "source") -> Source:
        """Build a Source from a catalog `source` object; BadInputError names a bad field."""
        if not isinstance(entry, Mapping):
            raise BadInputError(f"{where}: expected an object with url, sha256 and size")
        for key in ("sha256", "size"):
            if key not in entry:
                raise BadInputError(f"{where}.{key}: missing")
        src = cls(
            url=entry.get("url"),
            sha256=entry["sha256"],
            size=entry["size"],
            allow_http=entry.get("allow_http", False),
            filename=entry.get("filename"),
        )
        _validate(src, where=where)
        return src

    def name(self) -> str:
        """The cache file name: `filename` if set, else the last path segment of the URL."""
        if self.filename is not None:
            return self.filename
        if not self.url:
            return ""  # _validate: set source.filename
        path = urls.path_of(self.url)
        return unquote(path.rsplit("/", 1)[-1])


@dataclass
class FetchResult:
    """Where the verified file is and how it got there (cache, mirror or network)."""

    path: Path
    sha256: str
    size: int
    from_cache: bool
    url: str | None
    seconds: float
    attempts: int = 0
    origin: str = "network"


class _ResumedMismatch(Exception):
    """A resumed download failed its checksum: the old `.part` prefix may be stale."""


# ------------------------------------------------------------------ validation and paths
def _check_name(filename: object, where: str) -> str:
    if not isinstance(filename, str) or not filename:
        raise BadInputError(f"{where}: empty file name; set source.filename")
    if _UNSAFE_NAME.search(filename) or len(filename) > 200:
        raise BadInputError(f"{where}: unsafe file name {filename!r}")
    return filename


def _check_hex(sha256: object, where: str) -> str:
    hexsum = sha256.strip().lower() if isinstance(sha256, str) else ""
    if not _HEX64.match(hexsum):
        raise BadInputError(f"{where}: not a sha256 hex digest: {sha256!r}")
    return hexsum


def _validate(src: Source, *, where: str = "source") -> tuple[str | None, str, int, str]:
    """Check a Source; return (url or None, sha256 hex, size, file name) or raise
    BadInputError."""
    if src.url is not None:
        if not isinstance(src.url, str) or not src.url:
            raise BadInputError(f"{where}.url: empty")
        parts = urls.split(src.url)
        bad = urls.problem(src.url)
        if parts is None or bad is not None:
            raise BadInputError(f"{where}.url: {bad}: {printable(src.url)[:200]!r}")
        if parts.scheme == "http" and not src.allow_http:
            raise RefusedError(f"refusing plain-http download {src.url} (catalog does not "
                               "allow_http)")
    elif src.filename is None:
        raise BadInputError(f"{where}: no url and no filename; a file obtained by hand is "
                            "named with source.filename")
    if not isinstance(src.allow_http, bool):
        raise BadInputError(f"{where}.allow_http: expected true or false")
    hexsum = _check_hex(src.sha256, f"{where}.sha256")
    if not isinstance(src.size, int) or isinstance(src.size, bool) or src.size <= 0:
        raise BadInputError(f"{where}.size: expected a positive byte count, got {src.size!r}")
    name = _check_name(src.name(), f"{where}.filename")
    return src.url, hexsum, src.size, name


def cache_path(cache_dir: Path, sha256: str, filename: str) -> Path:
    """The cache location of a file: `cache_dir/sha256/<hex>/<filename>` (keyed by content)."""
    hexsum = _check_hex(sha256, "sha256")
    return Path(cache_dir) / "sha256" / hexsum / _check_name(filename, "filename")


# ------------------------------------------------------------------ one attempt
@dataclass
class _Job:
    """What every attempt of one download needs."""

    session: requests.Session
    url: str
    hexsum: str
    size: int
    final: CacheFile
    allow_http: bool
    timeout: float
    progress: Progress | None
    on_retry: Callable[[str], None] | None = None  # told each retry before its back-off
    deadline: Deadline | None = None  # of every attempt, headers and redirects included

    @property
    def part(self) -> CacheFile:
        return self.final.part


def _resume_point(job: _Job) -> tuple[int, hashlib._Hash]:
    """Bytes already in `.part` and a hasher primed with them; -1 if `.part` is complete."""
    part, hasher = job.part, hashlib.sha256()
    offset = part.regular_size()  # a symlink or FIFO in its place is removed, not followed
    if offset > job.size:
        part.remove()
        return 0, hasher
    offset = hash_file(part.real, hasher, offset) if offset else 0
    if offset == job.size:  # complete but never renamed (crash between fsync and rename)
        if hasher.hexdigest() == job.hexsum:
            finish(job.final)
            return -1, hasher
        part.remove()
        return 0, hashlib.sha256()
    return offset, hasher


def _body_start(job: _Job, resp: requests.Response, served: str, offset: int) -> int:
    """Check status, Content-Range and Content-Length; return where the body starts."""
    if offset and resp.status_code == 206:
        found = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
        if found and found.group(3) != "*" and to_int(found.group(3)) != job.size:
            job.part.remove()
            raise RefusedError(
                f"{served}: server has {found.group(3)} bytes, catalog size is {job.size}"
            )
        if not found or to_int(found.group(1)) != offset:
            job.part.remove()  # a range we did not ask for: start over next attempt
            raise Transient(f"bad Content-Range {resp.headers.get('Content-Range')!r}")
    elif offset:  # 200: the server ignored Range, so start again from byte 0
        offset = 0
    elif resp.status_code != 200:
        raise HwmgrError(f"{served}: unexpected HTTP {resp.status_code} for a download")
    expected = job.size - offset
    announced = content_length(resp)
    if announced is not None and announced != expected:
        job.part.remove()
        what = "truncated body" if announced < expected else "oversized body"
        raise RefusedError(
            f"{what}: {served} announces {offset + announced} bytes, catalog size is {job.size}"
        )
    return offset


def _stream(job: _Job, resp: requests.Response, served: str, sink: Sink, done: int) -> int:
    """Copy the body into `sink`, never past `size` bytes; return the bytes now on disk."""
    size = job.size
    if job.progress is not None:
        job.progress(done, size)
    while True:
        # never read past size+1: oversize shows, no more; STEP-sized reads keep the
        # progress bar moving on a slow link (a 1 MiB CHUNK there is a frozen bar)
        want = min(STEP, size + 1 - done)
        data, error = read_body(resp, want, job.deadline)
        n = len(data)
        if done + n > size:
            job.part.remove()
            raise RefusedError(f"oversized body: {served} sent more than {size} bytes")
        sink.write(data)
        done += n
        if job.progress is not None and n:
            job.progress(done, size)
        if isinstance(error, DeadlineExceeded) and job.deadline is not None:
            raise HwmgrError(f"download of {served} too slow: {size} bytes not done within "
                             f"{job.deadline.words()} (partial kept in {job.part.name} for "
                             "a resume)")
        if error is not None:
            if stalled(error):
                reason = f"stalled: no data for {job.timeout:g} s after {done} bytes"
                raise Transient(reason) from error
            raise Transient(f"connection cut after {done} of {size} bytes", cut=True) from error
        if n < want:
            return done


def _attempt(job: _Job) -> str:
    """One download attempt (resuming any `.part`); return the URL actually served."""
    offset, hasher = _resume_point(job)
    if offset < 0:
        return job.url
    resp, served = open_get(job.session, job.url, offset, job.allow_http, job.timeout,
                            job.deadline)
    with contextlib.ExitStack() as stack:
        stack.callback(resp.close)
        start = _body_start(job, resp, served, offset)
        if start != offset:
            hasher = hashlib.sha256()
        fd = job.final.host.open_resumable(job.part.logical, start)
        stack.callback(os.close, fd)
        done = _stream(job, resp, served, Sink(fd, hasher, job.part.real, start), start)
        if done < job.size:
            raise Transient(f"connection closed after {done} of {job.size} bytes", cut=True)
        digest = hasher.hexdigest()
        if digest != job.hexsum:
            job.part.remove()
            if start:
                raise _ResumedMismatch(digest)
            raise RefusedError(
                f"checksum mismatch for {job.final.name} from {served}: "
                f"sha256 {digest}, catalog says {job.hexsum}"
            )
        finish(job.final, fd)
    return served


def _download(job: _Job, retries: int, backoff: float) -> tuple[str, int]:
    """Run attempts with exponential back-off; return (served URL, attempts used)."""
    attempts = 0
    restarted = False
    while True:
        attempts += 1
        try:
            return _attempt(job), attempts
        except _ResumedMismatch as exc:
            if restarted:  # pragma: no cover - a fresh download never raises this
                raise RefusedError(f"checksum mismatch for {job.final.name}") from exc
            restarted = True  # the stale prefix is gone: one clean download, no back-off
            attempts -= 1
        except Transient as exc:
            if attempts > retries:
                if exc.cut:
                    raise RefusedError(
                        f"truncated body: {job.url} {exc.reason} (after {attempts} attempts; "
                        f"partial kept in {job.part.name} for a resume)"
                    ) from exc
                raise HwmgrError(
                    f"download of {job.url} failed after {attempts} attempts: {exc.reason}"
                ) from exc
            delay = max(min(backoff * (2 ** (attempts - 1)), MAX_BACKOFF), exc.retry_after)
            if job.on_retry is not None:
                job.on_retry(f"{job.final.name}: {exc.reason}; retry {attempts} of {retries} "
                             f"in {delay:.1f} s")
            time.sleep(delay if job.deadline is None else min(delay, job.deadline.left()))


# ------------------------------------------------------------------ public entry point
def fetch(
    host: Host,
    source: Source,
    cache_dir: str,
    *,
    offline: bool = False,
    mirror: Path | None = None,
    timeout: float = 30.0,
    retries: int = 4,
    backoff: float = 0.5,
    progress: Progress | None = None,
    session: requests.Session | None = None,
    on_retry: Callable[[str], None] | None = None,
    deadline: float | None = None,
) -> FetchResult:
    """Return a verified local copy of `source`: from the cache, a mirror, or the network.

    `cache_dir` is a host path (the run's cache dir); every write goes through `host`.

    Every attempt, headers and redirects included, ends within one total `deadline` (seconds;
    default `deadline_for` the size): requests' `timeout` is per read.

    Raises NotFoundError (404, or offline miss), RefusedError (checksum/size/scheme/redirect
    refusals) or HwmgrError (network failure after `retries` retries); never leaves a file
    under the final cache name unless it is complete and verified.
    """
    started = time.monotonic()
    url, hexsum, size, name = _validate(source)
    if timeout <= 0 or retries < 0 or backoff < 0 or (deadline is not None and deadline <= 0):
        raise BadInputError("fetch: timeout and deadline must be > 0, retries and backoff >= 0")
    final = CacheFile(host, str(cache_path(Path(cache_dir), hexsum, name)))

    def result(origin: str, served: str | None, attempts: int = 0) -> FetchResult:
        return FetchResult(
            path=final.real,
            sha256=hexsum,
            size=size,
            from_cache=origin == "cache",
            url=served,
            seconds=time.monotonic() - started,
            attempts=attempts,
            origin=origin,
        )

    if verified(final.real, hexsum, size):
        return result("cache", None)
    if (offline or url is None) and (mirror is None or not mirror_files(mirror, name, hexsum)):
        where = f"cache {cache_dir}" + (f" or mirror {mirror}" if mirror is not None else "")
        how = "offline" if offline else "no url in the catalog"
        raise NotFoundError(f"{how}: {name} (sha256 {hexsum[:12]}...) is not in the {where}")
    try:
        host.makedirs(str(Path(final.logical).parent))
    except OSError as exc:
        raise HwmgrError(f"cannot create cache dir {final.real.parent}: {exc.strerror}") from exc

    with locked(final.real.parent, name):
        if final.real.exists() or final.real.is_symlink():
            if verified(final.real, hexsum, size):  # another process finished it meanwhile
                return result("cache", None)
            final.remove()  # corrupt cache entry: never trust it
        if mirror is not None:
            try:
                used = from_mirror(mirror, name, hexsum, size, final)
            except RefusedError:
                if offline:
                    raise
                used = None  # online: a bad mirror copy is skipped, the network decides
            if used is not None:
                return result("mirror", used.resolve().as_uri())
        if offline or url is None:  # pragma: no cover - the mirror file vanished meanwhile
            raise NotFoundError(f"offline: {name} is no longer in mirror {mirror}")
        with contextlib.ExitStack() as stack:
            if session is None:  # our own, closed when done
                session = stack.enter_context(new_session())
            total = deadline_for(size, timeout) if deadline is None else Deadline.after(deadline)
            job = _Job(session, url, hexsum, size, final, source.allow_http, timeout, progress,
                       on_retry, total)
            stack.enter_context(guard(session).armed(total))
            served, attempts = _download(job, retries, backoff)
    return result("network", served, attempts)
