"""The host lock: one hwmgr at a time changes drivers or settings (flock on the state dir).

The lock file also says who holds it (pid, command, since) so a refusal can name them.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Optional, Protocol

from hwmgr.errors import LockedError, NotPermittedError
from hwmgr.host.seam import Host
from hwmgr.transaction.journal import utcnow

LOCK_POLL_SECONDS = 0.05


class LockOwner(Protocol):
    """What a lock needs of its state dir (StateDir provides it; no import back up)."""

    host: Host
    path: str
    _lock: Optional[Lock]

    @property
    def real(self) -> Path: ...

    @property
    def lock_file(self) -> Path: ...

    def ensure(self) -> None: ...


class Lock:
    """One lock per host: flock on <state>/lock, holder info (pid, command, since) inside.

    The kernel drops a flock when its process dies, so a crashed holder never blocks anyone.
    """

    def __init__(self, state: LockOwner, command: str, wait: bool | float = False) -> None:
        self.state = state
        self.command = command
        self.wait = wait
        self._fd: int | None = None
        self._reentered = False

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def holder(self) -> dict[str, object]:
        """Who wrote the lock file last ({} when empty or unreadable)."""
        try:
            info = json.loads(self.state.lock_file.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def acquire(self) -> None:
        """Take the lock, polling up to `wait` seconds; LockedError names the holder."""
        if self.state._lock is not None:
            self._reentered = True
            return
        self.state.ensure()
        try:
            fd = self.state.host.open_lock(f"{self.state.path}/lock")
        except PermissionError:
            raise NotPermittedError(
                f"cannot open lock {self.state.lock_file}: permission denied (run as root)"
            ) from None
        start = time.monotonic()
        try:
            while True:
                try:
                    flags = fcntl.LOCK_EX if self.wait is True else fcntl.LOCK_EX | fcntl.LOCK_NB
                    fcntl.flock(fd, flags)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    waited = time.monotonic() - start
                    if self.wait is False or waited >= float(self.wait):
                        raise LockedError(self._busy_message(waited)) from None
                    time.sleep(LOCK_POLL_SECONDS)
            info = {"pid": os.getpid(), "command": self.command, "since": utcnow()}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.state._lock = self

    def _busy_message(self, waited: float) -> str:
        info = self.holder()
        cmd = str(info.get("command") or "?")
        cmd = cmd if cmd.startswith("hwmgr") else f"hwmgr {cmd}"
        who = f"pid {info.get('pid', '?')} ({cmd}) since {info.get('since', '?')}"
        tail = f" (waited {waited:.1f}s)" if self.wait not in (False, 0) else ""
        return f"state dir {self.state.real} locked by {who}{tail}"

    def release(self) -> None:
        if self._reentered:
            self._reentered = False
            return
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None
            self.state._lock = None
