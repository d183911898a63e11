"""`hwmgr mirror sync DIR --from FILE`: files the admin already has go into the documented
mirror layout under the catalog source whose pinned sha256 they carry, with no network; a file
no pinned source matches is refused (exit 9, one line) and nothing changes. Then `hwmgr fetch`
serves from that mirror (over HTTP on 127.0.0.1, and as a directory offline) while the vendor
server is gone."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Iterator

import pytest
from support import run_cli
from support.lifecycle_env import MODULE, serve, write_catalog
from support.srpmfactory import build_srpm


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def tree(d: Path) -> dict[str, bytes]:
    """Every file under `d` with its bytes (empty when `d` does not exist)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def pkgs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The vendor's SRPMs 1.0 and 1.1, and 1.2 (listed in the catalog, not verified)."""
    out = tmp_path_factory.mktemp("vendor")
    return {v: build_srpm(MODULE, v, out) for v in ("1.0", "1.1", "1.2")}


@pytest.fixture
def site(tmp_path: Path, pkgs: dict[str, Path]) -> Iterator[dict]:
    """A vendor server on 127.0.0.1 the catalog points at, the admin's copies of the files,
    and private state/cache dirs."""
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    for p in pkgs.values():
        shutil.copy(p, vendor)
    srv, url = serve(vendor)
    catalog = write_catalog(tmp_path / "catalog.json", url,
                            {"1.0": pkgs["1.0"], "1.1": pkgs["1.1"], "1.2": pkgs["1.2"]})
    doc = json.loads(catalog.read_text())  # 1.2: documented, checksum unknown
    doc["drivers"][MODULE]["versions"]["1.2"]["source"] = {
        "type": "srpm", "url": f"{url}/{pkgs['1.2'].name}", "allow_http": True,
        "verified": False}
    catalog.write_text(json.dumps(doc))
    have = tmp_path / "have"  # what the admin already obtained, e.g. from a vendor DVD
    have.mkdir()
    for v in ("1.0", "1.1"):
        shutil.copy(pkgs[v], have)
    (tmp_path / "hwmgr.json").write_text("{}\n")
    env = {"HWMGR_STATE_DIR": str(tmp_path / "state"), "HWMGR_CACHE_DIR": str(tmp_path / "c"),
           "HWMGR_SITE_CATALOG_DIR": str(tmp_path / "catalog.d"),
           "HWMGR_CONFIG": str(tmp_path / "hwmgr.json")}
    yield {"srv": srv, "url": url, "catalog": catalog, "have": have, "env": env,
           "mirror": tmp_path / "mirror", "tmp": tmp_path}
    srv.shutdown()


def hw(s: dict, *args: str):
    return run_cli(*args, "--catalog", str(s["catalog"]), env=s["env"])


def gone(s: dict) -> None:
    """The vendor server goes away (the servers have no internet)."""
    s["srv"].shutdown()
    s["srv"].server_close()


