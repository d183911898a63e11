"""The host seam: `Host(root, runner)` is the only door to a machine's files and commands.

The same code reads the live host (`root=/`), a captured snapshot directory, or a fake tree
in tests. Under a non-`/` root, paths and symlinks are resolved *inside* the root (absolute
link targets are re-rooted, `..` never climbs out, loops end as "unknown"), so a hostile or
damaged snapshot cannot make hwmgr read the analysing machine's own files.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence, TypedDict

from hwmgr.host.links import Escape, disk_links, walk
from hwmgr.host.runner import DEFAULT_TIMEOUT, Result, Runner
from hwmgr.host.writes import LIVE_WRITABLE, Writes, fsync_dir

__all__ = ["Host", "Recorder", "fsync_dir"]

MAX_ATTR_BYTES = 1 << 20
# O_NONBLOCK: opening a FIFO for reading must not wait for a writer (it then reads empty)
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class SnapshotMeta(TypedDict, total=False):
    """A snapshot's `snapshot.json` (docs/formats.md), as `snapshot.load_meta` checked it;
    the live host's is empty. `records` is what the snapshot says, checked where it is read."""

    format: str
    version: int
    hostname: str | None
    kernel: str | None
    captured: str | None
    hwmgr: object
    records: object


@dataclass
class Recorder:
    """Remembers what was read through a Host, so a snapshot holds exactly that."""

    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: dict[str, list[str]] = field(default_factory=dict)


