"""Tests for hwmgr.lifecycle.source.fetch against real HTTP(S) servers on 127.0.0.1 (no mocked
requests).

The scriptable server below can cut, stall, redirect, lie about lengths and ignore Range, and
logs every request so a test can prove what did (or did not) touch the network.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

import pytest
import requests

from hwmgr.errors import (
    BadInputError,
    HwmgrError,
    LockedError,
    NotFoundError,
    RefusedError,
)
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.source.cache import CHUNK
from hwmgr.lifecycle.source.fetch import FetchResult, Source, cache_path
from hwmgr.lifecycle.source.fetch import fetch as fetch_through

pytestmark = pytest.mark.timeout(60)

PAYLOAD = os.urandom(3 * CHUNK + 12345)  # several chunks, not a multiple of the chunk size
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()
NAME = "be2net-10.2.470.14-1.src.rpm"
FAST = {"timeout": 1.0, "retries": 2, "backoff": 0.01}

Handler = Callable[[BaseHTTPRequestHandler, int], None]


def fetch(source: Source, cache_dir: Path, **kw: object) -> FetchResult:
    """fetch() into a directory of this machine, through a live Host allowed to write there."""
    host = Host("/", SubprocessRunner(), writable=[cache_dir])
    return fetch_through(host, source, str(cache_dir), **kw)  # type: ignore[arg-type]


class Server:
    """A threaded HTTP/1.1 server on 127.0.0.1 with per-path handlers and a request log."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Handler] = {}
        self.log: list[tuple[str, str | None]] = []
        self.release = threading.Event()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                outer.log.append((self.path, self.headers.get("Range")))
                hit = sum(1 for p, _ in outer.log if p == self.path)
                route = outer.routes.get(self.path)
                if route is None:
                    self.send_error(404)
                    return
                route(self, hit)

        class _S(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                outer.errors.append(sys.exc_info()[1])  # e.g. the client hung up: keep quiet

        self.errors: list[BaseException | None] = []
        self.httpd = _S(("127.0.0.1", 0), _H)
        self.scheme = "http"
        if ssl_context is not None:
            self.httpd.socket = ssl_context.wrap_socket(self.httpd.socket, server_side=True)
            self.scheme = "https"
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def url(self, path: str) -> str:
        """Absolute URL of `path` on this server."""
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def hits(self, path: str) -> int:
        """How many requests reached `path`."""
        return sum(1 for p, _ in self.log if p == path)

    def close(self) -> None:
        """Release stalled handlers and stop serving."""
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def body(
    data: bytes = PAYLOAD,
    *,
    range_ok: bool = True,
    length: int | None = None,
    close_delimited: bool = False,
    cut_at: int | None = None,
    cut_hits: tuple[int, ...] = (),
) -> Handler:
    """A handler serving `data`; it can honour Range, lie about length, or cut the body."""

    def handle(req: BaseHTTPRequestHandler, hit: int) -> None:
        start, status = 0, 200
        found = re.match(r"bytes=(\d+)-$", req.headers.get("Range") or "")
        if range_ok and found and int(found.group(1)) < len(data):
            start, status = int(found.group(1)), 206
        payload = data[start:]
        req.send_response(status)
        if status == 206:
            req.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        if close_delimited:
            req.send_header("Connection", "close")
            req.close_connection = True
        else:
            req.send_header("Content-Length", str(len(payload) if length is None else length))
        req.end_headers()
        if cut_at is not None and (not cut_hits or hit in cut_hits):
            req.wfile.write(payload[: max(0, cut_at - start)])
            req.wfile.flush()
            req.connection.shutdown(socket.SHUT_RDWR)
            req.close_connection = True
            return
        req.wfile.write(payload)

    return handle


def status(code: int, then: Handler | None = None, times: int = 1) -> Handler:
    """A handler answering HTTP `code` for the first `times` hits, then delegating."""

    def handle(req: BaseHTTPRequestHandler, hit: int) -> None:
        if then is not None and hit > times:
            then(req, hit)
            return
        req.send_response(code)
        req.send_header("Content-Length", "0")
        req.end_headers()

    return handle


def redirect(location: str, code: int = 302) -> Handler:
    """A handler redirecting to `location`."""

    def handle(req: BaseHTTPRequestHandler, hit: int) -> None:
        req.send_response(code)
        req.send_header("Location", location)
        req.send_header("Content-Length", "0")
        req.end_headers()

    return handle


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made with the real openssl."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    argv = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
    argv += " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"
    res = SubprocessRunner().run([*argv.split(), "-keyout", str(key), "-out", str(cert)])
    if not res.available:
        pytest.skip("openssl is not installed")
    assert res.ok, res.describe()
    return cert, key


@pytest.fixture
def tls_server(tls_files: tuple[Path, Path]) -> Iterator[Server]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tls_files[0]), str(tls_files[1]))
    srv = Server(ctx)
    yield srv
    srv.close()


