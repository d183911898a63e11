"""The igb story on Intel's own source RPMs and tarballs (issues 23, 39), with real rpm, DKMS
and kernel headers: the release before the newest as Intel's own tarball (`catalog trust` →
`upgrade` through the tarball path), then docs/catalog.md's offline whole path for the newest
(a site layer without URL → `catalog trust` → `plan upgrade` → `upgrade` from the cache →
`rollback` to the tarball's build) → `rollback --to inbox`, built for an installed kernel
both releases support (not the running one, which has no headers here), checking after each
step what `modinfo -k KVER igb` resolves (version, filename, srcversion) and the sha256 of
every igb module file of KVER.
The story takes the two newest SRPMs (igb 5.18.7 and 5.17.5, which build on Debian 12's own
6.1 headers); the older ones (5.9.3, 5.8.5) predate Linux 6.1 and are the real case of a
vendor release too old for the target kernel: `recipe check` proves that it fails cleanly,
naming the compiler's line.

The SRPMs come from HWMGR_VENDOR_DIR (tests/support/vendor_env.py, docs/testing.md), checked against
its SUMS.txt. Uses machine-wide /var/lib/dkms, /usr/src and /lib/modules like
tests/test_trust_story.py: the story removes only the igb versions it installs; `recipe check`
builds in scratch trees and changes none of them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from support import run_cli
from support.lifecycle_env import headers_kernel
from support.vendor_env import (
    IGB_KCOMPAT_6_1,
    checked,
    igb_kernels,
    igb_predates,
    listed,
    newest_first,
    remove_versions,
    srpms,
    vendor_dir,
)

from hwmgr.errors import EXIT_FAILED
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.dkms import Dkms

DRIVER = "igb"
SITE_LAYER = Path(__file__).resolve().parent / "fixtures" / "vendor" / "site-igb.json"
CATALOG_DOC = Path(__file__).resolve().parents[1] / "docs" / "catalog.md"
DOC_KERNEL = "6.1.0-56-amd64"  # the kernel docs/catalog.md's examples name


def test_vendor_files_are_the_ones_sums_names() -> None:
    """Every file SUMS.txt lists is there with its size and sha256 (fails, never skips, when
    HWMGR_VENDOR_DIR is set)."""
    for f in listed(vendor_dir()):
        assert checked(f) == f.path


def modules_of(kver: str) -> dict[str, str]:
    """{path: sha256} of every igb module file of `kver` (in-tree, DKMS or other)."""
    base = Path("/lib/modules") / kver
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(base.rglob(f"{DRIVER}.ko*")) if p.is_file()}


def resolved(kver: str) -> dict[str, str] | None:
    """What `modinfo -k KVER igb` resolves: version, filename, srcversion (None: no module)."""
    res = subprocess.run(["modinfo", "-k", kver, DRIVER], capture_output=True, text=True,
                         check=False)
    if res.returncode != 0:
        return None
    fields = {}
    for line in res.stdout.splitlines():
        key, _, value = line.partition(":")
        if key in ("version", "filename", "srcversion") and key not in fields:
            fields[key] = value.strip()
    return fields


def state(kver: str) -> tuple[dict[str, str] | None, dict[str, str]]:
    return resolved(kver), modules_of(kver)


@pytest.fixture
def story(tmp_path: Path):
    releases = srpms(DRIVER)
    assert len(releases) >= 2, f"{vendor_dir()}: the story needs two igb SRPMs"
    new, old = newest_first(list(releases))[:2]
    # the newest kernel both releases build for; else the newest (the story then proves that
    # the failed build of a release too old for it is undone)
    kver = (igb_kernels([new, old]) or [headers_kernel()])[0]
    assert kver, "linux-headers-amd64 must be installed (make test installs it)"
    others = [e.version for e in Dkms(Host("/", SubprocessRunner())).status(DRIVER)
              if e.version not in (new, old)]
    if others:
        pytest.skip(f"DKMS already holds igb {', '.join(others)} on this host; not touching it")
    remove_versions(DRIVER, kver, [new, old])
    (tmp_path / "catalog.d").mkdir()
    shutil.copy(SITE_LAYER, tmp_path / "catalog.d" / "10-igb.json")
    (tmp_path / "hwmgr.json").write_text("{}\n")
    env = {"HWMGR_SITE_CATALOG_DIR": str(tmp_path / "catalog.d"),
           "HWMGR_STATE_DIR": str(tmp_path / "state"), "HWMGR_CACHE_DIR": str(tmp_path / "cache"),
           "HWMGR_SIGN_KEY": str(tmp_path / "mok.key"),
           "HWMGR_SIGN_CERT": str(tmp_path / "mok.pub"),
           "HWMGR_CONFIG": str(tmp_path / "hwmgr.json"), "SSH_CONNECTION": ""}
    yield {"env": env, "kver": kver, "new": new, "old": old, "srpms": releases}
    remove_versions(DRIVER, kver, [new, old])


def hw(s: dict, *args: str, cwd: Path | None = None):
    return run_cli(*args, env=s["env"], timeout=1800, **({"cwd": cwd} if cwd else {}))


def upgraded(s: dict, version: str, *extra: str) -> tuple[dict[str, str] | None, dict[str, str]]:
    """Upgrade to `version` (from the cache `catalog trust` filled, or `extra`'s mirror);
    check what it left."""
    kver = s["kver"]
    res = hw(s, "upgrade", DRIVER, "--to", version, "--kernel", kver, "--yes", *extra)
    assert res.returncode == 0, res.stderr
    return installed(s, version)


def installed(s: dict, version: str) -> tuple[dict[str, str] | None, dict[str, str]]:
    """What `modinfo -k` resolves and the module files, once `version` is installed: the
    DKMS build's module, byte for byte."""
    kver = s["kver"]
    info, files = state(kver)
    dest = f"/lib/modules/{kver}/updates/dkms/{DRIVER}.ko"
    assert info and info["version"] == version and info["filename"] == dest, info
    built = next(Path(f"/var/lib/dkms/{DRIVER}/{version}/{kver}").glob(f"*/module/{DRIVER}.ko*"))
    assert files[dest] == hashlib.sha256(built.read_bytes()).hexdigest()
    srcversion = subprocess.run(["modinfo", "-F", "srcversion", str(built)], capture_output=True,
                                text=True, check=True).stdout.strip()
    assert info["srcversion"] == srcversion and srcversion
    return info, files


def doc_block(marker: str) -> str:
    """The fenced block after `<!-- marker ... -->` in docs/catalog.md."""
    text = CATALOG_DOC.read_text()
    at = text.index(f"<!-- {marker}")
    fence = text.index("```", at)
    body = text.index("\n", fence) + 1
    return text[body:text.index("```", body)]


def doc_commands(kver: str) -> list[list[str]]:
    """docs/catalog.md's offline whole path, its lines as written (comments dropped), the
    documented kernel replaced by the one this machine has headers for."""
    lines = []
    for line in doc_block("offline-path").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            assert words[0] == "hwmgr", line
            lines.append([kver if w == DOC_KERNEL else w for w in words[1:]])
    return lines


def intel_tarball(srpm: Path, dest: Path) -> Path:
    """Intel's igb-V.tar.gz out of the SRPM that holds it (rpm2cpio | cpio), into `dest`."""
    name = f"{srpm.name.rsplit('-', 1)[0]}.tar.gz"  # igb-5.17.5-1.src.rpm -> igb-5.17.5.tar.gz
    dest.mkdir(parents=True, exist_ok=True)
    payload = subprocess.run(["rpm2cpio", str(srpm)], capture_output=True, check=True).stdout
    subprocess.run(["cpio", "-i", "--quiet", name], input=payload, cwd=dest, check=True)
    return dest / name


@pytest.mark.slow  # two DKMS builds of Intel's igb (a minute or more each)
def test_igb_vendor_story(story: dict, tmp_path: Path) -> None:
    """The release before the newest taken as Intel's own tarball (trust → upgrade through the
    tarball path), then docs/catalog.md's offline whole path verbatim for the newest (a site
    layer without URL → trust → plan → upgrade from the cache → rollback to the tarball's
    build, byte for byte), then rollback to inbox."""
    s, kver, new, old = story, story["kver"], story["new"], story["old"]
    inbox = state(kver)
    if Path(f"/boot/vmlinuz-{kver}").exists():  # the image is installed: its in-tree igb
        assert inbox[0] and inbox[0]["filename"] == (
            f"/lib/modules/{kver}/kernel/drivers/net/ethernet/intel/igb/{DRIVER}.ko"), inbox
    site = Path(s["env"]["HWMGR_SITE_CATALOG_DIR"])
    layer = json.loads(doc_block("offline-layer"))
    (doc_version,) = layer["drivers"][DRIVER]["versions"]
    assert doc_version == new, f"docs/catalog.md's offline path is for igb {doc_version}"
    assert "url" not in layer["drivers"][DRIVER]["versions"][new]["source"]
    (site / "20-igb.json").write_text(json.dumps(layer))
    if igb_predates(old, kver):
        # Intel's code of the older release cannot compile for kver: the build fails in
        # DKMS, the transaction is undone, nothing is left behind. The full story needs two
        # releases from IGB_KCOMPAT_6_1 on in HWMGR_VENDOR_DIR.
        res = hw(s, "catalog", "trust", DRIVER, old, "--file", s["srpms"][old].name, "--yes",
                 cwd=s["srpms"][old].parent)
        assert res.returncode == 0, res.stderr
        res = hw(s, "upgrade", DRIVER, "--to", old, "--kernel", kver, "--yes", "--offline",
                 "--mirror", str(vendor_dir()))
        assert res.returncode == EXIT_FAILED, res.stderr
        assert f"dkms build of {DRIVER}/{old} for kernel {kver} failed" in res.stderr
        # the build's own words survive the undo: the whole make.log is kept in the state dir
        logs = list((Path(s["env"]["HWMGR_STATE_DIR"]) / "logs").glob(
            f"*-{DRIVER}-{old}-{kver}.make.log"))
        assert len(logs) == 1 and str(logs[0]) in res.stderr, res.stderr
        assert "netif_napi_add" in logs[0].read_text(errors="replace")
        assert state(kver) == inbox
        assert not Path(f"/usr/src/{DRIVER}-{old}").exists()
        assert old not in {e.version for e in Dkms(Host("/", SubprocessRunner())).status(DRIVER)}
        pytest.xfail(f"igb {old} predates Linux 6.1 ({kver}): its kcompat has no 6.1 API "
                     f"(igb >= {IGB_KCOMPAT_6_1} has); the build failed and was undone cleanly")
    # 1. the release before the newest as Intel's own tarball (igb-V.tar.gz, the file the SRPM
    # holds): trusted from its directory, built through the tarball path, from the cache
    tarball = intel_tarball(s["srpms"][old], tmp_path / "intel")
    res = hw(s, "catalog", "trust", DRIVER, old, "--file", tarball.name, "--yes",
             cwd=tarball.parent)
    assert res.returncode == 0, res.stderr
    assert f"package:    {DRIVER}-{old} ({tarball.name}, vendor tarball)" in res.stderr
    trusted = json.loads((site / "50-trusted.json").read_text())["drivers"][DRIVER]["versions"]
    assert trusted[old]["source"]["sha256"] == hashlib.sha256(tarball.read_bytes()).hexdigest()
    first = upgraded(s, old)
    # 2. the offline whole path as docs/catalog.md writes it, for the newest, from the
    # directory holding the file: trust (keeps it in the cache), plan (changes nothing),
    # upgrade (no URL: only the cache can serve it), rollback (the tarball-built module back,
    # byte for byte)
    trust, plan, upgrade, rollback = doc_commands(kver)
    where = s["srpms"][new].parent
    res = hw(s, *trust, cwd=where)
    assert res.returncode == 0, res.stderr
    assert f"package:    {DRIVER}-{new}-1" in res.stderr
    data = s["srpms"][new].read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    trusted = json.loads((site / "50-trusted.json").read_text())["drivers"][DRIVER]["versions"]
    assert trusted[new]["source"]["sha256"] == sha
    cached = Path(s["env"]["HWMGR_CACHE_DIR"]) / "sha256" / sha / s["srpms"][new].name
    assert cached.read_bytes() == data
    res = hw(s, *plan, cwd=where)
    assert res.returncode == 0, res.stderr
    assert kver in res.stdout and new in res.stdout
    assert state(kver) == first  # a plan changes nothing
    res = hw(s, *upgrade, cwd=where)
    assert res.returncode == 0, res.stderr
    second = installed(s, new)
    assert second[0] != first[0]
    res = hw(s, *rollback, cwd=where)
    assert res.returncode == 0, res.stderr
    assert state(kver) == first
    # 3. rollback to inbox: exactly the module files (and resolution) there were before
    res = hw(s, "rollback", DRIVER, "--to", "inbox", "--yes")
    assert res.returncode == 0, res.stderr
    assert state(kver) == inbox


def _dkms_trees() -> list[str]:
    """What DKMS and its source dir hold for igb on this machine."""
    return sorted(str(p) for top in ("/usr/src", "/var/lib/dkms")
                  for p in Path(top).glob(f"{DRIVER}*"))


@pytest.mark.slow  # DKMS builds of Intel's igb (30-60 s each on a quiet machine)
def test_recipe_check_builds_each_vendor_srpm_for_the_kernels_it_supports(
        tmp_path: Path) -> None:
    """`hwmgr recipe check igb --file igb-V-1.src.rpm`, the documented example run from the
    directory that holds the file: each igb release builds for every kernel here it supports
    (the newest from its SRPM, the others from Intel's own tarball, `igb-V.tar.gz`)
    (exit 0, the module at the release's version and the kernel's vermagic); the newest
    release that predates the newest kernel is refused naming Intel's make line and the
    compiler's error (exit 1). DKMS's own trees are left as they were."""
    releases = srpms(DRIVER)
    before = _dkms_trees()
    kernels = {v: igb_kernels([v]) for v in releases}
    newest_kernel = headers_kernel()
    assert newest_kernel, "linux-headers-amd64 must be installed (make test installs it)"
    built = [v for v in newest_first(list(releases)) if kernels[v]]
    assert built, f"no igb release here builds for a kernel with headers ({newest_kernel})"
    for n, version in enumerate(built):
        args = [a for k in kernels[version] for a in ("--kernel", k)]
        path = (releases[version] if n == 0 else
                intel_tarball(releases[version], tmp_path / "intel" / version))
        res = run_cli("recipe", "check", DRIVER, "--file", path.name, *args, "--state-dir",
                      str(tmp_path / version), "--json", timeout=1800, cwd=path.parent)
        assert res.returncode == 0, res.stdout + res.stderr
        data = json.loads(res.stdout)["data"]
        assert data["version"] == version
        for k in data["kernels"]:
            (mod,) = k["modules"]
            assert (mod["file"], mod["version"]) == (f"{DRIVER}.ko", version), mod
            assert mod["vermagic"].split()[0] == k["kernel"]
        assert [k["kernel"] for k in data["kernels"]] == kernels[version]
    too_old = [v for v in newest_first(list(releases)) if igb_predates(v, newest_kernel)]
    if not too_old:
        pytest.xfail(f"every igb release here builds for {newest_kernel}: the refusal of a "
                     f"release too old for it needs one from before {IGB_KCOMPAT_6_1}")
    path = releases[too_old[0]]
    res = run_cli("recipe", "check", DRIVER, "--file", path.name, "--kernel", newest_kernel,
                  "--state-dir", str(tmp_path / "predates"), "--json", timeout=1800,
                  cwd=path.parent)
    assert res.returncode == EXIT_FAILED, res.stderr
    (k,) = json.loads(res.stdout)["data"]["kernels"]
    fail = k["failure"]
    assert re.fullmatch(rf"env make -j\d+ -C src BUILD_KERNEL={re.escape(newest_kernel)}",
                        fail["make_line"]), fail["make_line"]
    assert "error: too many arguments to function" in fail["first_error"]
    assert "netif_napi_add" in fail["first_error"]
    assert Path(fail["log"]).is_file()
    assert _dkms_trees() == before, "recipe check changed DKMS's trees"
