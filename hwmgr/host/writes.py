"""The write half of the host seam: every change hwmgr makes to a machine goes through here.

Writes are confined. Under a non-`/` root (a fake tree, a snapshot) they stay in the root:
parents are resolved component by component and a symlink that would lead out of the root
(an absolute target, or `..` above the root) is refused rather than re-rooted. On the live
host they stay under the writable roots: `LIVE_WRITABLE` plus the directories the run adds
(`cli` adds the state and cache dirs; `hwmgr package` a local Host for its `--out` dir).
Anything else raises RefusedError naming the path, before anything changes. Files only ever
appear whole: a temp file beside the target, fsync, rename, fsync of the directory.

Sources of copies and archives (`copy_in`, `copy_tree`, `extract_tar`) are paths on the
machine running hwmgr (a mirror, a work tree, a downloaded archive); they are only read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
import tarfile
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Optional

from hwmgr.errors import RefusedError
from hwmgr.host.links import Escape, disk_links, walk

# tarfile.TarInfo -> the TarInfo to extract, or None to skip it
Select = Callable[[tarfile.TarInfo], Optional[tarfile.TarInfo]]

TMP_SUFFIX = ".hwmgr-tmp"
# Host paths hwmgr itself writes on the live machine, besides the state and cache dirs. DKMS,
# depmod and update-initramfs/dracut write /var/lib/dkms, /lib/modules and /boot themselves
# (they are commands, not writes through the seam), so those trees are not listed for that.
LIVE_WRITABLE = (
    "/usr/src",  # DKMS source trees: `dkms add` copies the prepared tree to /usr/src/NAME-VER
    "/lib/modules",  # undo: restore a backed-up .ko, remove one that did not exist before
    "/boot",  # undo/rollback: put a kept initramfs image back byte for byte
    # kernel-gate's hold of the boot default (lifecycle/gate/bootloader.py)
    "/etc/default/grub",
    "/efi/loader",
    # settings persistence (compliance apply/revert): one drop-in per backend
    "/etc/hwmgr",
    "/etc/modprobe.d",
    "/etc/sysctl.d",
    "/etc/udev/rules.d",
    "/etc/systemd/network",
    "/etc/NetworkManager",
    "/etc/network",
    "/etc/sysconfig/network-scripts",
)


def fsync_dir(path: os.PathLike[str] | str) -> None:
    """fsync a directory so a rename in it survives a power cut."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems refuse directory fsync
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class Writes:
    """The confined writers of `Host` (mixed in; see the module docstring)."""

    live: bool
    _real_root: str
    _dir_cache: dict[str, str | None]
    _writable: list[str]

    # ---------------------------------------------------------------- confinement
    def allow_writes(self, *logical: str | os.PathLike[str]) -> None:
        """Add writable roots on the live host (the run's state/cache dirs, a named --out)."""
        for p in logical:
            text = os.fspath(p)
            if not text.startswith("/"):
                raise RefusedError(f"writable dir {text!r}: expected an absolute path")
            self._writable.append(os.path.normpath(text))

    @property
    def writable(self) -> tuple[str, ...]:
        """The live host's writable roots (a rooted host may write anywhere in its root)."""
        return tuple(self._writable)

    def writable_path(self, logical: str | os.PathLike[str]) -> Path:
        """The checked real path of a logical path, for tools that write there (rpm, dkms)."""
        return Path(self._target(logical))

    def _target(self, logical: str | os.PathLike[str]) -> str:
        """The real path a write to `logical` touches; RefusedError if it is not allowed."""
        text = os.fspath(logical)
        if not text.startswith("/") or "\x00" in text:
            raise RefusedError(f"refusing to write {text!r}: not an absolute host path")
        parts = [p for p in text.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise RefusedError(f"refusing to write {text}: '..' in a host path")
        if not parts:
            raise RefusedError(f"refusing to write {text}: the root itself")
        if self.live:
            norm = "/" + "/".join(parts)
            real = os.path.join(os.path.realpath(os.path.dirname(norm)), parts[-1])
            if any(_under(real, os.path.realpath(r)) for r in self._writable):
                return real
            raise RefusedError(
                f"refusing to write {text}: outside the directories hwmgr may write on this "
                "host (state dir, cache dir, /usr/src, /lib/modules, settings drop-ins)"
            )
        return os.path.join(self._resolve_for_write(parts[:-1], text), parts[-1])

    def _resolve_for_write(self, parts: list[str], logical: str) -> str:
        """Real directory of `parts` under the root; refuse a symlink leading out of it."""
        root = self._real_root
        try:
            done = walk(parts, disk_links(root), reroot=False)
        except Escape as esc:
            if esc.why == "climb":
                why = f"a symlink in it climbs out of the root {root}"
            elif esc.why == "absolute":
                why = f"/{esc.link} is a symlink to {esc.target}, outside the root {root}"
            else:
                why = "too many symlinks"
            raise RefusedError(f"refusing to write {logical}: {why}") from None
        return os.path.join(root, *done)

    def _changed(self) -> None:
        """The tree changed: forget cached directory resolutions of the read side."""
        self._dir_cache.clear()

    # ---------------------------------------------------------------- files
    @contextlib.contextmanager
    def _staged(self, logical: str) -> Iterator[str]:
        """A fresh temp name beside `logical`'s target: renamed over the target when the block
        ends, removed when it fails; the directory is fsynced after the rename."""
        target = self._target(logical)
        parent, name = os.path.split(target)
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{name}{TMP_SUFFIX}")
        _unlink_quietly(tmp)  # never write through a link left at the temp name
        try:
            yield tmp
            os.replace(tmp, target)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        finally:
            self._changed()
        fsync_dir(parent)

    @contextlib.contextmanager
    def open_atomic(self, logical: str, mode: int = 0o644) -> Iterator[IO[bytes]]:
        """A binary file that appears under `logical` whole, or not at all (temp+fsync+rename)."""
        with self._staged(logical) as tmp:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
            with os.fdopen(fd, "wb") as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())

    def write_bytes(self, logical: str, data: bytes, mode: int = 0o644) -> None:
        """Write a file atomically (temp file + fsync + rename)."""
        with self.open_atomic(logical, mode) as fh:
            fh.write(data)

    def open_resumable(self, logical: str, offset: int, mode: int = 0o644) -> int:
        """A write fd on `logical` (created, never through a symlink) cut to and at `offset`.

        For downloads that resume a `.part`; the caller closes it and `replace`s it into place.
        """
        path = self._target(logical)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        try:
            os.ftruncate(fd, offset)
            os.lseek(fd, offset, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        self._changed()
        return fd

    def replace(self, src: str, dest: str, *, fd: int | None = None) -> None:
        """Rename `src` over `dest` durably: fsync a file (via `fd` if open), then the dirs."""
        s, d = self._target(src), self._target(dest)
        if fd is not None:
            os.fsync(fd)
        elif os.path.isfile(s) and not os.path.islink(s):
            _fsync_file(s)
        os.replace(s, d)
        self._changed()
        fsync_dir(os.path.dirname(d))
        if os.path.dirname(s) != os.path.dirname(d):
            fsync_dir(os.path.dirname(s))

    def _copy(self, src: str, dest: str, *, metadata: bool, mode: int | None) -> None:
        with self._staged(dest) as tmp:
            (shutil.copy2 if metadata else shutil.copyfile)(src, tmp)
            if mode is not None:
                os.chmod(tmp, mode)
            _fsync_file(tmp)

    def copy_file(self, src_logical: str, dest_logical: str) -> None:
        """Copy a host file to another host path with metadata, atomically at the destination."""
        if self.live:
            src = "/" + src_logical.lstrip("/")
        else:
            resolved = self.resolve(src_logical)  # type: ignore[attr-defined]  # the read side
            if resolved is None:
                raise RefusedError(f"refusing to copy {src_logical}: it leads out of the root")
            src = resolved
        self._copy(src, dest_logical, metadata=True, mode=None)

    def copy_in(self, src: str | os.PathLike[str], dest_logical: str,
                mode: int | None = None) -> None:
        """Copy a file from this machine (a mirror, a built RPM) to a host path, atomically."""
        self._copy(os.fspath(src), dest_logical, metadata=False, mode=mode)

    def chmod(self, logical: str, mode: int) -> None:
        """Change a file's permission bits (never through a symlink)."""
        path = self._target(logical)
        if os.path.islink(path):
            raise RefusedError(f"refusing to chmod {logical}: it is a symlink")
        os.chmod(path, mode)

    # ---------------------------------------------------------------- directories and trees
    def makedirs(self, logical: str, mode: int = 0o755) -> Path:
        """Create a directory and its parents (existing is fine); returns its real path."""
        path = self._target(logical)
        if not os.path.isdir(path):
            os.makedirs(path, mode=mode, exist_ok=True)
            self._changed()
        return Path(path)

    def make_temp_dir(self, parent_logical: str, prefix: str) -> str:
        """A fresh private (0700) directory under `parent_logical`; returns its logical path."""
        real = tempfile.mkdtemp(prefix=prefix, dir=self.makedirs(parent_logical))
        self._changed()
        return f"{parent_logical.rstrip('/')}/{os.path.basename(real)}"

    def copy_tree(self, src: str | os.PathLike[str], dest_logical: str, *,
                  symlinks: bool = True) -> None:
        """Copy a directory tree from this machine to a new host path (links copied as links).

        Not atomic by itself: copy to a temp name and `replace` it into place for that.
        """
        target = self._target(dest_logical)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            shutil.copytree(src, target, symlinks=symlinks)
        finally:
            self._changed()

    def remove(self, logical: str) -> bool:
        """Remove a file; False when it was not there."""
        try:
            os.unlink(self._target(logical))
        except FileNotFoundError:
            return False
        finally:
            self._changed()
        return True

    def remove_tree(self, logical: str) -> bool:
        """Remove a directory tree (or file, or link: never followed); False when absent."""
        path = self._target(logical)
        try:
            if os.path.islink(path) or os.path.isfile(path):
                os.unlink(path)
                return True
            if not os.path.lexists(path):
                return False
            shutil.rmtree(path)
            return True
        finally:
            self._changed()

    def extract_tar(self, archive: str | os.PathLike[str], dest_logical: str,
                    select: Select) -> list[str]:
        """Extract members of a (checked) local archive into a host dir; returns their names.

        `select` maps each member to the TarInfo to extract (e.g. a tamed copy) or None to
        skip it; the caller checks the archive first, and the data filter applies where the
        Python has it.
        """
        dest = self._target(dest_logical)
        os.makedirs(dest, exist_ok=True)
        try:
            with tarfile.open(archive, "r:*") as tar:
                chosen = [t for m in tar.getmembers() if (t := select(m)) is not None]
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(dest, members=chosen, filter="data")
                else:
                    tar.extractall(dest, members=chosen)  # noqa: S202 - members are checked
        finally:
            self._changed()
        return sorted(t.name for t in chosen)

    # ---------------------------------------------------------------- journal and lock
    def journal_connect(self, logical: str, **kwargs: Any) -> sqlite3.Connection:
        """Open (creating) the SQLite journal at `logical`: the one sqlite3.connect in hwmgr."""
        conn: sqlite3.Connection = sqlite3.connect(self._target(logical), **kwargs)
        return conn

    def write_attr(self, logical: str, text: str) -> None:
        """Write a value into an existing kernel attribute (/proc/sys, /sys) in place: no temp
        file, no create, no link followed; OSError when the kernel refuses the value."""
        path = os.fspath(logical)
        if not path.startswith(("/proc/sys/", "/sys/")) or ".." in path.split("/"):
            raise RefusedError(f"refusing to write {path}: not a kernel attribute")
        real = path if self.live else self.resolve(path)  # type: ignore[attr-defined]
        if real is None:
            raise RefusedError(f"refusing to write {path}: it leaves the host root")
        fd = os.open(real, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    @staticmethod
    def journal_connect_readonly(real: str | os.PathLike[str], **kwargs: Any
                                 ) -> sqlite3.Connection:
        """Open an existing journal read-only (SQLite `mode=ro`): creates and changes nothing;
        `real` is a path the caller resolved inside the root (reads need no write licence)."""
        uri = f"{Path(real).absolute().as_uri()}?mode=ro"
        conn: sqlite3.Connection = sqlite3.connect(uri, uri=True, **kwargs)
        return conn

    def open_lock(self, logical: str, mode: int = 0o644) -> int:
        """A read-write fd on the lock file at `logical` (created), for flock."""
        fd = os.open(self._target(logical), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
                     | os.O_NOFOLLOW, mode)
        self._changed()
        return fd
