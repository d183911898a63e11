"""Extract a snapshot archive (tar, optionally gzip/bzip2/xz) so hostile input cannot escape.

The mechanism, not a list of cases: every member's parent directory is opened one component
at a time relative to the destination's directory fd with `O_NOFOLLOW|O_DIRECTORY`, and
files, directories and links are created with `dir_fd` (files with `O_CREAT|O_EXCL|
O_NOFOLLOW`). A symlink from the archive is created but never followed while writing, and
nothing is ever replaced. Only regular files, directories and symlinks are accepted; each
name appears once; the decompressed stream, the bytes written and the member count are
bounded; an archive must end with tar's end-of-archive block (else it was truncated).
"""

from __future__ import annotations

import bz2
import errno
import gzip
import lzma
import os
import stat
import tarfile
import zlib
from pathlib import Path
from typing import IO

from hwmgr.errors import BadInputError, NotFoundError
from hwmgr.output import printable

MAX_BYTES = 512 << 20  # decompressed tar stream, and again for the bytes written
# entries written: members plus the directories their paths need. Real snapshots hold a few
# hundred to a few thousand; 200,001 members each in its own directory took minutes of
# metadata writes on a busy disk (issue 25), so the bound is on what gets created
MAX_MEMBERS = 30_000
MAX_DEPTH = 128  # path components in one member name (sysfs paths need ~20)
MAX_READ = 16 << 20  # one read by tarfile itself: pax/GNU long-name headers are tiny
_DIR_FDS = 256  # open parent directories kept for the next members
_NUL_BLOCK = bytes(tarfile.BLOCKSIZE)


def _show(name: str | None, limit: int = 120) -> str:
    """A member name for a one-line message: escaped, and cut if it is very long."""
    text = printable(name)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Refuse(Exception):
    """A member (or the stream) is refused; the message completes "member 'x' ..."."""


class _Bounded:
    """A read/seek/tell view of the decompressed stream that refuses to grow past a budget.

    Counts decompression work (a backward seek in a gzip stream decompresses again from
    the start), so a gzip bomb stops after MAX_BYTES whatever the tar headers claim.
    """

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.work = 0

    def _charge(self, start: int, end: int) -> None:
        self.work += end - start if end >= start else end
        if end > self.limit or self.work > 2 * self.limit:
            raise _Refuse(f"expands to more than {self.limit >> 20} MiB")

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > MAX_READ:
            raise _Refuse(f"has a header larger than {MAX_READ >> 20} MiB")
        pos = self.inner.tell()
        self._charge(pos, pos + n)
        return self.inner.read(n)

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence != 0:
            raise _Refuse("needs an unsupported seek")
        self._charge(self.inner.tell(), pos)
        return self.inner.seek(pos)

    def tell(self) -> int:
        return self.inner.tell()


def _open_regular(path: Path) -> IO[bytes]:
    """Open a user-named archive only if it is a regular file (a FIFO must not block us)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise NotFoundError(f"{printable(path)}: no such snapshot archive") from None
    except OSError as exc:
        raise BadInputError(f"{printable(path)}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInputError(f"{printable(path)}: not a regular file; refusing to open")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInputError(f"{printable(path)}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
        os.close(fd)
        raise BadInputError(f"{printable(path)}: not a regular file; refusing to open")
    return os.fdopen(fd, "rb")


def _decompressed(raw: IO[bytes]) -> IO[bytes]:
    """The tar stream inside `raw`, by magic number: gzip, bzip2, xz or plain tar."""
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return raw


def _parts(m: tarfile.TarInfo) -> tuple[str, ...]:
    """The member's path components, or `_Refuse` for absolute, `..`, empty or odd names."""
    name = m.name
    if "\x00" in name or not name.strip("/."):
        if m.isdir() and name and all(p in ("", ".") for p in name.split("/")):
            return ()  # "./": the destination itself
        if ".." in name.split("/"):
            raise _Refuse("climbs out with '..'")
        raise _Refuse("has an empty or invalid name")
    if name.startswith("/"):
        raise _Refuse("has an absolute path")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise _Refuse("climbs out with '..'")
    if len(parts) > MAX_DEPTH:
        raise _Refuse(f"is nested more than {MAX_DEPTH} directories deep")
    if not (m.isreg() or m.isdir() or m.issym()):
        kind = ("a hard link" if m.islnk() else "a device node" if m.ischr() or m.isblk()
                else "a FIFO" if m.isfifo() else "an unsupported member type")
        raise _Refuse(f"is {kind}")
    return parts


