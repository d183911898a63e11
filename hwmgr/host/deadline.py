"""A download's total deadline, headers and redirects included.

requests' `timeout` bounds each socket read, so a server that drips one byte per read (in the
status line, the headers, a redirect hop or the body) holds a transfer forever. A session
`guard`ed here registers every socket its connections open; while a `Deadline` is armed, a
timer shuts them all down when it passes, and the blocked read returns at once. The caller
then sees a failed read and asks `Deadline.passed()` to say why in one line.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from hwmgr.errors import HwmgrError

if TYPE_CHECKING:  # requests is imported only when a download starts (annotations are strings)
    import requests
    import urllib3

MAX_REDIRECTS = 5  # hops a download follows; the whole chain counts against one deadline
_GUARDED: weakref.WeakKeyDictionary[requests.Session, Watchdog] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Deadline:
    """A transfer's whole time: `seconds` long, ending at `at` (`time.monotonic()`)."""

    seconds: float
    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(seconds, time.monotonic() + seconds)

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.at

    def words(self) -> str:
        """'the 2 s deadline' for a one-line error."""
        return f"the {self.seconds:g} s deadline"

    def exceeded(self, url: str, when: str, outcome: str) -> HwmgrError:
        """The one-line error of a download stopped by this deadline (exit 1); `outcome`
        says what the caller left behind ("nothing installed")."""
        return HwmgrError(f"download of {url} stopped: {self.words()} passed {when} (a "
                          f"server dripping bytes, or a slow redirect chain); {outcome}")


class Watchdog:
    """The live sockets of one session (by connection) and the timer that cuts them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}  # id(connection) -> its socket's file descriptor
        self._timer: threading.Timer | None = None

    def add(self, conn: object, fd: int) -> None:
        with self._lock:
            self._fds[id(conn)] = fd

    def remove(self, conn: object) -> None:
        # under the lock, so the timer never shuts down a descriptor reused after a close
        with self._lock:
            self._fds.pop(id(conn), None)

    def cut(self) -> None:
        """Shut down every registered socket: a read blocked on it returns at once."""
        with self._lock:
            for fd in self._fds.values():
                try:
                    sock = socket.socket(fileno=fd)
                except OSError:
                    continue
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                finally:
                    sock.detach()  # the connection still owns (and closes) the descriptor

    @contextlib.contextmanager
    def armed(self, deadline: Deadline) -> Iterator[None]:
        """Cut the sockets when `deadline` passes during the block."""
        timer = threading.Timer(deadline.left(), self.cut)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()


def guard(session: requests.Session) -> Watchdog:
    """Mount adapters on `session` whose connections register with one Watchdog (returned;
    the same one when the session was guarded before), and bound its redirects to
    MAX_REDIRECTS."""
    import requests.adapters  # only downloads need requests (see lifecycle/source/http.py)
    import urllib3.connection
    import urllib3.connectionpool

    known = _GUARDED.get(session)
    if known is not None:
        return known
    dog = _GUARDED[session] = Watchdog()

    # connection classes whose sockets `dog` knows from creation to close (the descriptor
    # stays the same when TLS wraps the socket, so a handshake is covered too)
    class Conn(urllib3.connection.HTTPConnection):
        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            dog.add(self, sock.fileno())
            return sock

        def close(self) -> None:
            dog.remove(self)
            super().close()

    class TLSConn(Conn, urllib3.connection.HTTPSConnection):  # Conn's super() is HTTPS's
        pass

    class Pool(urllib3.connectionpool.HTTPConnectionPool):
        ConnectionCls = Conn

    class TLSPool(urllib3.connectionpool.HTTPSConnectionPool):
        ConnectionCls = TLSConn

    classes = {"http": Pool, "https": TLSPool}

    class Adapter(requests.adapters.HTTPAdapter):
        def init_poolmanager(self, connections: int, maxsize: int, block: bool = False,
                             **pool_kwargs: object) -> None:
            super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
            self.poolmanager.pool_classes_by_scheme = classes

        def proxy_manager_for(self, proxy: str,
                              **proxy_kwargs: object) -> urllib3.PoolManager:
            manager: urllib3.PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
            manager.pool_classes_by_scheme = classes
            return manager

    for prefix in ("http://", "https://"):
        session.mount(prefix, Adapter())
    session.max_redirects = MAX_REDIRECTS
    return dog
