"""RPM packaging with the real tools: rpmlint on both specs, and `hwmgr package` end to end
(test SRPM over HTTP → <driver>-dkms RPM → rpm -qp / rpmlint). hwmgr's own packages are built
and checked by tests/test_packages.py (`make packages`).

The RPMs are only built and inspected, never installed on this (Debian) host.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.lifecycle_env import MODULE, make_bed, write_catalog  # noqa: E402

import hwmgr  # noqa: E402
from hwmgr import cli
from hwmgr.host.runner import RecordingRunner, SubprocessRunner  # noqa: E402
from hwmgr.host.seam import Host  # noqa: E402
from hwmgr.lifecycle.builds.dkms import render_dkms_conf  # noqa: E402
from hwmgr.lifecycle.builds.package import changelog_date, render_spec  # noqa: E402
from hwmgr.lifecycle.builds.recipe import load_recipe  # noqa: E402
from hwmgr.ui import context

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "specs"
HWMGR_SPEC = SPECS / "hwmgr.spec"
TEMPLATE = SPECS / "driver-dkms.spec.in"
RPMLINTRC = SPECS / "rpmlintrc"
VERIFY_UNIT = REPO / "contrib" / "systemd" / "hwmgr-verify.service"
KMOD = REPO / "tests" / "kmod"
SUMMARY_RE = re.compile(
    r"^\s*(\d+) packages and (\d+) specfiles checked; (\d+) errors, (\d+) warnings", re.M)
UNITDIR = "/usr/lib/systemd/system"  # the spec's fallback for a bare rpm without systemd macros

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("rpm", "rpmbuild", "rpmlint")),
    reason="rpm, rpmbuild and rpmlint are needed (make apt-test installs them)",
)
pytestmark = [pytestmark, pytest.mark.slow]  # rpmbuild runs


def sh(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          check=False, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                            "LC_ALL": "C", "HOME": "/root"})


def rpmlint(target: Path, *, rc_file: Path | None = None) -> tuple[int, int, str]:
    """Run rpmlint 2.x on one file; returns (errors, warnings, output) from its summary line."""
    argv = ["rpmlint", *(["-r", str(rc_file)] if rc_file else []), str(target)]
    res = sh(*argv)
    out = res.stdout + res.stderr
    mo = SUMMARY_RE.search(out)
    assert mo, f"rpmlint did not run or printed no summary: {out}"
    packages, specs, errors, warnings = map(int, mo.groups())
    is_spec = target.suffix in (".spec", ".in")
    assert (packages, specs) == ((0, 1) if is_spec else (1, 0)), out
    assert (res.returncode == 0) == (errors == 0), out  # rpmlint exits non-zero on errors
    return errors, warnings, out


def query(rpm: Path, *args: str) -> str:
    res = sh("rpm", "-qp", "--nosignature", *args, str(rpm))
    assert res.returncode == 0, res.stderr
    return res.stdout


# ------------------------------------------------------------------------ hwmgr.spec
def test_spec_version_is_the_package_version() -> None:
    mo = re.search(r"^Version:\s*(\S+)\s*$", HWMGR_SPEC.read_text(), re.M)
    assert mo and mo.group(1) == hwmgr.__version__


def test_rpmlint_hwmgr_spec_has_no_errors(tmp_path: Path) -> None:
    """Clean but for the filters in specs/hwmgr.rpmlintrc (rpmlint reads it beside the spec),
    each with its reason: the kernel-install plugin dir is /usr/lib/kernel/install.d and pure
    Python's site-packages /usr/lib/python3.9 on every architecture. Without them, those lines
    are the only errors."""
    errors, _, out = rpmlint(HWMGR_SPEC)
    assert errors == 0 and "hwmgr.rpmlintrc" in out, out
    alone = tmp_path / "hwmgr.spec"
    alone.write_text(HWMGR_SPEC.read_text())
    unfiltered, _, out = rpmlint(alone)
    lines = [ln for ln in out.splitlines() if " E: " in ln]
    assert unfiltered == len(lines) == 4, out
    assert all("hardcoded-library-path in %{_prefix}/lib/kernel/install.d" in ln
               or "hardcoded-library-path in /usr/lib/python3.9/site-packages" in ln
               for ln in lines), out


def test_rpmlint_counts_errors_in_a_broken_spec(tmp_path: Path) -> None:
    """The summary parsing above must be able to fail: a spec without License is an error."""
    broken = tmp_path / "broken.spec"
    broken.write_text(re.sub(r"^License:.*\n", "", HWMGR_SPEC.read_text(), flags=re.M))
    errors, _, out = rpmlint(broken)
    assert errors >= 1, out


# ------------------------------------------------------------------------ the DKMS template
def test_rpmlint_rendered_template_has_no_errors(tmp_path: Path) -> None:
    values = {
        "@DRIVER@": "be2net", "@VERSION@": "10.2.470.14", "@LICENSE@": "GPL-2.0-only",
        "@URL@": "https://example.invalid/be2net", "@DATE@": changelog_date(),
        "@DESCRIPTION@": "The be2net driver as a DKMS source tree.",
        "@PACKAGER@": "hwmgr <root@localhost>", "@CHANGELOG@": "Wrapped by hwmgr",
    }
    spec = tmp_path / "be2net-dkms.spec"
    spec.write_text(render_spec(TEMPLATE.read_text(), values))
    errors, _, out = rpmlint(spec)
    assert errors == 0, out


# ------------------------------------------------------------------------ hwmgr package
@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory):
    b, srv = make_bed(tmp_path_factory.mktemp("package-bed"), versions=("1.0",))
    try:
        yield b
    finally:
        srv.shutdown()


def _package(bed, monkeypatch, capsys, *args: str) -> tuple[int, dict, list[tuple[str, ...]]]:
    """Run the verb in-process on the live host; also return every command it ran."""
    for k, v in bed.env.items():
        monkeypatch.setenv(k, v)
    runner = RecordingRunner(SubprocessRunner())
    # the run context opens --root through its own name for it (hwmgr.ui.context)
    monkeypatch.setattr(context, "open_host", lambda root: (Host("/", runner), None))
    rc = cli.main(["package", MODULE, "--catalog", str(bed.catalog), "--json", *args])
    return rc, json.loads(capsys.readouterr().out), [c.argv for c in runner.calls]


def test_package_end_to_end(bed, tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    rc, doc, calls = _package(bed, monkeypatch, capsys, "--to", "1.0", "--out", str(out),
                       "--keep-spec")
    assert rc == 0, doc
    data = doc["data"]
    rpm = out / f"{MODULE}-dkms-1.0-1.noarch.rpm"
    assert Path(data["path"]) == rpm.resolve() and rpm.is_file()
    assert data["sha256"] == hashlib.sha256(rpm.read_bytes()).hexdigest()
    assert data["source"]["sha256"] == hashlib.sha256(bed.srpms["1.0"].read_bytes()).hexdigest()

    head = query(rpm, "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE}")
    assert head == f"{MODULE}-dkms 1.0 1 noarch GPL-2.0-only"  # License from the vendor SRPM
    digests = dict(line.split()[::-1] for line in
                   query(rpm, "--qf", "[%{FILEDIGESTS} %{FILENAMES}\n]").splitlines()
                   if len(line.split()) == 2)
    src = f"/usr/src/{MODULE}-1.0"
    assert {f"{src}/dkms.conf", f"{src}/{MODULE}.c", f"{src}/Makefile",
            f"{src}/version.h"} <= set(digests)
    conf = render_dkms_conf(load_recipe(MODULE), "1.0")
    assert digests[f"{src}/dkms.conf"] == hashlib.sha256(conf.encode()).hexdigest()
    c_src = (KMOD / "hwmgrtest.c").read_bytes()
    assert digests[f"{src}/{MODULE}.c"] == hashlib.sha256(c_src).hexdigest()

    scripts = query(rpm, "--scripts")
    post = scripts.split("postinstall scriptlet")[1].split("preuninstall scriptlet")[0]
    preun = scripts.split("preuninstall scriptlet")[1]
    assert f"dkms add -m {MODULE} -v 1.0" in post
    assert f"dkms build -m {MODULE} -v 1.0" in post
    assert f"dkms install -m {MODULE} -v 1.0" in post
    assert re.search(rf"dkms remove -m {MODULE} -v 1\.0 .*--all", preun)
    assert "dkms" in query(rpm, "-R").split()

    errors, _, lint = rpmlint(rpm, rc_file=RPMLINTRC)
    assert errors == 0, lint
    spec = out / f"{MODULE}-dkms-1.0.spec"
    assert Path(data["spec"]) == spec.resolve()
    errors, _, lint = rpmlint(spec)
    assert errors == 0, lint

    # packaging never touches this host's DKMS: it only runs rpm (unpack, query) and rpmbuild
    assert calls and {c[0] for c in calls} == {"rpm", "rpmbuild"}, calls
    assert not any(c[:2] == ("rpm", "-i") and "--dbpath" not in c for c in calls)
    work = Path(bed.env["HWMGR_CACHE_DIR"]) / "package"
    assert not any(work.iterdir())  # the temp work dir is gone


def test_package_unknown_version(bed, tmp_path: Path, monkeypatch, capsys) -> None:
    rc, doc, _ = _package(bed, monkeypatch, capsys, "--to", "9.9", "--out", str(tmp_path))
    assert rc == 3 and doc["status"] == "error"
    assert "9.9 is not in the catalog" in doc["errors"][0]
    assert not list(tmp_path.glob("*.rpm"))


def test_package_refuses_known_bad(bed, tmp_path: Path, monkeypatch, capsys) -> None:
    cat = write_catalog(tmp_path / "bad.json", bed.url, bed.srpms,
                        **{"1.0": {"status": "known-bad", "reason": "drops links"}})
    monkeypatch.setattr(bed, "catalog", cat)
    rc, doc, _ = _package(bed, monkeypatch, capsys, "--to", "1.0", "--out", str(tmp_path))
    assert rc == 9 and "known-bad: drops links" in doc["errors"][0]
    assert not list(tmp_path.glob("*.rpm"))


def test_package_offline_miss(bed, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(bed.env, "HWMGR_CACHE_DIR", str(tmp_path / "empty-cache"))
    rc, doc, _ = _package(bed, monkeypatch, capsys, "--to", "1.0", "--out", str(tmp_path),
                       "--offline")
    assert rc == 3 and doc["errors"][0].startswith("offline:")


def test_package_fetches_through_the_site_mirror(bed, tmp_path: Path, monkeypatch,
                                                  capsys) -> None:
    """No internet: the vendor URL is dead, the site config names an HTTP mirror. `package`
    takes the same path as `upgrade` (it used to take only a --mirror directory)."""
    cat = write_catalog(tmp_path / "vendor-gone.json", "http://127.0.0.1:9/vendor", bed.srpms)
    monkeypatch.setattr(bed, "catalog", cat)
    site = tmp_path / "hwmgr.json"
    site.write_text(json.dumps({"mirror": bed.url}))
    monkeypatch.setitem(bed.env, "HWMGR_CONFIG", str(site))
    monkeypatch.setitem(bed.env, "HWMGR_CACHE_DIR", str(tmp_path / "empty-cache"))
    out = tmp_path / "out"
    rc, doc, _ = _package(bed, monkeypatch, capsys, "--to", "1.0", "--out", str(out))
    assert rc == 0, doc
    src = doc["data"]["source"]
    assert src["origin"] == "mirror"
    assert src["sha256"] == hashlib.sha256(bed.srpms["1.0"].read_bytes()).hexdigest()
    assert (out / f"{MODULE}-dkms-1.0-1.noarch.rpm").is_file()
    # and without the site mirror the dead vendor URL is the answer
    (tmp_path / "plain.json").write_text("{}")
    monkeypatch.setitem(bed.env, "HWMGR_CONFIG", str(tmp_path / "plain.json"))
    monkeypatch.setitem(bed.env, "HWMGR_CACHE_DIR", str(tmp_path / "empty-cache-2"))
    rc, doc, _ = _package(bed, monkeypatch, capsys, "--to", "1.0", "--out", str(tmp_path / "o2"))
    assert rc != 0 and "127.0.0.1:9" in doc["errors"][0]


CAN_UNSHARE = (shutil.which("unshare") is not None and shutil.which("dkms") is not None
               and shutil.which("rpmspec") is not None and hasattr(os, "geteuid")
               and os.geteuid() == 0)


def _post_scriptlet(tmp_path: Path, driver: str, version: str) -> str:
    """The %post of the rendered template, macros expanded by rpmspec as rpmbuild would."""
    values = {
        "@DRIVER@": driver, "@VERSION@": version, "@LICENSE@": "GPL-2.0-only",
        "@URL@": "https://example.invalid/", "@DATE@": changelog_date(),
        "@DESCRIPTION@": "A module whose build fails.", "@PACKAGER@": "hwmgr <root@localhost>",
        "@CHANGELOG@": "Wrapped by hwmgr",
    }
    spec = tmp_path / f"{driver}-dkms.spec"
    spec.write_text(render_spec(TEMPLATE.read_text(), values))
    parsed = subprocess.run(["rpmspec", "-P", str(spec)], capture_output=True, text=True,
                            check=True, timeout=60).stdout
    return parsed.split("\n%post\n", 1)[1].split("\n%preun", 1)[0]


@pytest.mark.skipif(not CAN_UNSHARE, reason="needs root, unshare, dkms and rpmspec")
def test_post_fails_the_install_when_the_dkms_build_fails(tmp_path: Path) -> None:
    """`hwmgr package`'s %post used to end every dkms command with `|| :`, so `yum install`
    succeeded with no module. Run the real %post with the real dkms, in a private mount
    namespace (tmpfs over /var/lib/dkms and /usr/src: this host's DKMS is never touched), on
    a source tree whose build fails: the scriptlet must fail."""
    post = _post_scriptlet(tmp_path, "h28fail", "1.0")
    assert "|| :" not in post
    tree = tmp_path / "h28fail-1.0"
    tree.mkdir()
    (tree / "dkms.conf").write_text(
        'PACKAGE_NAME="h28fail"\nPACKAGE_VERSION="1.0"\nBUILT_MODULE_NAME[0]="h28fail"\n'
        'DEST_MODULE_LOCATION[0]="/extra"\nMAKE[0]="false"\nAUTOINSTALL="no"\n')
    (tmp_path / "post.sh").write_text(post)
    script = (f"mount -t tmpfs none /var/lib/dkms && mount -t tmpfs none /usr/src && "
              f"cp -r {tree} /usr/src/ && sh {tmp_path / 'post.sh'}; rc=$?; "
              "dkms status h28fail; exit $rc")
    res = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                         text=True, timeout=300, check=False)
    assert res.returncode != 0, res.stdout + res.stderr
    assert "h28fail/1.0: added" in res.stdout, res.stdout + res.stderr  # add did run


def test_package_a_vendor_tarball_without_url(bed, tmp_path: Path, monkeypatch,
                                              capsys) -> None:
    """A source that is the vendor's tarball alone, obtained by hand (no URL; in the cache,
    where `catalog trust --file` keeps it): wrapped without rpm ever unpacking an SRPM, and
    without an URL tag (rpmbuild refuses an empty one)."""
    name = f"{MODULE}-1.0.tar.gz"
    payload = subprocess.run(["rpm2cpio", str(bed.srpms["1.0"])], capture_output=True,
                             check=True).stdout
    subprocess.run(["cpio", "-i", "--quiet", name], input=payload, cwd=tmp_path, check=True)
    data = (tmp_path / name).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    doc = json.loads(bed.catalog.read_text())
    doc["drivers"][MODULE]["versions"]["1.0"]["source"] = {
        "type": "tarball", "filename": name, "sha256": sha, "size": len(data)}
    cat = tmp_path / "by-hand.json"
    cat.write_text(json.dumps(doc))
    monkeypatch.setattr(bed, "catalog", cat)
    cache = tmp_path / "cache"
    (cache / "sha256" / sha).mkdir(parents=True)
    (cache / "sha256" / sha / name).write_bytes(data)
    monkeypatch.setitem(bed.env, "HWMGR_CACHE_DIR", str(cache))
    out = tmp_path / "out"
    rc, got, calls = _package(bed, monkeypatch, capsys, "--to", "1.0", "--out", str(out))
    assert rc == 0, got
    assert got["data"]["source"]["origin"] == "cache"
    assert {c[0] for c in calls} == {"rpmbuild"}, calls  # no SRPM: nothing for rpm to unpack
    rpm = out / f"{MODULE}-dkms-1.0-1.noarch.rpm"
    assert query(rpm, "--qf", "%{NAME} %{URL}") == f"{MODULE}-dkms (none)"
    src = f"/usr/src/{MODULE}-1.0"
    assert f"{src}/{MODULE}.c" in query(rpm, "-l").split()


def test_a_failing_rpmbuild_is_exit_1_and_leaves_nothing(bed, tmp_path: Path, monkeypatch,
                                                         capsys) -> None:
    """A site's rpm macros that break the payload (a compressor rpm does not know) make the
    real rpmbuild fail: exit 1 naming it, no RPM written, the work dir gone."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".rpmmacros").write_text("%_binary_payload w9.nosuchcompressor\n")
    monkeypatch.setenv("HOME", str(home))
    out = tmp_path / "out"
    rc, doc, _ = _package(bed, monkeypatch, capsys, "--to", "1.0", "--out", str(out))
    assert rc == 1 and doc["status"] == "error", doc
    assert doc["errors"][0].startswith(f"rpmbuild of {MODULE}-dkms 1.0 failed"), doc["errors"]
    assert not list(out.glob("*.rpm"))
    work = Path(bed.env["HWMGR_CACHE_DIR"]) / "package"
    assert not any(work.iterdir())