@pytest.fixture
def tls_session(tls_files: tuple[Path, Path]) -> Iterator[requests.Session]:
    sess = requests.Session()
    sess.verify = str(tls_files[0])
    yield sess
    sess.close()


def src(url: str, *, sha: str = DIGEST, size: int = len(PAYLOAD), http: bool = True) -> Source:
    return Source(url=url, sha256=sha, size=size, allow_http=http, filename=NAME)


def final_of(cache: Path, sha: str = DIGEST) -> Path:
    return cache_path(cache, sha, NAME)


def assert_nothing_final(cache: Path, sha: str = DIGEST) -> None:
    """No file may exist under the final cache name after a failure."""
    assert not final_of(cache, sha).exists()


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    msg = str(exc.value)
    assert msg and "\n" not in msg
    return msg


# ------------------------------------------------------------------ happy paths
def test_ok_download_streams_to_part_then_renames(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    final = final_of(tmp_path)
    seen: list[tuple[int, int, bool, bool]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total, final.exists(), final.with_name(NAME + ".part").exists()))

    res = fetch(src(server.url("/f")), tmp_path, progress=progress, **FAST)
    assert isinstance(res, FetchResult)
    assert res.path == final == tmp_path / "sha256" / DIGEST / NAME
    assert final.read_bytes() == PAYLOAD
    assert (res.sha256, res.size, res.from_cache) == (DIGEST, len(PAYLOAD), False)
    assert res.origin == "network"
    assert res.url == server.url("/f") and res.attempts == 1 and res.seconds > 0
    assert seen[0][0] == 0 and seen[-1][:2] == (len(PAYLOAD), len(PAYLOAD))
    assert [d for d, *_ in seen] == sorted(d for d, *_ in seen)
    assert not any(exists for _, _, exists, _ in seen)  # never visible under the final name
    assert all(part for *_, part in seen[1:])
    assert sorted(os.listdir(final.parent)) == [NAME]  # the .part was renamed away
    assert server.log == [("/f", None)]


