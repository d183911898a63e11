"""The site config: every key documented, bounds enforced, and how it joins the run's settings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hwmgr.config import (
    DEFAULT_BUILD_TIMEOUT,
    KNOWN_KEYS,
    Config,
    SiteConfig,
    parse_config,
    with_site,
)
from hwmgr.errors import BadInputError

DOC = Path(__file__).resolve().parent.parent / "docs" / "formats.md"


def test_every_site_key_is_documented_with_its_default() -> None:
    text = DOC.read_text()
    section = text.split("## Site config", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M))
    assert sorted(rows) == sorted(KNOWN_KEYS)
    defaults = SiteConfig()
    for key in ("throughput_port", "throughput_duration", "connect_timeout_ms",
                "max_boot_attempts", "link_wait_seconds", "build_timeout_seconds"):
        assert float(rows[key]) == float(getattr(defaults, key)), key


@pytest.mark.parametrize("value,ok", [(60, True), (2400, True), (86400, True), (59, False),
                                      (86401, False), ("600", False), (True, False)])
def test_build_timeout_bounds(value: object, ok: bool) -> None:
    raw = json.dumps({"build_timeout_seconds": value}).encode()
    if ok:
        assert parse_config(raw, "/etc/hwmgr/hwmgr.json").build_timeout_seconds == value
    else:
        with pytest.raises(BadInputError, match=r"/etc/hwmgr/hwmgr.json: 'build_timeout_seconds'"):
            parse_config(raw, "/etc/hwmgr/hwmgr.json")


def test_with_site_joins_mirror_and_build_timeout() -> None:
    site = SiteConfig(mirror="http://mirror.example/hwmgr", build_timeout_seconds=2400)
    assert Config().build_timeout == DEFAULT_BUILD_TIMEOUT
    joined = with_site(Config(), site)
    assert (joined.mirror, joined.build_timeout) == ("http://mirror.example/hwmgr", 2400.0)
    # --mirror on the command line wins over the site's
    assert with_site(Config(mirror="/srv/mirror"), site).mirror == "/srv/mirror"
