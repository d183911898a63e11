"""Hostile HTTP servers (issue 25 §2, §3): a body dripped within every per-read timeout is
stopped at the download's total deadline, and headers holding non-ASCII digits (which
`int()` and `str.isdigit()` accept) are read as absent, never as a number or a crash."""

from __future__ import annotations

import os
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Iterator

import pytest
from test_fetch import DIGEST, NAME, PAYLOAD, Server, body, fetch, src

from hwmgr.errors import HwmgrError
from hwmgr.lifecycle.source import http
from hwmgr.lifecycle.source.fetch import cache_path

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


def drip(every: float) -> object:
    """Headers at once, then the body one byte per `every` seconds (each read is on time)."""

    def handle(req: BaseHTTPRequestHandler, hit: int) -> None:
        req.send_response(200)
        req.send_header("Content-Length", str(len(PAYLOAD)))
        req.end_headers()
        for i in range(len(PAYLOAD)):
            req.wfile.write(PAYLOAD[i:i + 1])
            req.wfile.flush()
            time.sleep(every)

    return handle


def test_dripping_server_is_stopped_at_the_total_deadline(
        server: Server, tmp_path: Path) -> None:
    # a 0.6 s deadline; every byte arrives within the 1 s per-read timeout
    server.routes["/d"] = drip(0.05)  # type: ignore[assignment]
    started = time.monotonic()
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url("/d")), tmp_path, timeout=1.0, retries=0, backoff=0.01,
              deadline=0.6)
    took = time.monotonic() - started
    line = str(exc.value)
    assert "too slow" in line and "deadline" in line and "\n" not in line
    assert took < 20, took  # a guard against a hang, not a timing assertion
    assert (next(tmp_path.rglob("*.part"))).stat().st_size > 0  # kept for a resume


def test_deadline_grows_with_the_size() -> None:
    small, big = http.deadline_for(1, 30.0), http.deadline_for(10 * 1024 ** 3, 30.0)
    assert small.seconds == http.MIN_DEADLINE + 30.0
    assert big.seconds == 30.0 + 10 * 1024 ** 3 / http.MIN_RATE


@pytest.mark.parametrize("value", ["\u0663", "\u00b2", "1e3", "-5", "9" * 400, " ", "\u0661\u0662"])
def test_retry_after_with_non_ascii_digits_is_ignored(
        server: Server, tmp_path: Path, value: str) -> None:
    def busy(req: BaseHTTPRequestHandler, hit: int) -> None:
        if hit > 1:
            body()(req, hit)
            return
        req.send_response(503)
        req.send_header("Retry-After", value)
        req.send_header("Content-Length", "0")
        req.end_headers()

    server.routes["/r"] = busy
    res = fetch(src(server.url("/r")), tmp_path, timeout=2.0, retries=2, backoff=0.01)
    assert res.attempts == 2 and res.path.read_bytes() == PAYLOAD


@pytest.mark.parametrize("value", ["\u0661\u0662", "\u00b2", "9" * 400, "0x10"])
def test_content_length_with_non_ascii_digits_is_treated_as_absent(
        server: Server, tmp_path: Path, value: str) -> None:
    def odd(req: BaseHTTPRequestHandler, hit: int) -> None:
        req.send_response(200)
        req.send_header("Content-Length", value)
        req.send_header("Connection", "close")
        req.close_connection = True
        req.end_headers()
        req.wfile.write(PAYLOAD)

    server.routes["/c"] = odd
    try:
        res = fetch(src(server.url("/c")), tmp_path, timeout=2.0, retries=0, backoff=0.01)
    except HwmgrError as exc:  # urllib3 may refuse the header itself: one line, not a crash
        assert "\n" not in str(exc)
    else:
        assert res.path.read_bytes() == PAYLOAD


def test_header_numbers_are_ascii_only() -> None:
    assert http._ascii_int("12", 19) == 12
    for bad in ("\u0661\u0662", "\u00b2", "", "1" * 20, "+1", "1.0", None):
        assert http._ascii_int(bad, 19) is None


@pytest.mark.parametrize("target", ["outside", "dir", "loop", "fifo"])
def test_partial_download_that_is_not_a_file_is_replaced(
        server: Server, tmp_path: Path, target: str) -> None:
    """A `.part` that is a symlink (out of the cache, to a dir, a loop) or a FIFO is never
    followed, read or appended to: the download starts afresh or is refused in one line."""
    cache = tmp_path / "cache"
    outside = tmp_path / "outside"
    outside.write_bytes(PAYLOAD[:1000])
    part = Path(str(cache_path(cache, DIGEST, NAME)) + ".part")
    part.parent.mkdir(parents=True)
    if target == "outside":
        part.symlink_to(outside)
    elif target == "dir":
        part.symlink_to(tmp_path)
    elif target == "loop":
        part.symlink_to(part)
    else:
        os.mkfifo(part)
    server.routes["/" + NAME] = body()
    try:
        res = fetch(src(server.url("/" + NAME)), cache, timeout=2.0, retries=0, backoff=0.01)
    except HwmgrError as exc:
        assert "\n" not in str(exc)
    else:
        assert res.path.read_bytes() == PAYLOAD and not res.path.is_symlink()
    assert outside.read_bytes() == PAYLOAD[:1000]  # never appended to