def test_cache_hit_does_not_touch_network(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    fetch(src(server.url("/f")), tmp_path, **FAST)
    assert server.hits("/f") == 1
    res = fetch(src(server.url("/f")), tmp_path, **FAST)
    assert res.from_cache and res.origin == "cache" and res.url is None
    assert server.hits("/f") == 1  # the server log proves no request was made
    assert res.path.read_bytes() == PAYLOAD


def test_corrupt_cache_entry_is_replaced(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    final = final_of(tmp_path)
    final.parent.mkdir(parents=True)
    final.write_bytes(b"X" * len(PAYLOAD))  # right size, wrong content
    res = fetch(src(server.url("/f")), tmp_path, **FAST)
    assert not res.from_cache and final.read_bytes() == PAYLOAD
    assert server.hits("/f") == 1


def test_symlink_in_cache_is_not_trusted(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(PAYLOAD)
    final = final_of(tmp_path / "c")
    final.parent.mkdir(parents=True)
    final.symlink_to(elsewhere)
    res = fetch(src(server.url("/f")), tmp_path / "c", **FAST)
    assert not final.is_symlink() and res.path.read_bytes() == PAYLOAD
    assert server.hits("/f") == 1


def test_complete_part_left_by_a_crash_is_finished_offline(server: Server, tmp_path: Path) -> None:
    part = final_of(tmp_path).with_name(NAME + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(PAYLOAD)  # fully written, crashed before the rename
    res = fetch(src(server.url("/f")), tmp_path, **FAST)
    assert res.path.read_bytes() == PAYLOAD and not part.exists()
    assert server.log == []


def test_500_then_success_is_retried_and_counted(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = status(500, then=body())
    res = fetch(src(server.url("/f")), tmp_path, **FAST)
    assert res.attempts == 2 and server.hits("/f") == 2
    assert res.path.read_bytes() == PAYLOAD


def test_redirect_same_scheme_is_followed(server: Server, tmp_path: Path) -> None:
    server.routes["/a"] = redirect("/b", 301)
    server.routes["/b"] = redirect(server.url("/f"), 307)
    server.routes["/f"] = body()
    res = fetch(src(server.url("/a")), tmp_path, **FAST)
    assert res.url == server.url("/f") and res.path.read_bytes() == PAYLOAD
    assert [p for p, _ in server.log] == ["/a", "/b", "/f"]


def test_redirect_https_to_https_is_followed(
    tls_server: Server, tls_session: requests.Session, tmp_path: Path
) -> None:
    tls_server.routes["/a"] = redirect("/f")
    tls_server.routes["/f"] = body()
    res = fetch(src(tls_server.url("/a"), http=False), tmp_path, session=tls_session, **FAST)
    assert res.url == tls_server.url("/f") and res.path.read_bytes() == PAYLOAD


def test_resume_after_cut_sends_range_and_appends(server: Server, tmp_path: Path) -> None:
    cut = CHUNK + 4321
    server.routes["/f"] = body(cut_at=cut, cut_hits=(1,))
    res = fetch(src(server.url("/f")), tmp_path, **FAST)
    assert res.path.read_bytes() == PAYLOAD and res.attempts == 2
    assert server.log == [("/f", None), ("/f", f"bytes={cut}-")]


def test_resume_when_server_ignores_range_restarts(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body(range_ok=False, cut_at=2 * CHUNK, cut_hits=(1,))
    res = fetch(src(server.url("/f")), tmp_path, **FAST)
    assert res.path.read_bytes() == PAYLOAD and res.attempts == 2
    assert server.log[1] == ("/f", f"bytes={2 * CHUNK}-")  # asked, got 200, started over


def test_truncated_run_keeps_part_and_next_run_resumes(server: Server, tmp_path: Path) -> None:
    cut = 2 * CHUNK + 7
    server.routes["/f"] = body(cut_at=cut, cut_hits=(1,))
    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/f")), tmp_path, timeout=1.0, retries=0, backoff=0)
    assert "truncated" in one_line(exc) and server.url("/f") in str(exc.value)
    assert_nothing_final(tmp_path)
    part = final_of(tmp_path).with_name(NAME + ".part")
    assert part.stat().st_size == cut
    res = fetch(src(server.url("/f")), tmp_path, **FAST)  # a later run picks up the .part
    assert res.path.read_bytes() == PAYLOAD and not part.exists()
    assert server.log[-1] == ("/f", f"bytes={cut}-")


def test_stale_part_failing_checksum_restarts_from_zero(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    part = final_of(tmp_path).with_name(NAME + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(b"\0" * CHUNK)  # a leftover prefix from some other file
    res = fetch(src(server.url("/f")), tmp_path, **FAST)
    assert res.path.read_bytes() == PAYLOAD
    assert server.log == [("/f", f"bytes={CHUNK}-"), ("/f", None)]


def test_chunked_body_without_length(server: Server, tmp_path: Path) -> None:
    def chunked(req: BaseHTTPRequestHandler, hit: int) -> None:
        req.send_response(200)
        req.send_header("Transfer-Encoding", "chunked")
        req.end_headers()
        for i in range(0, len(PAYLOAD), 300_000):
            piece = PAYLOAD[i : i + 300_000]
            req.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        req.wfile.write(b"0\r\n\r\n")

    server.routes["/f"] = chunked
    res = fetch(src(server.url("/f")), tmp_path, **FAST)
    assert res.path.read_bytes() == PAYLOAD


def test_redirect_http_to_https_upgrade_is_followed(
    server: Server, tls_server: Server, tls_session: requests.Session, tmp_path: Path
) -> None:
    tls_server.routes["/f"] = body()
    server.routes["/a"] = redirect(tls_server.url("/f"))
    res = fetch(src(server.url("/a")), tmp_path, session=tls_session, **FAST)
    assert res.url == tls_server.url("/f") and res.path.read_bytes() == PAYLOAD


def test_offline_with_mirror_copies_and_verifies(server: Server, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / NAME).write_bytes(PAYLOAD)
    res = fetch(src(server.url("/f")), tmp_path / "cache", offline=True, mirror=mirror)
    assert res.origin == "mirror" and not res.from_cache
    assert res.path == final_of(tmp_path / "cache") and res.path.read_bytes() == PAYLOAD
    assert server.log == []


# ------------------------------------------------------------------ failures
def test_wrong_checksum_is_refused_and_deleted(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    bad = hashlib.sha256(b"something else").hexdigest()
    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/f"), sha=bad), tmp_path, **FAST)
    msg = one_line(exc)
    assert "checksum" in msg and DIGEST in msg and bad in msg
    assert_nothing_final(tmp_path, bad)
    assert os.listdir(final_of(tmp_path, bad).parent) == []  # .part deleted too
    assert server.hits("/f") == 1  # a checksum failure is not retried


def test_truncated_content_length_is_refused(server: Server, tmp_path: Path) -> None:
    short = PAYLOAD[:-1000]
    server.routes["/f"] = body(short)
    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/f")), tmp_path, **FAST)
    assert "truncated" in one_line(exc) and str(len(short)) in str(exc.value)
    assert_nothing_final(tmp_path)
    assert server.hits("/f") == 1


def test_connection_closed_early_every_time_is_refused(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body(close_delimited=True, range_ok=False, cut_at=CHUNK)
    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/f")), tmp_path, **FAST)
    assert "truncated" in one_line(exc) and f"{CHUNK} of {len(PAYLOAD)}" in str(exc.value)
    assert_nothing_final(tmp_path)
    assert server.hits("/f") == FAST["retries"] + 1


def test_404_fails_at_once(server: Server, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as exc:
        fetch(src(server.url("/missing")), tmp_path, **FAST)
    msg = one_line(exc)
    assert server.url("/missing") in msg and "404" in msg
    assert server.hits("/missing") == 1
    assert_nothing_final(tmp_path)


def test_403_fails_at_once_not_as_not_found(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = status(403, times=99)
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url("/f")), tmp_path, **FAST)
    assert not isinstance(exc.value, NotFoundError) and "403" in one_line(exc)
    assert server.hits("/f") == 1
    assert_nothing_final(tmp_path)


def test_persistent_500_gives_up_after_retries(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = status(503, times=99)
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url("/f")), tmp_path, **FAST)
    assert "after 3 attempts" in one_line(exc) and "503" in str(exc.value)
    assert server.hits("/f") == 3
    assert_nothing_final(tmp_path)


def test_stalled_connection_times_out_in_bounded_time(server: Server, tmp_path: Path) -> None:
    def stall(req: BaseHTTPRequestHandler, hit: int) -> None:
        req.send_response(200)
        req.send_header("Content-Length", str(len(PAYLOAD)))
        req.end_headers()
        req.wfile.write(PAYLOAD[:1000])
        server.release.wait(30)

    server.routes["/f"] = stall
    t0 = time.monotonic()
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url("/f")), tmp_path, timeout=0.3, retries=2, backoff=0.05)
    elapsed = time.monotonic() - t0
    assert elapsed < 10, elapsed
    assert "stalled" in one_line(exc) and "after 3 attempts" in str(exc.value)
    assert server.hits("/f") == 3
    assert_nothing_final(tmp_path)


def test_no_answer_at_all_times_out(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = lambda req, hit: server.release.wait(30)  # accepts, sends nothing
    t0 = time.monotonic()
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url("/f")), tmp_path, timeout=0.3, retries=1, backoff=0.05)
    assert time.monotonic() - t0 < 10
    assert f"timed out after 0.3 s waiting for 127.0.0.1:{server.port}" in one_line(exc)
    assert_nothing_final(tmp_path)


def test_connection_refused_is_retried_then_fails(tmp_path: Path) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(HwmgrError) as exc:
        fetch(src(f"http://127.0.0.1:{port}/f"), tmp_path, **FAST)
    assert "refused" in one_line(exc).lower()
    assert_nothing_final(tmp_path)


def test_redirect_https_to_http_is_refused(
    tls_server: Server, server: Server, tls_session: requests.Session, tmp_path: Path
) -> None:
    server.routes["/f"] = body()
    tls_server.routes["/a"] = redirect(server.url("/f"))
    # even a catalog entry that allows http may not be downgraded by a redirect
    with pytest.raises(RefusedError) as exc:
        fetch(src(tls_server.url("/a"), http=True), tmp_path, session=tls_session, **FAST)
    assert "https -> http" in one_line(exc)
    assert server.log == [] and tls_server.hits("/a") == 1
    assert_nothing_final(tmp_path)


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/f"])
def test_redirect_to_other_scheme_is_refused(server: Server, tmp_path: Path, target: str) -> None:
    server.routes["/a"] = redirect(target)
    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/a")), tmp_path, **FAST)
    assert target in one_line(exc)
    assert_nothing_final(tmp_path)


def test_too_many_redirects_are_refused(server: Server, tmp_path: Path) -> None:
    server.routes["/a"] = redirect("/a")
    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/a")), tmp_path, **FAST)
    assert "redirects" in one_line(exc)
    assert server.hits("/a") == 6  # the original request plus at most 5 hops
    assert_nothing_final(tmp_path)


def test_plain_http_needs_allow_http(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/f"), http=False), tmp_path, **FAST)
    assert "allow_http" in one_line(exc)
    assert server.log == []
    assert_nothing_final(tmp_path)


def test_oversized_body_is_refused_without_writing_more(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body(PAYLOAD + os.urandom(3 * CHUNK), close_delimited=True)
    peak = [0]

    def progress(done: int, total: int) -> None:
        peak[0] = max(peak[0], done)
        part = final_of(tmp_path).with_name(NAME + ".part")
        assert not part.exists() or part.stat().st_size <= len(PAYLOAD)

    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/f")), tmp_path, progress=progress, **FAST)
    assert "oversized" in one_line(exc)
    assert peak[0] <= len(PAYLOAD)
    assert_nothing_final(tmp_path)
    assert os.listdir(final_of(tmp_path).parent) == []


def test_announced_oversized_body_is_refused_before_reading(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body(PAYLOAD + b"extra")
    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/f")), tmp_path, **FAST)
    assert "oversized" in one_line(exc) and str(len(PAYLOAD) + 5) in str(exc.value)
    assert_nothing_final(tmp_path)


def test_offline_miss_is_not_found(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    with pytest.raises(NotFoundError) as exc:
        fetch(src(server.url("/f")), tmp_path, offline=True, mirror=tmp_path / "empty")
    msg = one_line(exc)
    assert "offline" in msg and NAME in msg and "mirror" in msg
    assert server.log == []
    assert not (tmp_path / "sha256").exists()  # an offline miss creates nothing at all


def test_offline_mirror_with_wrong_file_is_refused(server: Server, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / NAME).write_bytes(PAYLOAD[::-1])  # same size, wrong content
    with pytest.raises(RefusedError) as exc:
        fetch(src(server.url("/f")), tmp_path / "c", offline=True, mirror=mirror)
    assert str(mirror / NAME) in one_line(exc)
    assert_nothing_final(tmp_path / "c")
    assert os.listdir(final_of(tmp_path / "c").parent) == []


def test_online_bad_mirror_falls_back_to_network(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / NAME).write_bytes(b"short")
    res = fetch(src(server.url("/f")), tmp_path / "c", mirror=mirror, **FAST)
    assert res.origin == "network" and res.path.read_bytes() == PAYLOAD


def test_concurrent_download_of_same_file_is_locked(server: Server, tmp_path: Path) -> None:
    server.routes["/f"] = body()
    directory = final_of(tmp_path).parent
    directory.mkdir(parents=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(LockedError) as exc:
            fetch(src(server.url("/f")), tmp_path, **FAST)
        assert NAME in one_line(exc)
    finally:
        os.close(fd)
    assert server.log == []
    assert_nothing_final(tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sha256": "abc"}, "sha256"),
        ({"size": 0}, "size"),
        ({"size": True}, "size"),
        ({"url": "ftp://example.com/x.rpm"}, "url"),
        ({"url": "https://example.com/"}, "filename"),
        ({"filename": "../../etc/x"}, "filename"),
    ],
)
def test_bad_source_is_bad_input(tmp_path: Path, kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = {"url": "https://example.com/x.rpm", "sha256": DIGEST, "size": 10}
    base.update(kwargs)
    with pytest.raises(BadInputError) as exc:
        fetch(Source(**base), tmp_path)  # type: ignore[arg-type]
    assert field in one_line(exc)
    assert not (tmp_path / "sha256").exists()


def test_source_from_catalog_and_cache_path() -> None:
    url = "https://vendor.example/p/be2net-1.src.rpm"
    entry = {"type": "srpm", "url": url, "sha256": DIGEST.upper(), "size": 5, "signing_key": "K"}
    s = Source.from_catalog(entry)
    assert s.name() == "be2net-1.src.rpm" and not s.allow_http
    assert cache_path(Path("/c"), DIGEST.upper(), "a.rpm") == Path(f"/c/sha256/{DIGEST}/a.rpm")
    with pytest.raises(BadInputError, match=r"source\.size"):
        Source.from_catalog({**entry, "size": "5"})
    with pytest.raises(BadInputError, match=r"source\.sha256: missing"):
        Source.from_catalog({"url": entry["url"], "size": 5})


def test_import_is_lazy_about_requests() -> None:
    code = "import sys, hwmgr.lifecycle.source.fetch; print('requests' in sys.modules)"
    res = SubprocessRunner().run([sys.executable, "-c", code])
    assert res.ok, res.describe()
    assert res.stdout.strip() == "False"
