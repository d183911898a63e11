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
from hwmgr.lifecycle import http
from hwmgr.lifecycle.fetch import cache_path

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
        server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the deadline is 1 s of per-read timeout + 1 s; every byte arrives within the timeout
    monkeypatch.setattr(http, "MIN_DEADLINE", 1.0)
    monkeypatch.setattr(http, "MIN_RATE", 10 ** 12)
    server.routes["/d"] = drip(0.05)  # type: ignore[assignment]
    started = time.monotonic()
    with pytest.raises(HwmgrError) as exc:
        fetch(src(server.url("/d")), tmp_path, timeout=1.0, retries=0, backoff=0.01)
    took = time.monotonic() - started
    line = str(exc.value)
    assert "too slow" in line and "deadline" in line and "\n" not in line
    assert took < 20, took  # a guard against a hang, not a timing assertion
    assert (next(tmp_path.rglob("*.part"))).stat().st_size > 0  # kept for a resume


def test_deadline_grows_with_the_size() -> None:
    now = time.monotonic()
    small, big = http.deadline_for(1, 30.0), http.deadline_for(10 * 1024 ** 3, 30.0)
    assert small - now >= http.MIN_DEADLINE + 30.0 - 1
    assert big - now >= 10 * 1024 ** 3 / http.MIN_RATE


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