# --------------------------------------------------------------- the total deadline (§2)
DRIP = 0.05  # seconds between two bytes: far inside every per-read timeout below
TOTAL = 0.4  # seconds: the whole transfer's deadline in these tests


def drip_headers(req: BaseHTTPRequestHandler, hit: int) -> None:
    """A status line and an endless header, one byte per DRIP (until the client hangs up)."""
    head = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 600
    for i in range(len(head)):
        try:
            req.wfile.write(head[i:i + 1])
            req.wfile.flush()
        except OSError:
            return
        time.sleep(DRIP)


def slow_redirects(req: BaseHTTPRequestHandler, hit: int) -> None:
    """Each hop answers on time (3 DRIPs) with a redirect to the next: a chain of five hops
    takes longer than TOTAL without one slow read."""
    time.sleep(3 * DRIP)
    hop = int(req.path.rsplit("/", 1)[-1]) + 1
    req.send_response(302)
    req.send_header("Location", f"/hop/{hop}")
    req.send_header("Content-Length", "0")
    req.end_headers()


def routes_for(server: Server) -> None:
    server.routes["/h"] = drip_headers
    for n in range(8):
        server.routes[f"/hop/{n}"] = slow_redirects
    server.routes["/d"] = drip(DRIP)  # type: ignore[assignment]


@pytest.mark.parametrize("path,when", [("/h", "before the headers arrived"),
                                       ("/hop/0", "before the headers arrived"),
                                       ("/d", "not done within")])
def test_total_deadline_covers_headers_redirects_and_body(
        server: Server, tmp_path: Path, path: str, when: str) -> None:
    """A server dripping its headers, a redirect chain slow hop by hop, or a dripping body:
    each is cut at the one total deadline, with one line naming the URL and the deadline,
    and no file under the cache's final name."""
    routes_for(server)
    started = time.monotonic()
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url(path)), tmp_path, timeout=1.0, retries=2, backoff=0.01,
              deadline=TOTAL)
    took = time.monotonic() - started
    line = str(exc.value)
    assert exc.value.exit_code == 1 and "\n" not in line, line
    assert server.url(path) in line and f"the {TOTAL:g} s deadline" in line, line
    assert when in line, line
    assert not cache_path(tmp_path, DIGEST, NAME).exists()
    assert took < 10 * TOTAL, took  # a guard against a hang, not a timing assertion


def test_a_redirect_chain_is_bounded(server: Server, tmp_path: Path) -> None:
    def fast(req: BaseHTTPRequestHandler, hit: int) -> None:
        req.send_response(302)
        req.send_header("Location", f"/hop/{int(req.path.rsplit('/', 1)[-1]) + 1}")
        req.send_header("Content-Length", "0")
        req.end_headers()

    for n in range(10):
        server.routes[f"/hop/{n}"] = fast
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url("/hop/0")), tmp_path, timeout=1.0, retries=0, backoff=0.01)
    assert f"more than {http.MAX_REDIRECTS} redirects" in str(exc.value)
    assert server.hits("/hop/6") == 0


