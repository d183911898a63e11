"""Malformed URLs (issue 41 §2): 'http://[::1' made `catalog update` exit 70 (urlsplit's bare
ValueError). hwmgr.urls is the one owner of splitting; generated variants through it, through
network_reason, and through `catalog update` on the command line: one line, exit 8, the URL
named (escaped), nothing downloaded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import run_cli

from hwmgr import urls
from hwmgr.errors import network_reason

RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
# each one refused; ODD ones urlsplit may take (then requests refuses them at connect time)
HOSTS = ["[::1", "[", "[::1]:99999", "[::1]:x", "h:-1", "h:65536", "a\x1b[2J", "a\x00b",
         "a\u009bb", "[\x07]"]
ODD = ["http://[::1]]", "http://]", "http://[zz::1]", "http://h:1:2", "http://[::1]x"]
SCHEMES = ["http://", "https://", "HTTP://"]


def _bad_urls() -> list[str]:
    out = [s + h + p for s in SCHEMES for h in HOSTS for p in ("", "/catalog.json", "?q=[")]
    out += ["", "http://", "https:///x", "ftp://example.com/x", "example.com/x", "file:///x",
            "http://h/" + "a" * (urls.MAX_URL_CHARS + 1)]
    return out


BAD = _bad_urls()


def test_split_and_problem_never_raise() -> None:
    for url in BAD + ODD:
        reason = urls.problem(url)
        assert reason or url in ODD, url
        assert reason is None or ("\n" not in reason and len(reason) < 100), (url, reason)
        urls.split(url)  # None or parts, never an exception
        urls.path_of(url)
        urls.join("http://h/a", url)
    assert urls.problem("https://[::1]:8443/c.json") is None
    assert urls.split("https://[::1]:8443/c.json") == ("https", "::1", 8443, urls.split(
        "https://[::1]:8443/c.json").raw)  # type: ignore[union-attr]
    assert urls.split("http://h/x").port == 80  # type: ignore[union-attr]


def test_network_reason_names_a_malformed_peer() -> None:
    for url in BAD + ODD:
        text = network_reason(OSError("Connection refused"), url)
        assert text and "\n" not in text[:500]


@pytest.mark.parametrize("url", [u for u in BAD if "catalog.json" in u or u.count("/") <= 3][:40])
def test_catalog_update_refuses_on_one_line(url: str, tmp_path: Path) -> None:
    env = {"HWMGR_STATE_DIR": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path),
           "HOME": str(tmp_path), "HWMGR_CONFIG": ""}
    res = run_cli("catalog", "update", url, env=env, timeout=30)
    lines = res.stderr.splitlines()
    assert res.returncode == 8, (url, res.returncode, res.stderr[-300:])
    assert len(lines) == 1 and lines[0].startswith("hwmgr catalog: "), res.stderr
    assert "Traceback" not in res.stderr and not RAW_CONTROL.search(res.stderr + res.stdout)
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())