class Host(Writes):
    """A machine seen through a root path and a command runner.

    Logical paths are absolute host paths (`/sys/bus/pci/devices`). Readers never raise for
    missing, unreadable or garbled files: they return `None` (or an empty list) and callers
    report the fact as unknown. Writes (hwmgr/host/writes.py) are confined to the root, or on
    the live host to `LIVE_WRITABLE` plus `writable` (the run's state and cache dirs).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        runner: Runner,
        *,
        meta: SnapshotMeta | None = None,
        recorder: Recorder | None = None,
        writable: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        self.root = Path(root)
        self.runner = runner
        self.meta = meta or {}
        self.recorder = recorder
        self.live = os.path.realpath(self.root) == "/"
        self._real_root = os.path.realpath(self.root)
        self._dir_cache: dict[str, str | None] = {}
        # a static snapshot's directories, each listed once: real dir -> {name: DirEntry}; the
        # d_types serve its listdir, the reads in it and the path steps through it
        self._kinds: dict[str, dict[str, os.DirEntry[str]]] = {}
        self._writable: list[str] = list(LIVE_WRITABLE)
        self.allow_writes(*writable)

    def __repr__(self) -> str:
        return f"Host(root={str(self.root)!r}, runner={type(self.runner).__name__})"

    # ---------------------------------------------------------------- paths
    def path(self, logical: str) -> Path:
        """The real path of a logical path, unchecked: for tool argv and reads, never writes."""
        if self.live:
            return Path("/" + logical.lstrip("/"))
        return Path(self._real_root, logical.lstrip("/"))

    def resolve(self, logical: str) -> str | None:
        """Resolve a logical path to a real path inside the root; None if it escapes/loops."""
        if self.live:
            return "/" + logical.lstrip("/")
        logical = "/" + logical.strip("/")
        parent, _, leaf = logical.rpartition("/")
        base = self._resolve_dir(parent or "/")
        if base is None:
            return None
        if leaf in ("", "."):
            return base
        if leaf == "..":
            return self._resolve_chain(logical)
        cand = os.path.join(base, leaf)
        try:
            if self._is_link(base, leaf, cand):
                return self._resolve_chain(logical)
        except OSError:
            return None
        return cand

    def _listing(self, real_dir: str) -> dict[str, os.DirEntry[str]]:
        """A static snapshot's directory entries, from one scandir per directory per Host."""
        got = self._kinds.get(real_dir)
        if got is None:
            got = self._kinds[real_dir] = _entries(real_dir)
        return got

    def _is_link(self, base: str, leaf: str, cand: str) -> bool:
        """Whether `base/leaf` is a symlink: the parent's d_type in a snapshot, else lstat."""
        if self.meta and not self.live:
            entry = self._listing(base).get(leaf)
            return entry is not None and entry.is_symlink()
        return os.path.islink(cand)

    def _resolve_dir(self, logical_dir: str) -> str | None:
        """Resolve a directory incrementally: cached parent + one lstat for the last part."""
        hit = self._dir_cache.get(logical_dir, "")
        if hit != "":
            return hit
        parent, _, leaf = logical_dir.rstrip("/").rpartition("/")
        if not leaf:
            real: str | None = self._real_root
        else:
            base = self._resolve_dir(parent or "/")
            real = None if base is None else self._step(base, leaf)
        self._dir_cache[logical_dir] = real
        return real

    def _step(self, base: str, leaf: str) -> str | None:
        """One path component under an already-resolved real directory inside the root."""
        if leaf in ("", "."):
            return base
        if leaf == "..":
            return base if base == self._real_root else os.path.dirname(base)
        cand = f"{base}/{leaf}" if base != "/" else f"/{leaf}"
        try:
            if not self._is_link(base, leaf, cand):
                return cand
        except OSError:
            return None
        return self._resolve_chain(cand[len(self._real_root):])

    def _resolve_chain(self, logical: str) -> str | None:
        """Walk components under the root, following symlinks chroot-style."""
        try:
            done = walk(logical.split("/"), disk_links(self._real_root), reroot=True)
        except (Escape, OSError):
            return None
        return os.path.join(self._real_root, *done)

    # ---------------------------------------------------------------- readers
    def read_bytes(self, logical: str, limit: int = MAX_ATTR_BYTES) -> bytes | None:
        """Raw file content, or None when missing, unreadable, a directory or a bad link."""
        data = self._read_live(logical, limit) if self.live else self._read_rooted(logical, limit)
        if data is None:
            return None
        if self.recorder is not None:
            self.recorder.files[logical] = data
        return data

    @staticmethod
    def _read_fd(fd: int, limit: int) -> bytes:
        """Read up to `limit` bytes; sysfs attributes come back whole in the first read."""
        try:
            first = min(limit, 4096)  # a big first read would allocate a big buffer per call
            data = os.read(fd, first)
            if len(data) < first:
                return data
            chunks = [data]
            limit -= len(data)
            while limit > 0:
                chunk = os.read(fd, min(limit, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                limit -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def _read_live(self, logical: str, limit: int) -> bytes | None:
        """The live host: O_NONBLOCK so a FIFO cannot hang the open; regular files only."""
        try:
            fd = os.open("/" + logical.lstrip("/"), _READ_FLAGS)
        except OSError:
            return None
        return self._read_regular(fd, limit)

    def _read_regular(self, fd: int, limit: int) -> bytes | None:
        """Read (and close) `fd` if it is a regular file; None (closed) for anything else."""
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                return None
            return self._read_fd(fd, limit)
        except OSError:  # EISDIR, EAGAIN and friends
            return None

    @staticmethod
    def _open_rooted(real: str) -> int | None:
        """Open a real path under the root without following a link or opening a non-file.

        The type is checked (lstat) *before* the open: a hostile snapshot directory may hold
        FIFOs or device nodes (opening some devices has effects). ELOOP for a symlink.
        """
        st = os.lstat(real)
        if stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, "a symlink")
        if not stat.S_ISREG(st.st_mode):
            return None
        fd = os.open(real, _READ_FLAGS | os.O_NOFOLLOW)
        check = os.fstat(fd)
        if (check.st_ino, check.st_dev) != (st.st_ino, st.st_dev):  # swapped meanwhile
            os.close(fd)
            return None
        return fd

    def _open_attr(self, base: str, leaf: str) -> int | None:
        """read_attr's open: None for a non-file (never opened), ELOOP for a symlink."""
        if self.live:
            return os.open(f"{base}/{leaf}", _READ_FLAGS)  # fstat'ed by the caller
        if not self.meta:  # a root that may change under us (tests, writers): lstat each time
            return self._open_rooted(f"{base}/{leaf}")
        entry = self._listing(base).get(leaf)  # a snapshot is static: one scandir per dir
        if entry is None:
            return None  # missing
        if not entry.is_file(follow_symlinks=False):
            # a link (ELOOP: resolved the slow way), FIFO, device: never opened
            return self._open_rooted(f"{base}/{leaf}")
        return os.open(f"{base}/{leaf}", _READ_FLAGS | os.O_NOFOLLOW)

    def _read_rooted(self, logical: str, limit: int) -> bytes | None:
        """lstat + open the leaf without following a symlink; resolve links the slow way."""
        parent, _, leaf = ("/" + logical.strip("/")).rpartition("/")
        base = self._resolve_dir(parent or "/")
        if base is None:
            return None
        try:
            if leaf in ("", ".", ".."):
                raise OSError(errno.ELOOP, "resolve the slow way")
            fd = self._open_attr(base, leaf)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                return None
            real = self._resolve_chain(logical)
            if real is None:
                return None
            try:
                fd = self._open_rooted(real)
            except OSError:
                return None
        if fd is None:
            return None
        try:
            return self._read_fd(fd, limit)
        except OSError:
            return None

    def read_text(self, logical: str) -> str | None:
        """File content decoded as UTF-8 (bad bytes replaced), or None."""
        data = self.read_bytes(logical)
        return None if data is None else data.decode("utf-8", errors="replace")

    def read_attr(self, logical: str) -> str | None:
        """A sysfs-style one-value attribute, stripped; None when missing or empty.

        The hot path of an inventory (tens of thousands of calls on a big host), so the
        common case — a regular file in an already-resolved directory — is inlined.
        """
        data: bytes | None = None
        if self.recorder is None:
            parent, _, leaf = logical.rpartition("/")
            base = self._dir_cache.get(parent, "") if not self.live else parent
            if base and leaf not in ("", ".", ".."):
                try:
                    opened = self._open_attr(base, leaf)
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        data = self.read_bytes(logical)
                    else:
                        return None
                else:
                    if opened is None:
                        return None  # not a regular file: never opened
                    fd = opened
                    try:
                        if self.live and not stat.S_ISREG(os.fstat(fd).st_mode):
                            return None  # a FIFO or device: never read (could block)
                        data = os.read(fd, 4096)
                        if len(data) == 4096:
                            data += self._read_fd(os.dup(fd), MAX_ATTR_BYTES - 4096)
                    except OSError:
                        return None
                    finally:
                        os.close(fd)
            else:
                data = self.read_bytes(logical)
        else:
            data = self.read_bytes(logical)
        if data is None:
            return None
        text = data.decode("utf-8", errors="replace").strip().replace("\x00", "")
        return text or None

    def read_attrs(self, logical_dir: str, names: Sequence[str]) -> dict[str, str | None]:
        """`read_attr` of several attributes of one directory, resolved once (the inventory's
        hot path: a PCI function's or a netdev's attributes). Same answers, same safety:
        links, FIFOs and devices take `read_attr`'s careful path; nothing else is opened."""
        if self.recorder is not None or not (self.live or self.meta):
            return {n: self.read_attr(f"{logical_dir}/{n}") for n in names}
        base = logical_dir if self.live else self._resolve_dir(logical_dir)
        out: dict[str, str | None] = dict.fromkeys(names)
        if base is None:
            return out
        kinds = None if self.live else self._listing(base)
        for name in names:
            if not name or "/" in name or name in (".", ".."):
                out[name] = self.read_attr(f"{logical_dir}/{name}")
                continue
            if kinds is not None:
                entry = kinds.get(name)
                if entry is None:
                    continue  # missing: stays None
                if not entry.is_file(follow_symlinks=False):  # link, FIFO, device: careful path
                    out[name] = self.read_attr(f"{logical_dir}/{name}")
                    continue
            try:
                fd = os.open(f"{base}/{name}", _READ_FLAGS | os.O_NOFOLLOW)
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # live: a link
                    out[name] = self.read_attr(f"{logical_dir}/{name}")
                continue
            try:
                if kinds is None and not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue  # live FIFO or device: never read (could block)
                data = os.read(fd, 4096)
                if len(data) == 4096:
                    data += self._read_fd(os.dup(fd), MAX_ATTR_BYTES - 4096)
            except OSError:
                continue
            finally:
                os.close(fd)
            text = data.decode("utf-8", errors="replace").strip().replace("\x00", "")
            out[name] = text or None
        return out

    def listdir(self, logical: str,
                pattern: re.Pattern[str] | Callable[[str], bool] | None = None) -> list[str]:
        """Sorted directory entries (only those `pattern` fully matches or accepts, if given).

        [] when missing or not a directory. The recorder keeps the filtered listing, so a
        snapshot holds exactly the names the tool looked at.
        """
        real = self.resolve(logical)
        if real is None:
            return []
        if self.meta and not self.live:  # a static snapshot: keep the types read_attr needs
            names = sorted(self._listing(real))
        else:
            try:
                names = sorted(os.listdir(real))
            except OSError:
                return []
        if isinstance(pattern, re.Pattern):
            names = [n for n in names if pattern.fullmatch(n)]
        elif pattern is not None:
            names = [n for n in names if pattern(n)]
        if self.recorder is not None:
            self.recorder.dirs[logical] = names
        return names

    def is_dir(self, logical: str) -> bool:
        real = self.resolve(logical)
        return real is not None and os.path.isdir(real)

    def exists(self, logical: str) -> bool:
        real = self.resolve(logical)
        return real is not None and os.path.exists(real)

    def readlink(self, logical: str) -> str | None:
        """The target text of a symlink (not followed), or None."""
        parent, _, leaf = ("/" + logical.strip("/")).rpartition("/")
        base = self._resolve_dir(parent or "/") if not self.live else (parent or "/")
        if base is None:
            return None
        try:
            target = os.readlink(os.path.join(base, leaf))
        except OSError:
            return None
        if self.recorder is not None:
            self.recorder.links[logical] = target
        return target

    # ---------------------------------------------------------------- commands
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        input: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Result:
        """Run a command through this host's runner (rc 127 when it is not available)."""
        return self.runner.run(argv, timeout=timeout, input=input, env=env, cwd=cwd)

    def free_bytes(self, logical: str) -> int | None:
        """Free space for unprivileged writes on the filesystem holding `logical`."""
        p = self.path(logical)
        while not p.exists() and p != p.parent:
            p = p.parent
        try:
            st = os.statvfs(p)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize


def _entries(real_dir: str) -> dict[str, os.DirEntry[str]]:
    """{name: DirEntry} from one scandir; its is_file/is_symlink answer from the d_type
    (no stat per entry), asked only for the entries a caller touches."""
    try:
        with os.scandir(real_dir) as it:
            return {e.name: e for e in it}
    except OSError:
        return {}