def test_fetch_verb_names_the_url_and_deadline(
        server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the CLI: exit 1 (the fetch verb's documented "download failed"), one line on
    stderr, nothing in the cache."""
    from support import run_cli
    from support.lifecycle_env import MODULE, write_catalog

    from hwmgr.host.deadline import Deadline
    from hwmgr.lifecycle.source import fetch as fetch_mod

    routes_for(server)
    pkg = tmp_path / NAME
    pkg.write_bytes(PAYLOAD)
    catalog = write_catalog(tmp_path / "catalog.json", server.url("/hop"), {"1.0": pkg})
    doc = catalog.read_text().replace(f"/hop/{NAME}", "/h")
    catalog.write_text(doc)
    (tmp_path / "hwmgr.json").write_text("{}\n")
    monkeypatch.setattr(fetch_mod, "deadline_for", lambda size, timeout: Deadline.after(TOTAL))
    cache = tmp_path / "cache"
    res = run_cli("fetch", MODULE, "--to", "1.0", "--catalog", str(catalog),
                  env={"HWMGR_STATE_DIR": str(tmp_path / "state"), "HWMGR_CACHE_DIR": str(cache),
                       "HWMGR_SITE_CATALOG_DIR": str(tmp_path / "catalog.d"),
                       "HWMGR_CONFIG": str(tmp_path / "hwmgr.json")})
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("hwmgr fetch: ")]
    assert res.returncode == 1 and len(errors) == 1, res.stderr
    assert server.url("/h") in errors[0] and f"the {TOTAL:g} s deadline" in errors[0]
    assert not [p for p in cache.rglob("*") if p.is_file() and NAME in p.name]


def test_catalog_update_download_has_a_total_deadline(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    from hwmgr.catalog import update

    routes_for(server)
    monkeypatch.setattr(update, "DEADLINE", TOTAL)
    for path in ("/h", "/hop/0"):
        with pytest.raises(HwmgrError) as exc:
            update.download(server.url(path), 1 << 20, "catalog")
        line = str(exc.value)
        assert exc.value.exit_code == 1 and server.url(path) in line, line
        assert f"the {TOTAL:g} s deadline" in line and "\n" not in line, line


def test_a_dripping_mirror_is_skipped_at_its_deadline(
        server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`mirror sync` and every fetch try the site mirror first: one that drips its headers
    is given up at the deadline and the vendor's URL serves the file."""
    from hwmgr.host.deadline import Deadline
    from hwmgr.host.runner import SubprocessRunner
    from hwmgr.host.seam import Host
    from hwmgr.lifecycle.source import fetch as fetch_mod
    from hwmgr.lifecycle.source.mirror import fetch_mirrored

    monkeypatch.setattr(fetch_mod, "deadline_for", lambda size, timeout: Deadline.after(TOTAL))
    server.routes[f"/m/sha256/{DIGEST}/{NAME}"] = drip_headers
    server.routes[f"/m/{NAME}"] = drip_headers
    server.routes["/" + NAME] = body()
    host = Host("/", SubprocessRunner(), writable=[tmp_path])
    res = fetch_mirrored(host, src(server.url("/" + NAME)), str(tmp_path),
                         mirror=server.url("/m"))
    assert res.origin == "network" and res.path.read_bytes() == PAYLOAD
    assert server.hits(f"/m/sha256/{DIGEST}/{NAME}") == 1 and server.hits(f"/m/{NAME}") == 1


# ---------------------------------------------- issue 41 §5c: every stall ends within a bound
def unavailable(retry_after: str) -> object:
    """503 with a Retry-After the server chooses (a week, a date, garbage)."""

    def handle(req: BaseHTTPRequestHandler, hit: int) -> None:
        req.send_response(503)
        req.send_header("Retry-After", retry_after)
        req.send_header("Content-Length", "0")
        req.end_headers()

    return handle


def stall_mid_body(after: int) -> object:
    """Headers and `after` bytes at once, then nothing (the connection stays open)."""

    def handle(req: BaseHTTPRequestHandler, hit: int) -> None:
        req.send_response(200)
        req.send_header("Content-Length", str(len(PAYLOAD)))
        req.end_headers()
        req.wfile.write(PAYLOAD[:after])
        req.wfile.flush()
        time.sleep(30)

    return handle


# one variant of each class in make check, every variant in make test (each waits its bound)
SLOW = pytest.mark.slow


@pytest.mark.parametrize("retry_after", [
    "604800", pytest.param("999999999", marks=SLOW), "Wed, 21 Oct 2099 07:28:00 GMT", "-1",
    "9" * 5000, "soon"])
def test_retry_after_is_capped_and_the_total_bound_holds(
        retry_after: str, server: Server, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "MAX_BACKOFF", 0.2)  # the cap's own value: test_retry_after_cap
    server.routes["/u"] = unavailable(retry_after)  # type: ignore[assignment]
    started = time.monotonic()
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url("/u")), tmp_path, timeout=1.0, retries=3, backoff=0.01,
              deadline=5.0)
    assert time.monotonic() - started < 20, "not ended within the bound"
    assert "503" in str(exc.value) and "\n" not in str(exc.value)


def test_retry_after_cap() -> None:
    from types import SimpleNamespace

    for value, want in (("604800", http.MAX_BACKOFF), ("3", 3.0), ("9" * 5000, 0.0),
                        ("x", 0.0)):
        resp = SimpleNamespace(headers={"Retry-After": value})
        assert http._retry_after(resp) == want  # type: ignore[arg-type]
    assert http.MAX_BACKOFF <= 30


@pytest.mark.parametrize("after", [0, *(pytest.param(n, marks=SLOW) for n in (
    1, len(PAYLOAD) // 2, len(PAYLOAD) - 1))])
def test_a_stall_mid_body_ends_at_the_idle_timeout(
        after: int, server: Server, tmp_path: Path) -> None:
    server.routes["/s"] = stall_mid_body(after)  # type: ignore[assignment]
    started = time.monotonic()
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url("/s")), tmp_path, timeout=0.5, retries=1, backoff=0.01,
              deadline=10.0)
    assert time.monotonic() - started < 20, "not ended within the bound"
    assert "\n" not in str(exc.value)
