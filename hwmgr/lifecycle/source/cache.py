"""The download cache on disk: content-addressed files that only ever appear complete.

A download streams into `<final>.part` through `Sink` (hashing in a helper thread while
writing), then `finish` fsyncs and renames it; a per-directory flock keeps two downloads of
the same file apart; mirror copies go through the same `.part` + verify + rename path. Every
write goes through the Host (`CacheFile.logical`); reads open the checked real path.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from hwmgr.errors import HwmgrError, LockedError, RefusedError
from hwmgr.host.seam import Host

CHUNK = 1 << 20  # stream, hash and write in 1 MiB chunks
WRITEBACK = 16 * CHUNK  # start write-back every 16 MiB (keeps the final fsync short)


@dataclass(frozen=True)
class CacheFile:
    """A file in the cache: writes go through `host` at `logical`; reads open `real`."""

    host: Host
    logical: str
    real: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "real", self.host.writable_path(self.logical))

    @property
    def name(self) -> str:
        return self.real.name

    @property
    def part(self) -> CacheFile:
        """Where a download or copy of this file grows until it is verified."""
        return CacheFile(self.host, self.logical + ".part")

    def remove(self) -> bool:
        """Remove the file (never following a link); False when it was not there."""
        return self.host.remove(self.logical)

    def regular_size(self) -> int:
        """The size of this file when it is a regular file; 0 when absent. Anything else in
        its place (a symlink, even one to a file: a resume must never append through it; a
        FIFO; a directory) is removed first, so a download starts afresh."""
        try:
            st = os.lstat(self.real)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise HwmgrError(f"cannot read {self.real}: {exc.strerror or exc}") from None
        if stat.S_ISREG(st.st_mode):
            return st.st_size
        try:
            self.remove()
        except OSError as exc:
            raise HwmgrError(f"{self.real} is not a regular file and cannot be removed: "
                             f"{exc.strerror or exc}") from None
        return 0


def hash_file(path: Path, hasher: hashlib._Hash, limit: int) -> int:
    """Feed up to `limit` bytes of `path` into `hasher`; return how many were read."""
    done = 0
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while done < limit:
            n = fh.readinto(view[: min(CHUNK, limit - done)])
            if not n:
                break
            hasher.update(view[:n])
            done += n
    return done


def verified(path: Path, hexsum: str, size: int) -> bool:
    """True if `path` is a regular file (no symlink) of `size` bytes with sha256 `hexsum`."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size != size:
            return False
        hasher = hashlib.sha256()
        return hash_file(path, hasher, size + 1) == size and hasher.hexdigest() == hexsum
    except OSError:
        return False


@contextlib.contextmanager
def locked(directory: Path, name: str) -> Iterator[None]:
    """Hold an exclusive flock on the per-checksum cache directory while downloading."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                msg = f"another hwmgr is already downloading {name} into {directory}"
                raise LockedError(msg) from None
            raise
        yield
    finally:
        os.close(fd)


# ------------------------------------------------------------------ disk side
class Sink:
    """Hashes the body as it streams and appends it to the open `.part` file."""

    def __init__(self, fd: int, hasher: hashlib._Hash, part: Path, offset: int = 0) -> None:
        self._fd = fd
        self._written = self._flushed = offset
        self._hasher = hasher
        self._part = part

    def write(self, data: bytes) -> None:
        """Hash and append `data`; HwmgrError naming the `.part` file if the disk refuses."""
        self._hasher.update(data)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            raise HwmgrError(f"cannot write {self._part}: {exc.strerror or exc}") from exc
        self._written += len(data)
        if self._written - self._flushed >= WRITEBACK:
            self._start_writeback()

    def _start_writeback(self) -> None:
        """Start writing dirty pages out now, so the final fsync has little left to do.

        On Linux, DONTNEED on just-written (still dirty) pages queues their write-back
        without dropping them from the page cache; where unsupported it is a no-op.
        """
        if hasattr(os, "posix_fadvise"):
            length = self._written - self._flushed
            with contextlib.suppress(OSError):  # only a hint: never fail a download on it
                os.posix_fadvise(self._fd, self._flushed, length, os.POSIX_FADV_DONTNEED)
        self._flushed = self._written


def finish(final: CacheFile, fd: int | None = None) -> None:
    """Make the verified `.part` durable and move it to its final name atomically."""
    final.host.replace(final.part.logical, final.logical, fd=fd)


def copy_verified(src: Path, final: CacheFile, hexsum: str, size: int) -> bool:
    """Copy `src` into the cache through `.part`; keep it only if the copy's size/sha256 match."""
    part = final.part
    try:
        if src.stat().st_size != size:
            return False
        final.host.copy_in(src, part.logical)  # kernel-side copy; the copy gets verified
        if not verified(part.real, hexsum, size):
            part.remove()
            return False
        finish(final)
    except OSError as exc:
        with contextlib.suppress(OSError):
            part.remove()
        raise HwmgrError(f"cannot copy {src} into the cache: {exc.strerror or exc}") from exc
    return True


def mirror_files(mirror: Path, name: str, hexsum: str) -> list[Path]:
    """The mirror's regular files that may hold the artifact (flat, or laid out like a cache)."""
    candidates = [Path(mirror) / name, Path(mirror) / "sha256" / hexsum / name]
    return [cand for cand in candidates if cand.is_file()]


def from_mirror(mirror: Path, name: str, hexsum: str, size: int, final: CacheFile) -> Path | None:
    """Find the file in a mirror directory (flat, or laid out like a cache); verify and copy.

    Returns the mirror file used, None if the mirror does not have it, and raises
    RefusedError if the mirror's copy exists but fails the size/checksum check.
    """
    bad: Path | None = None
    for cand in mirror_files(mirror, name, hexsum):
        if copy_verified(cand, final, hexsum, size):
            return cand
        bad = cand
    if bad is not None:
        raise RefusedError(f"mirror file {bad} does not match the catalog's size/sha256 {hexsum}")
    return None
