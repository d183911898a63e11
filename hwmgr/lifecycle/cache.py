"""The download cache on disk: content-addressed files that only ever appear complete.

A download streams into `<final>.part` through `Sink` (hashing in a helper thread while
writing), then `finish` fsyncs and renames it; a per-directory flock keeps two downloads of
the same file apart; mirror copies go through the same `.part` + verify + rename path.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import queue
import shutil
import threading
from pathlib import Path
from typing import Any, Iterator

from hwmgr.errors import HwmgrError, LockedError, RefusedError
from hwmgr.host.seam import fsync_dir

CHUNK = 1 << 20  # stream, hash and write in 1 MiB chunks
WRITEBACK = 16 * CHUNK  # start write-back every 16 MiB (keeps the final fsync short)
QUEUE_DEPTH = 8  # chunks in flight between the network reader and the disk writer


def part_of(final: Path) -> Path:
    return final.with_name(final.name + ".part")


def unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def hash_file(path: Path, hasher: Any, limit: int) -> int:
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
    """Hashes and writes chunks on a helper thread, so disk and sha256 overlap the network.

    Chunks live in a small pool of reused 1 MiB buffers: no per-chunk allocation or copy.
    """

    def __init__(self, fd: int, hasher: Any, part: Path, offset: int = 0) -> None:
        self._fd = fd
        self._written = self._flushed = offset
        self._hasher = hasher
        self._part = part
        self._full: queue.Queue[tuple[bytearray, int] | None] = queue.Queue()
        self._free: queue.Queue[bytearray] = queue.Queue()
        for _ in range(QUEUE_DEPTH):
            self._free.put(bytearray(CHUNK))
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="hwmgr-fetch-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._full.get()
            if item is None:
                return
            buf, n = item
            if self._error is None:
                try:
                    view = memoryview(buf)[:n]
                    self._hasher.update(view)
                    while view:
                        view = view[os.write(self._fd, view) :]
                    self._written += n
                    if self._written - self._flushed >= WRITEBACK:
                        self._start_writeback()
                except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                    self._error = exc
            self._free.put(buf)

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

    def _raise(self) -> None:
        exc = self._error
        if exc is not None:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise HwmgrError(f"cannot write {self._part}: {reason}") from exc

    def buffer(self) -> bytearray:
        """A free buffer to read into (blocks while the disk side is behind)."""
        self._raise()
        return self._free.get()

    def put(self, buf: bytearray, n: int) -> None:
        """Queue the first `n` bytes of `buf` for hashing and writing; `buf` comes back later."""
        if n:
            self._full.put((buf, n))
        else:
            self._free.put(buf)

    def close(self) -> None:
        """Flush every queued chunk and stop the thread; raise the first write error."""
        if self._thread.is_alive():
            self._full.put(None)
            self._thread.join()
        self._raise()


def finish(part: Path, final: Path, fd: int | None = None) -> None:
    """Make the verified `.part` durable and move it to its final name atomically."""
    if fd is None:
        fd = os.open(part, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    else:
        os.fsync(fd)
    os.replace(part, final)
    fsync_dir(final.parent)


def copy_verified(src: Path, final: Path, hexsum: str, size: int) -> bool:
    """Copy `src` into the cache through `.part`; keep it only if the copy's size/sha256 match."""
    part = part_of(final)
    try:
        if src.stat().st_size != size:
            return False
        shutil.copyfile(src, part)  # kernel-side copy; the copy is what gets verified
        if not verified(part, hexsum, size):
            unlink_quietly(part)
            return False
        finish(part, final)
    except OSError as exc:
        unlink_quietly(part)
        raise HwmgrError(f"cannot copy {src} into the cache: {exc.strerror or exc}") from exc
    return True


def mirror_files(mirror: Path, name: str, hexsum: str) -> list[Path]:
    """The mirror's regular files that may hold the artifact (flat, or laid out like a cache)."""
    candidates = [Path(mirror) / name, Path(mirror) / "sha256" / hexsum / name]
    return [cand for cand in candidates if cand.is_file()]


def from_mirror(mirror: Path, name: str, hexsum: str, size: int, final: Path) -> Path | None:
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
