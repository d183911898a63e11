"""A vendor file obtained by hand (issue 39): a catalog source without URL is valid when it
names the file, is served only by the cache or a mirror, and a fetch that finds it nowhere
names the offline commands that would have served it (docs/catalog.md, the offline path)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from support.lifecycle_env import serve

from hwmgr.catalog.schema import findings
from hwmgr.errors import BadInputError, HwmgrError, NotFoundError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.source.fetch import Source
from hwmgr.lifecycle.source.mirror import fetch_mirrored

NAME = "igb-5.18.7-1.src.rpm"
DATA = b"an SRPM obtained by hand\n"
SHA = hashlib.sha256(DATA).hexdigest()


def layer(source: dict) -> dict:
    return {"schema_version": 3, "drivers": {"igb": {"versions": {"5.18.7": {
        "reason": "obtained by hand", "source": source}}}}}


@pytest.mark.parametrize("source, ok", [
    ({"type": "srpm", "filename": NAME, "verified": False}, True),
    ({"type": "srpm", "filename": NAME, "sha256": SHA, "size": len(DATA)}, True),
    ({"type": "tarball", "filename": "igb-5.18.7.tar.gz", "verified": False}, True),
    ({"type": "srpm", "verified": False}, False),  # neither url nor filename: what file?
    ({"type": "zip", "filename": NAME, "verified": False}, False),
])
def test_schema_takes_a_source_without_url_that_names_its_file(source: dict, ok: bool) -> None:
    """The whole-catalog rules, on the source object (a layer over a catalog that names
    the file may leave it out: partial layers only amend)."""
    path = ("drivers", "igb", "versions", "5.18.7", "source")
    found = [f for f in findings(layer(source)) if f[0][:5] == path]
    assert (not found) == ok, found
    assert findings(layer({"sha256": SHA, "size": len(DATA)}), partial=True) == []


def test_source_without_url_needs_a_filename() -> None:
    src = Source.from_catalog({"filename": NAME, "sha256": SHA, "size": len(DATA)})
    assert (src.url, src.name()) == (None, NAME)
    with pytest.raises(BadInputError, match="no url and no filename"):
        Source.from_catalog({"sha256": SHA, "size": len(DATA)}, where="igb 5.18.7 source")


def test_cache_serves_it_and_a_miss_names_the_offline_commands(tmp_path: Path) -> None:
    host = Host("/", SubprocessRunner(), writable=[str(tmp_path)])
    src = Source(None, SHA, len(DATA), filename=NAME)
    with pytest.raises(NotFoundError) as exc:
        fetch_mirrored(host, src, str(tmp_path / "cache"), who="igb 5.18.7")
    line = str(exc.value)
    assert line.startswith(f"no url in the catalog: {NAME}")
    assert f"`hwmgr catalog trust igb 5.18.7 --file {NAME}`" in line
    assert f"`hwmgr mirror sync DIR --from {NAME}`" in line and "--offline --mirror DIR" in line
    assert not (tmp_path / "cache").exists()  # a miss creates nothing
    # what `catalog trust --file` leaves: the file under its sha256 in the cache
    cached = tmp_path / "cache" / "sha256" / SHA / NAME
    cached.parent.mkdir(parents=True)
    cached.write_bytes(DATA)
    got = fetch_mirrored(host, src, str(tmp_path / "cache"), who="igb 5.18.7")
    assert (got.origin, got.path) == ("cache", cached)
    # a mirror directory serves it too (flat), copied into the cache and verified
    cached.unlink()
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / NAME).write_bytes(DATA)
    got = fetch_mirrored(host, src, str(tmp_path / "cache"), mirror=str(tmp_path / "mirror"))
    assert got.origin == "mirror" and cached.read_bytes() == DATA


@pytest.mark.slow  # an HTTP server and requests' import (~1 s)
def test_a_vendor_url_that_fails_names_the_offline_commands(tmp_path: Path) -> None:
    """The vendor's URL answers 404 (a file gone from the vendor's site): the error says how
    the file would have been served without it."""
    srv, base = serve(tmp_path / "empty")  # an HTTP server on 127.0.0.1 with nothing in it
    try:
        host = Host("/", SubprocessRunner(), writable=[str(tmp_path)])
        src = Source(f"{base}/{NAME}", SHA, len(DATA), allow_http=True)
        with pytest.raises(HwmgrError) as exc:
            fetch_mirrored(host, src, str(tmp_path / "cache"), who="igb 5.18.7")
    finally:
        srv.shutdown()
        srv.server_close()
    line = str(exc.value)
    assert "404" in line and "\n" not in line
    assert f"`hwmgr catalog trust igb 5.18.7 --file {NAME}` keeps the file in the cache" in line
