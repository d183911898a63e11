"""Progress and plain words on long work: `hwmgr fetch` from a slow loopback server shows a
rich bar on a terminal and one line per step when piped; retries say why and when; network
failures read as words ("connection refused by 127.0.0.1:PORT"), never a class name."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
from support import HWMGR, REPO
from support.lifecycle_env import MODULE, write_catalog
from support.terminal import HAVE_TMUX, in_tmux

from hwmgr.errors import network_reason

PAYLOAD = os.urandom(1 << 20)
CHUNK = 32 << 10
PAUSE = 0.05  # per chunk: 32 chunks, about 1.6 s


class SlowServer:
    """HTTP on 127.0.0.1 that sends PAYLOAD in chunks with a pause between them."""

    def __init__(self, name: str) -> None:
        path = f"/{name}"

        class _H(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                if self.path != path:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(PAYLOAD)))
                self.end_headers()
                for i in range(0, len(PAYLOAD), CHUNK):
                    self.wfile.write(PAYLOAD[i:i + CHUNK])
                    self.wfile.flush()
                    time.sleep(PAUSE)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _bed(tmp_path: Path, base: str) -> tuple[Path, dict[str, str]]:
    srpm = tmp_path / f"{MODULE}-1.0-1.src.rpm"
    srpm.write_bytes(PAYLOAD)
    cat = write_catalog(tmp_path / "catalog.json", base, {"1.0": srpm})
    (tmp_path / "site.json").write_text("{}")  # no site mirror of this machine's
    env = {"HWMGR_CACHE_DIR": str(tmp_path / "cache"), "HWMGR_STATE_DIR": str(tmp_path / "st"),
           "HWMGR_CONFIG": str(tmp_path / "site.json")}
    return cat, env


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    srv = SlowServer(f"{MODULE}-1.0-1.src.rpm")
    try:
        yield _bed(tmp_path, srv.base)
    finally:
        srv.close()


@pytest.mark.slow  # a real download or gpg/collector run of a few seconds: the slow lane
def test_piped_fetch_prints_one_line_per_step(slow: tuple[Path, dict[str, str]]) -> None:
    cat, env = slow
    res = subprocess.run([*HWMGR, "fetch", MODULE, "--to", "1.0", "--catalog", str(cat)],
                         cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 2 and "\x1b" not in res.stderr, res.stderr
    assert lines[0].endswith(f"downloading {MODULE}-1.0-1.src.rpm ({len(PAYLOAD)} bytes)")
    assert f"downloaded {MODULE}-1.0-1.src.rpm: {len(PAYLOAD)} bytes in " in lines[1]
    got = Path(res.stdout.split(" (")[0])
    assert hashlib.sha256(got.read_bytes()).digest() == hashlib.sha256(PAYLOAD).digest()
    again = subprocess.run([*HWMGR, "fetch", MODULE, "--to", "1.0", "--catalog", str(cat)],
                           cwd=REPO, env={**os.environ, **env}, capture_output=True,
                           text=True, timeout=120, check=False)
    assert again.returncode == 0 and again.stderr == "", again.stderr  # a cache hit: silent


@pytest.mark.slow  # a real download or gpg/collector run of a few seconds: the slow lane
@pytest.mark.skipif(not HAVE_TMUX, reason="needs tmux")
def test_terminal_fetch_shows_a_progress_bar(slow: tuple[Path, dict[str, str]]) -> None:
    cat, env = slow
    screens: list[str] = []
    code, final = in_tmux([*HWMGR, "fetch", MODULE, "--to", "1.0", "--catalog", str(cat)],
                          100, env={**env, "TERM": "xterm-256color"}, during=screens)
    assert code == 0, final
    bars = [s for s in screens if f"{MODULE}-1.0-1.src.rpm ━" in s]
    assert bars, screens[-3:]
    assert all("/1.0 MB" in s for s in bars), bars[-1]
    moving = [s for s in bars if re.search(r" 0\.[1-9]/1\.0 MB", s)]
    assert moving, bars  # the bar moves while bytes arrive, not only at the end
    assert "sha256 ok, network" in final and "━" not in final  # the bar is gone at the end


@pytest.mark.slow  # the default back-off: 0.5 + 1 + 2 + 4 s of retries
def test_refused_connection_is_said_in_words_with_each_retry(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cat, env = _bed(tmp_path, f"http://127.0.0.1:{port}")
    res = subprocess.run([*HWMGR, "fetch", MODULE, "--to", "1.0", "--catalog", str(cat)],
                         cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 1, res.stderr
    where = f"connection refused by 127.0.0.1:{port}"
    retries = [ln for ln in res.stderr.splitlines() if "; retry " in ln]
    assert len(retries) == 4 and all(where in ln for ln in retries), res.stderr
    assert retries[0].endswith("retry 1 of 4 in 0.5 s"), retries[0]
    last = res.stderr.splitlines()[-1]  # then the offline commands that would have served it
    assert f"failed after 5 attempts: {where}" in last and "catalog trust" in last, last
    assert "Error" not in res.stderr and "Exception" not in res.stderr, res.stderr


def test_network_reasons_name_the_peer() -> None:
    import requests

    url = "https://mirror.example:8443/x.rpm"
    for exc, words in [
        (requests.ConnectionError("HTTPConnectionPool(host='mirror.example', port=8443): "
                                  "Max retries exceeded (Caused by NewConnectionError('<x>: "
                                  "Failed to establish a new connection: [Errno 111] "
                                  "Connection refused'))"),
         "connection refused by mirror.example:8443"),
        (requests.ConnectTimeout("... (connect timeout=30)"),
         "timed out after 30 s waiting for mirror.example:8443"),
        (requests.ConnectionError("... [Errno -2] Name or service not known')"),
         "cannot resolve the host name mirror.example"),
        (requests.ConnectionError("... [Errno 113] No route to host')"),
         "no route to mirror.example"),
    ]:
        assert network_reason(exc, url, 30) == words
    assert network_reason(OSError(), "http://h/") == "cannot connect to h:80"


class FlakyServer:
    """HTTP on 127.0.0.1 that answers 503 to the first `fails` GETs, then sends PAYLOAD."""

    def __init__(self, name: str, fails: int) -> None:
        path, left = f"/{name}", [fails]
        got: list[str] = []
        self.requests = got

        class _H(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                got.append(self.path)
                if self.path != path:
                    self.send_error(404)
                elif left[0] > 0:
                    left[0] -= 1
                    self.send_error(503, "busy")
                else:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(PAYLOAD)))
                    self.end_headers()
                    self.wfile.write(PAYLOAD)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.slow  # a plan, two back-offs and an upgrade's first steps: a few seconds
def test_upgrade_fetch_says_each_retry_before_it_waits(tmp_path: Path) -> None:
    """`hwmgr upgrade`'s fetch step against a server that fails twice: each retry is said on
    stderr (why, which attempt, the back-off), then the download lines, as `fetch` does.
    The payload is no RPM, so the transaction stops at unpack and undoes the fetch: nothing
    reaches DKMS."""
    name = f"{MODULE}-1.0-1.src.rpm"
    srv = FlakyServer(name, fails=2)
    try:
        cat, env = _bed(tmp_path, srv.base)
        res = subprocess.run([*HWMGR, "upgrade", MODULE, "--to", "1.0", "--catalog", str(cat),
                              "--yes"], cwd=REPO, env={**os.environ, **env,
                                                       "SSH_CONNECTION": ""},
                             capture_output=True, text=True, timeout=120, check=False)
    finally:
        srv.close()
    assert srv.requests == [f"/{name}"] * 3, srv.requests
    lines = [ln.split("] ", 1)[-1] for ln in res.stderr.splitlines()]
    retries = [ln for ln in lines if "; retry " in ln]
    assert retries == [f"{name}: HTTP 503 busy; retry 1 of 4 in 0.5 s",
                       f"{name}: HTTP 503 busy; retry 2 of 4 in 1.0 s"], res.stderr
    at = lines.index(retries[0])
    assert lines[at + 2] == f"downloading {name} ({len(PAYLOAD)} bytes)", res.stderr
    assert lines[at + 3].startswith(f"downloaded {name}: {len(PAYLOAD)} bytes in ")
    assert res.returncode != 0 and "unpack" in res.stderr, res.stderr  # not an RPM
    assert "Traceback" not in res.stderr


@pytest.mark.slow  # a real download or gpg/collector run of a few seconds: the slow lane
@pytest.mark.skipif(not HAVE_TMUX, reason="needs tmux")
def test_terminal_catalog_update_shows_a_progress_bar(tmp_path: Path) -> None:
    """`catalog update` draws the same bar as fetch while a slow server sends the catalog
    (1 MiB here; it has no signature, so the update then refuses and installs nothing)."""
    srv = SlowServer("big.json")
    try:
        screens: list[str] = []
        env = {"HWMGR_STATE_DIR": str(tmp_path / "st"), "TERM": "xterm-256color",
               "HWMGR_TRUSTED_KEYS_DIR": str(tmp_path / "keys")}
        code, final = in_tmux([*HWMGR, "catalog", "update", f"{srv.base}/big.json"], 100,
                              env=env, during=screens)
    finally:
        srv.close()
    assert code == 9, final
    bars = [s for s in screens if "big.json ━" in s]
    assert bars and all("/1.0 MB" in s for s in bars), screens[-3:]
    assert any(re.search(r" 0\.[1-9]/1\.0 MB", s) for s in bars), bars  # it moves
    assert "no signature at" in final and "━" not in final  # the bar is gone at the end
    assert not (tmp_path / "st/catalog/current.json").exists()