@pytest.mark.slow  # a mirror sync and fetch over HTTP
def test_sync_from_files_then_fetch_serves_from_the_mirror(site: dict,
                                                           pkgs: dict[str, Path]) -> None:
    s, mirror = site, site["mirror"]
    gone(s)  # sync --from needs no network
    files = [s["have"] / pkgs[v].name for v in ("1.0", "1.1")]
    res = hw(s, "mirror", "sync", str(mirror), "--from", str(files[0]), "--from",
             str(files[1]))
    assert res.returncode == 0, res.stderr
    for v in ("1.0", "1.1"):  # the documented layout, byte for byte
        placed = mirror / "sha256" / sha(pkgs[v]) / pkgs[v].name
        assert placed.read_bytes() == pkgs[v].read_bytes()
    index = json.loads((mirror / "index.json").read_text())
    assert index["format"] == "hwmgr-mirror" and index["version"] == 1
    assert {(f["version"], f["sha256"], f["origin"]) for f in index["files"]} == {
        ("1.0", sha(pkgs["1.0"]), "file"), ("1.1", sha(pkgs["1.1"]), "file")}
    assert set(tree(mirror)) == {"index.json", *(f["path"] for f in index["files"])}
    # without a mirror, fetch cannot reach the vendor
    res = hw(s, "fetch", MODULE, "--to", "1.1")
    assert res.returncode != 0 and "127.0.0.1" in res.stderr, res.stderr
    assert not list(Path(s["env"]["HWMGR_CACHE_DIR"]).rglob("*.rpm"))
    # the site mirror served over HTTP (named in the site config): fetch takes it from there
    msrv, murl = serve(mirror)
    try:
        Path(s["env"]["HWMGR_CONFIG"]).write_text(json.dumps({"mirror": murl}))
        res = hw(s, "fetch", MODULE, "--to", "1.1", "--json")
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)["data"]
        assert data["origin"] == "mirror" and data["sha256"] == sha(pkgs["1.1"])
        assert Path(data["path"]).read_bytes() == pkgs["1.1"].read_bytes()
    finally:
        msrv.shutdown()
        msrv.server_close()
    # and as a directory, offline
    res = hw(s, "fetch", MODULE, "--to", "1.0", "--offline", "--mirror", str(mirror), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["data"]["origin"] == "mirror"


def test_index_keeps_earlier_files(site: dict, pkgs: dict[str, Path]) -> None:
    s, mirror = site, site["mirror"]
    for v in ("1.0", "1.1"):
        res = hw(s, "mirror", "sync", str(mirror), "--from", str(s["have"] / pkgs[v].name))
        assert res.returncode == 0, res.stderr
        assert f"{MODULE} {v}: sha256/{sha(pkgs[v])}/" in res.stdout
    index = json.loads((mirror / "index.json").read_text())
    assert sorted(f["version"] for f in index["files"]) == ["1.0", "1.1"]


def test_refusals_name_file_driver_version_and_both_checksums(site: dict,
                                                              pkgs: dict[str, Path]) -> None:
    s, mirror = site, site["mirror"]
    assert hw(s, "mirror", "sync", str(mirror), "--from",
              str(s["have"] / pkgs["1.0"].name)).returncode == 0
    before = tree(mirror)
    # the file named like the 1.1 source, but another build: content differs
    other = s["tmp"] / "other" / pkgs["1.1"].name
    other.parent.mkdir()
    other.write_bytes(pkgs["1.1"].read_bytes() + b"\0")
    good = s["have"] / pkgs["1.1"].name
    res = hw(s, "mirror", "sync", str(mirror), "--from", str(good), "--from", str(other))
    assert res.returncode == 9, res.stderr
    line = res.stderr.strip()
    assert "\n" not in line, line
    assert (f"{other}: sha256 {sha(other)} matches no pinned catalog source; {MODULE} 1.1 "
            f"expects {sha(pkgs['1.1'])}; nothing copied") in line
    assert tree(mirror) == before  # the good file given with it was not copied either
    # a version the catalog lists without a checksum: nothing to match, and it says why
    res = hw(s, "mirror", "sync", str(mirror), "--from", str(pkgs["1.2"]))
    assert res.returncode == 9
    assert f"{MODULE} 1.2 expects no sha256 (not verified: run hwmgr catalog trust" in res.stderr
    # a file named like no source, without --driver: the line says how to name one
    stray = s["tmp"] / "notes.txt"
    stray.write_text("hello\n")
    res = hw(s, "mirror", "sync", str(mirror), "--from", str(stray))
    assert res.returncode == 9 and "name one with --driver/--to" in res.stderr
    res = hw(s, "mirror", "sync", str(mirror), "--from", str(stray), "--driver", MODULE,
             "--to", "1.0")
    assert res.returncode == 9
    assert f"{MODULE} 1.0 expects {sha(pkgs['1.0'])}" in res.stderr
    # --driver/--to narrow the match: the 1.0 file is not the 1.1 source
    res = hw(s, "mirror", "sync", str(mirror), "--from", str(s["have"] / pkgs["1.0"].name),
             "--driver", MODULE, "--to", "1.1")
    assert res.returncode == 9 and f"{MODULE} 1.1 expects {sha(pkgs['1.1'])}" in res.stderr
    assert tree(mirror) == before
    fresh = s["tmp"] / "fresh-mirror"
    res = hw(s, "mirror", "sync", str(fresh), "--from", str(other))
    assert res.returncode == 9 and not fresh.exists()  # not even the directory


def test_sync_from_bad_arguments(site: dict) -> None:
    s = site
    res = hw(s, "mirror", "sync", str(s["mirror"]), "--from", str(s["tmp"] / "absent.rpm"))
    assert res.returncode == 3 and "absent.rpm: no such file" in res.stderr
    res = hw(s, "mirror", "sync", str(s["mirror"]), "--from", str(s["have"]))
    assert res.returncode == 8 and "not a regular file" in res.stderr
    res = hw(s, "mirror", "sync", str(s["mirror"]), "--from", str(s["have"]), "--driver", "nope")
    assert res.returncode == 3 and "nothing to sync for nope" in res.stderr
    assert not s["mirror"].exists()


@pytest.mark.slow  # seven mirror syncs through the CLI
@pytest.mark.parametrize("index", [
    "[" * 100_000 + "]" * 100_000, '{"files": [{"path": "x", "driver": [1], "version": "1"}]}',
    '{"files": 5}', '{"files": [{"a": ' + "9" * 5000 + "}]}", "\xff\xfe{", "[1, 2]",
    '{"files": [{"path": "/etc/passwd", "driver": "d", "version": "1"}]}',
])
def test_damaged_index_is_rebuilt_not_a_crash(site: dict, pkgs: dict[str, Path],
                                              index: str) -> None:
    """index.json is a listing sync rewrites: a garbled, deeply nested or wrongly typed one
    is replaced by this run's files (never exit 70, never an entry outside the mirror)."""
    s, mirror = site, site["mirror"]
    mirror.mkdir()
    (mirror / "index.json").write_bytes(index.encode("utf-8", "surrogateescape"))
    res = hw(s, "mirror", "sync", str(mirror), "--from", str(s["have"] / pkgs["1.0"].name))
    assert res.returncode == 0, res.stderr
    files = json.loads((mirror / "index.json").read_text())["files"]
    assert [(f["driver"], f["version"]) for f in files] == [(MODULE, "1.0")]
