"""The story a new user follows (README "A catalog you can trust"), end to end with real rpm,
dkms, kernel headers and HTTP: the catalog names a vendor version without a checksum and only
for other kernels; the admin obtains the SRPM, `catalog trust`s it, declares the kernel the
plan names, fills an internal mirror on a connected machine; then the vendor site is gone and
`upgrade` runs from the mirror; `rollback` restores the original module byte for byte.

Uses machine-wide /var/lib/dkms, /usr/src and /lib/modules like tests/test_lifecycle.py:
run it in a private mount namespace with overlays when other tests share the machine.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from support import run_cli
from support.lifecycle_env import MODULE, cleanup_dkms, headers_kernel, serve
from support.srpmfactory import build_srpm
from test_lifecycle import module_state

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.headers import kernels_with_headers
from hwmgr.transaction.state import StateDir

pytestmark = pytest.mark.slow  # the catalog-trust story end to end, DKMS included


def base_catalog(vendor_url: str, srpm10: Path) -> dict:
    """The shipped-style catalog: 1.0 pinned; 1.1 recommended but unverified, el6 kernels."""
    import hashlib

    data = srpm10.read_bytes()
    return {
        "schema_version": 1, "catalog_version": "2026.11.50", "released": "2026-11-21",
        "drivers": {MODULE: {
            "version_scheme": "driver", "description": "hwmgr test module",
            "devices": [{"vendor": "1d0f", "device": "ffff", "name": "no such device"}],
            "versions": {
                "1.0": {"status": "known-good", "reason": "the site's current build",
                        "evidence": "tests/kmod",
                        "source": {"type": "srpm", "url": f"{vendor_url}/{srpm10.name}",
                                   "allow_http": True, "size": len(data),
                                   "sha256": hashlib.sha256(data).hexdigest()}},
                "1.1": {"status": "recommended", "reason": "fixes the slowdown",
                        "evidence": "tests/kmod", "kernels": ["2.6.32-*.el6.x86_64"],
                        "source": {"type": "srpm", "allow_http": True, "verified": False,
                                   "url": f"{vendor_url}/{MODULE}-1.1-1.src.rpm"}}}}},
    }


@pytest.fixture
def story(tmp_path: Path):
    kver = headers_kernel()
    assert kver, "linux-headers-amd64 must be installed (make test installs it)"
    cleanup_dkms(kver)
    vendor = tmp_path / "vendor-site"
    srpm10 = build_srpm(MODULE, "1.0", vendor)
    build_srpm(MODULE, "1.1", vendor)
    srv, vendor_url = serve(vendor)
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "catalog.json").write_text(
        json.dumps(base_catalog(vendor_url, srpm10), indent=1))
    mirror = tmp_path / "mirror"
    (tmp_path / "hwmgr.json").write_text("{}\n")
    env = {"HWMGR_CATALOG_DIR": str(tmp_path / "base"),
           "HWMGR_SITE_CATALOG_DIR": str(tmp_path / "catalog.d"),
           "HWMGR_STATE_DIR": str(tmp_path / "state"), "HWMGR_CACHE_DIR": str(tmp_path / "cache"),
           "HWMGR_SIGN_KEY": str(tmp_path / "mok.key"),
           "HWMGR_SIGN_CERT": str(tmp_path / "mok.pub"),
           "HWMGR_CONFIG": str(tmp_path / "hwmgr.json"), "SSH_CONNECTION": ""}
    yield {"env": env, "kver": kver, "vendor": vendor, "vendor_srv": srv, "mirror": mirror,
           "tmp": tmp_path}
    srv.shutdown()
    cleanup_dkms(kver)


def bed_of(s: dict):
    """The bits of a lifecycle Bed that module_state reads."""
    from types import SimpleNamespace

    return SimpleNamespace(kver=s["kver"])


def hw(s: dict, *args: str):
    return run_cli(*args, env=s["env"], timeout=600)


def test_new_user_story(story: dict) -> None:
    s, kver = story, story["kver"]
    assert kver in kernels_with_headers(Host("/", SubprocessRunner()))
    # the site's current driver: 1.0, installed the ordinary way
    assert hw(s, "upgrade", MODULE, "--to", "1.0", "--kernel", kver, "--yes").returncode == 0
    original = module_state(bed_of(s))
    assert original[0] == "1.0"
    # 1. the catalog's 1.1 cannot run: no checksum, and only declared for el6 kernels
    res = hw(s, "plan", "upgrade", MODULE, "--to", "1.1", "--kernel", kver)
    assert res.returncode == 9
    assert "is not verified (no known sha256/size)" in res.stderr
    assert f"is not for kernel {kver}" in res.stderr
    assert "nearest declared: 2.6.32-*.el6.x86_64" in res.stderr
    line = re.search(r"add to (\S+): (\{.*\})$", res.stderr, re.M)
    assert line and line.group(1) == f"{s['env']['HWMGR_SITE_CATALOG_DIR']}/60-kernels.json"
    # 2. the admin obtains the vendor SRPM and trusts it on purpose
    pkg = s["vendor"] / f"{MODULE}-1.1-1.src.rpm"
    res = hw(s, "catalog", "trust", MODULE, "1.1", "--file", str(pkg), "--yes")
    assert res.returncode == 0, res.stderr
    assert f"package:    {MODULE}-1.1-1" in res.stderr
    # trust keeps the file in this machine's cache (issue 39); the servers upgraded below are
    # other machines, with empty caches: they get it from the mirror
    sha = hashlib.sha256(pkg.read_bytes()).hexdigest()
    assert (Path(s["env"]["HWMGR_CACHE_DIR"]) / "sha256" / sha / pkg.name).is_file()
    shutil.rmtree(s["env"]["HWMGR_CACHE_DIR"])
    # 3. ...and declares the kernel they built and tested on: the line plan printed
    Path(line.group(1)).write_text(line.group(2) + "\n")
    # 4. a connected machine fills the internal mirror, served over HTTP
    res = hw(s, "mirror", "sync", str(s["mirror"]), "--driver", MODULE)
    assert res.returncode == 0, res.stderr
    index = json.loads((s["mirror"] / "index.json").read_text())
    assert {f["version"] for f in index["files"]} == {"1.0", "1.1"}
    msrv, mirror_url = serve(s["mirror"])
    try:
        Path(s["env"]["HWMGR_CONFIG"]).write_text(json.dumps({"mirror": mirror_url}))
        # 5. the servers have no internet: the vendor site is gone from here on
        s["vendor_srv"].shutdown()
        s["vendor_srv"].server_close()
        res = hw(s, "plan", "upgrade", MODULE, "--to", "1.1", "--kernel", kver)
        assert res.returncode == 0, res.stderr
        res = hw(s, "upgrade", MODULE, "--to", "1.1", "--kernel", kver, "--yes", "--json")
        assert res.returncode == 0, res.stderr
        txn = json.loads(res.stdout)["data"]["transaction"]
        assert txn["state"] == "committed"
        journal = StateDir(Host("/", SubprocessRunner()), s["env"]["HWMGR_STATE_DIR"])
        fetch = journal.read_journal().get(txn["id"])["steps"][0]
        assert fetch["name"] == "fetch" and fetch["data"]["origin"] == "mirror", fetch
        assert module_state(bed_of(s))[0] == "1.1"
    finally:
        msrv.shutdown()
    # 6. rollback restores the original module byte for byte
    res = hw(s, "rollback", MODULE, "--yes")
    assert res.returncode == 0, res.stderr
    assert module_state(bed_of(s)) == original