class _Writer:
    """Creates members under a directory fd, never following or replacing anything."""

    def __init__(self, dest: Path) -> None:
        self.root = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.fds: dict[tuple[str, ...], int] = {(): self.root}
        self.seen: set[tuple[str, ...]] = set()
        self.written = 0
        self.entries = 0  # files, links and directories created so far

    def _count(self) -> None:
        """One more entry on disk, or the refusal past MAX_MEMBERS."""
        self.entries += 1
        if self.entries > MAX_MEMBERS:
            raise _Refuse(f"is past the limit of {MAX_MEMBERS} entries (members and the "
                          "directories their paths need)")

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}

    def _dir(self, parts: tuple[str, ...]) -> int:
        """An fd for the directory `parts`, created as needed, never through a link."""
        fd = self.fds.get(parts)
        if fd is not None:
            return fd
        parent = self._dir(parts[:-1])
        leaf = parts[-1]
        where = _show("/".join(parts))
        try:
            self._count()
            os.mkdir(leaf, 0o755, dir_fd=parent)
        except FileExistsError:
            self.entries -= 1
        except OSError as exc:
            raise _Refuse(f"cannot create '{where}' ({exc.strerror})") from None
        try:
            fd = os.open(leaf, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=parent)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise _Refuse(f"cannot open '{where}' ({exc.strerror})") from None
            if stat.S_ISLNK(os.stat(leaf, dir_fd=parent, follow_symlinks=False).st_mode):
                raise _Refuse(f"would be written through the symlink '{where}'") from None
            raise _Refuse(f"would be written under '{where}', which is not a directory") from None
        if len(self.fds) >= _DIR_FDS:
            for key in [k for k in self.fds if k]:
                os.close(self.fds.pop(key))
        self.fds[parts] = fd
        return fd

    def add(self, tf: tarfile.TarFile, m: tarfile.TarInfo) -> None:
        parts = _parts(m)
        if not parts:
            return  # "./": the destination itself
        if parts in self.seen:
            raise _Refuse("appears twice in the archive")
        self.seen.add(parts)
        parent, leaf = self._dir(parts[:-1]), parts[-1]
        if m.isdir():
            try:
                self._dir(parts)
            except _Refuse:  # an earlier member made this name a file or a link
                raise _Refuse("would replace an earlier member") from None
        elif m.issym():
            self._count()
            try:
                os.symlink(m.linkname, leaf, dir_fd=parent)
            except FileExistsError:
                raise _Refuse("would replace an earlier member") from None
            except (OSError, ValueError) as exc:
                raise _Refuse(f"cannot be created ({_why(exc)})") from None
        else:
            self._file(tf, m, parent, leaf)

    def _file(self, tf: tarfile.TarFile, m: tarfile.TarInfo, parent: int, leaf: str) -> None:
        if m.size > MAX_BYTES - self.written:
            raise _Refuse(f"would take the snapshot past {MAX_BYTES >> 20} MiB")
        src = tf.extractfile(m)
        self._count()
        try:
            fd = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644, dir_fd=parent)
        except FileExistsError:
            raise _Refuse("would replace an earlier member") from None
        except OSError as exc:
            raise _Refuse(f"cannot be created ({_why(exc)})") from None
        with os.fdopen(fd, "wb") as out:
            while src is not None:
                chunk = src.read(1 << 16)
                if not chunk:
                    break
                self.written += len(chunk)
                if self.written > MAX_BYTES:
                    raise _Refuse(f"would take the snapshot past {MAX_BYTES >> 20} MiB")
                out.write(chunk)


def extract(archive: Path, dest: Path) -> None:
    """Extract `archive` into the existing empty directory `dest`, or `BadInputError` (8)
    with one line naming the archive and the member; `dest` may then hold a partial tree."""
    label = printable(archive)
    member: str | None = None  # the member being written, for "member 'x' ..."
    last: str | None = None  # the last member seen, for "damaged after member 'x'"
    with _open_regular(archive) as raw:
        writer = _Writer(dest)
        try:
            stream = _Bounded(_decompressed(raw), MAX_BYTES)
            tf = tarfile.TarFile(fileobj=stream, mode="r")  # type: ignore[arg-type]
            count = 0
            while (m := tf.next()) is not None:
                member = last = m.name
                count += 1
                if count > MAX_MEMBERS:  # also members that create nothing ("./", dirs seen)
                    raise _Refuse(f"is past the limit of {MAX_MEMBERS} members")
                writer.add(tf, m)
                # nothing looks back; keep memory flat (`members` is tarfile's own list,
                # absent from typeshed)
                tf.members.clear()  # type: ignore[attr-defined]
                member = None
            stream.seek(tf.offset)
            if stream.read(tarfile.BLOCKSIZE) != _NUL_BLOCK:
                raise _Damaged()
        except _Refuse as exc:
            who = f"member '{_show(member)}'" if member is not None else "archive"
            raise BadInputError(f"{label}: {who} {exc}; refusing to open") from None
        except (_Damaged, tarfile.TarError, EOFError, OSError, ValueError, zlib.error,
                lzma.LZMAError):
            after = f" after member '{_show(last)}'" if last is not None else ""
            raise BadInputError(f"{label}: cannot read snapshot archive: damaged or "
                                f"truncated{after}") from None
        finally:
            writer.close()


class _Damaged(Exception):
    """The stream does not end with tar's end-of-archive block."""


def _why(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or type(exc).__name__
