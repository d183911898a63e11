"""Build once, ship binaries (issue 42 item 5): `hwmgr package --binary deb --kernel K` builds
a catalog version in private DKMS trees against K's real headers, signs the module with a
site key and packages it with the real dpkg-deb; checked with dpkg-deb -I/-c, lintian,
modinfo and the catalog validator. Intel's igb 5.18.7 SRPM comes from HWMGR_VENDOR_DIR
(tests/support/vendor_env.py); the test module (tests/kmod) covers what the vendor build
need not repeat (unsigned builds, a version with '_', refusals).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import run_cli
from support.lifecycle_env import MODULE, make_bed, mok_pair
from support.vendor_env import igb_kernels, srpms

from hwmgr import cli
from hwmgr.errors import EXIT_BAD_INPUT, EXIT_NOT_FOUND
from hwmgr.host.runner import RecordingRunner, SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.binpkg import deb_name, deb_version, has_signature, rpm_version
from hwmgr.ui import context

PACKAGER = "Site Builds <builds@example.org>"
# lintian tags a site-built module package keeps, each explained in docs/rollout.md
# ("Build once, ship binaries", "lintian"); anything else fails the test
KNOWN_TAGS = {"copyright-without-copyright-notice", "initial-upload-closes-no-bugs",
              "unknown-field"}
HWMGR_FIELDS = ("Hwmgr-Driver", "Hwmgr-Driver-Version", "Hwmgr-Kernel", "Hwmgr-Modules",
                "Hwmgr-Signed", "Hwmgr-Source-Sha256")

needs_dpkg = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("dpkg-deb", "lintian", "dkms", "rpm")),
    reason="dpkg-deb, lintian, dkms and rpm are needed (make apt-test installs them)")


def sh(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          check=False, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                            "LC_ALL": "C", "HOME": "/root"})


def control_fields(deb: Path) -> dict[str, str]:
    res = sh("dpkg-deb", "-f", str(deb))
    assert res.returncode == 0, res.stderr
    fields, last = {}, ""
    for line in res.stdout.splitlines():
        if line.startswith(" "):
            fields[last] += "\n" + line
        else:
            last, _, value = line.partition(":")
            fields[last] = value.strip()
    return fields


def members(deb: Path) -> list[str]:
    res = sh("dpkg-deb", "-c", str(deb))
    assert res.returncode == 0, res.stderr
    return [line.split()[-1] for line in res.stdout.splitlines()]


def lintian_tags(deb: Path) -> list[tuple[str, str]]:
    """(severity letter, tag) for every line lintian prints."""
    res = sh("lintian", str(deb))
    found = re.findall(r"^([EWIXOP]): \S+: (\S+)", res.stdout, re.M)
    assert res.returncode == 0 or found, res.stdout + res.stderr
    return found


def extracted_ko(deb: Path, tmp: Path, kver: str, module: str) -> Path:
    dest = tmp / "x"
    assert sh("dpkg-deb", "-x", str(deb), str(dest)).returncode == 0
    return dest / "lib" / "modules" / kver / "updates" / "hwmgr" / f"{module}.ko"


def modinfo(ko: Path, field: str) -> str:
    return sh("modinfo", "-F", field, str(ko)).stdout.strip()


def machine_trees(driver: str, version: str, kver: str) -> dict[str, object]:
    """What the build host's own trees hold of this driver version (other helpers' tests may
    change the rest meanwhile): the private build must change none of it."""
    updates = Path(f"/lib/modules/{kver}/updates")
    return {
        "src": Path(f"/usr/src/{driver}-{version}").exists(),
        "dkms": Path(f"/var/lib/dkms/{driver}/{version}").exists(),
        "modules": {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
                    for p in sorted(updates.rglob(f"{driver}.ko*"))} if updates.is_dir()
        else {},
    }


# ------------------------------------------------------------------------ names (fast)
def test_debian_version_keeps_what_debian_allows() -> None:
    assert deb_version("5.18.7") == "5.18.7-1"
    assert deb_version("3.8.9_lab_broken") == "3.8.9+lab+broken-1"
    assert deb_version("07.719.90.00_lab") == "07.719.90.00+lab-1"
    assert deb_version("5.3.0-k") == "5.3.0-k-1"  # the revision makes a '-' in V legal
    assert deb_version("k5") == "0+k5-1"  # upstream_version must start with a digit
    assert rpm_version("5.3.0-k") == "5.3.0_k"


def test_debian_package_name() -> None:
    assert deb_name("bnxt_en", "6.1.0-56-amd64") == "bnxt-en-modules-6.1.0-56-amd64"
    with pytest.raises(Exception, match="cannot be part of a Debian package name"):
        deb_name("igb", "6.1.0_custom")


# ------------------------------------------------------------------------ the vendor build
@pytest.mark.slow
@needs_dpkg
def test_igb_5_18_7_as_a_signed_deb(tmp_path: Path) -> None:
    """Intel's igb 5.18.7 SRPM, obtained by hand (a site layer without URL, served from the
    vendor dir as a mirror), built for Debian 12's 6.1 headers, signed with a site key."""
    kernels = igb_kernels(["5.18.7"])  # Debian 12's 6.1 (6.1.0-56-amd64 here)
    assert kernels, "linux-headers-amd64 must be installed (make apt-test installs it)"
    kver = kernels[0]
    srpm = srpms("igb")["5.18.7"]
    data = srpm.read_bytes()
    layer = tmp_path / "igb-source.json"
    layer.write_text(json.dumps({"schema_version": 3, "drivers": {"igb": {"versions": {
        "5.18.7": {"source": {"type": "srpm", "filename": srpm.name, "size": len(data),
                              "sha256": hashlib.sha256(data).hexdigest()}}}}}}))
    key, cert, serial = mok_pair(tmp_path, "hwmgr site key igb test")
    env = {"HWMGR_STATE_DIR": str(tmp_path / "state"), "HWMGR_CACHE_DIR": str(tmp_path / "c"),
           "HWMGR_SIGN_KEY": "", "HWMGR_SIGN_CERT": ""}
    before = machine_trees("igb", "5.18.7", kver)
    out = tmp_path / "out"
    res = run_cli("package", "igb", "--version", "5.18.7", "--binary", "deb", "--kernel", kver,
                  "--out", str(out), "--site-catalog", str(layer), "--offline",
                  "--mirror", str(srpm.parent), "--sign-key", str(key), "--sign-cert",
                  str(cert), "--packager", PACKAGER, "--json", env=env, timeout=900)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)["data"]
    deb = out / f"igb-modules-{kver}_5.18.7-1_amd64.deb"
    assert Path(doc["path"]) == deb and deb.is_file()
    assert machine_trees("igb", "5.18.7", kver) == before  # private trees: the host's untouched

    fields = control_fields(deb)
    assert fields["Package"] == f"igb-modules-{kver}"
    assert fields["Version"] == "5.18.7-1" and fields["Section"] == "kernel"
    assert fields["Hwmgr-Driver-Version"] == "5.18.7" and fields["Hwmgr-Kernel"] == kver
    assert fields["Hwmgr-Signed"] == "yes" and "Depends" not in fields
    assert fields["Hwmgr-Source-Sha256"] == hashlib.sha256(data).hexdigest()
    files = [m for m in members(deb) if not m.endswith("/")]
    assert files == [f"./lib/modules/{kver}/updates/hwmgr/igb.ko",
                     f"./usr/share/doc/igb-modules-{kver}/changelog.Debian.gz",
                     f"./usr/share/doc/igb-modules-{kver}/copyright"]
    scripts = tmp_path / "ctl"
    assert sh("dpkg-deb", "-e", str(deb), str(scripts)).returncode == 0
    for name in ("postinst", "postrm"):
        assert f"depmod -a {kver}" in (scripts / name).read_text()

    tags = lintian_tags(deb)
    assert not [t for t in tags if t[0] == "E"], tags
    assert {t for _, t in tags} <= KNOWN_TAGS, tags

    ko = extracted_ko(deb, tmp_path, kver, "igb")
    assert modinfo(ko, "version") == "5.18.7"
    assert modinfo(ko, "vermagic").split()[0] == kver
    assert modinfo(ko, "signer") == "hwmgr site key igb test" and has_signature(ko.read_bytes())
    sig_key = modinfo(ko, "sig_key")
    assert int(sig_key.replace(":", ""), 16) == int(serial, 16)

    frag = Path(doc["layer"])
    assert frag == out / f"{deb.name}.catalog.json"
    pkg = json.loads(frag.read_text())["drivers"]["igb"]["versions"]["5.18.7"]["packages"]
    assert pkg == {kver: {"deb": {"file": deb.name, "size": deb.stat().st_size,
                                  "sha256": hashlib.sha256(deb.read_bytes()).hexdigest(),
                                  "signed": True}}}
    valid = run_cli("catalog", "validate", str(frag), env=env)  # over the shipped catalog
    assert valid.returncode == 0, valid.stdout + valid.stderr


# ------------------------------------------------------------------------ the test module
@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    b, srv = make_bed(tmp_path_factory.mktemp("binpkg-bed"), versions=("1.0_lab",))
    try:
        yield b
    finally:
        srv.shutdown()


def _env(bed, **extra: str) -> dict[str, str]:
    return {**bed.env, **extra}


@pytest.mark.slow
@needs_dpkg
def test_unsigned_deb_maps_the_version(bed, tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    for k, v in _env(bed, HWMGR_SIGN_KEY="", HWMGR_SIGN_CERT="").items():
        monkeypatch.setenv(k, v)
    runner = RecordingRunner(SubprocessRunner())
    monkeypatch.setattr(context, "open_host", lambda root: (Host("/", runner), None))
    rc = cli.main(["package", MODULE, "--catalog", str(bed.catalog), "--version", "1.0_lab",
                   "--binary", "deb", "--kernel", bed.kver, "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(captured.out)["data"]
    # every dkms call ran with private trees under the cache dir, never the host's own
    dkms = [c.argv for c in runner.calls if c.argv[0] == "dkms"]
    assert {c[1] for c in dkms} >= {"add", "build"}
    cache = bed.env["HWMGR_CACHE_DIR"] + "/package/"
    for argv in dkms:
        for opt in ("--sourcetree", "--dkmstree", "--installtree"):
            assert argv[argv.index(opt) + 1].startswith(cache), argv
    deb = out / f"{MODULE}-modules-{bed.kver}_1.0+lab-1_amd64.deb"
    assert Path(doc["path"]) == deb and doc["signed"] is False
    fields = control_fields(deb)
    assert fields["Version"] == "1.0+lab-1" and fields["Hwmgr-Driver-Version"] == "1.0_lab"
    assert fields["Hwmgr-Signed"] == "no"
    ko = extracted_ko(deb, tmp_path, bed.kver, MODULE)
    assert modinfo(ko, "version") == "1.0_lab"
    assert not has_signature(ko.read_bytes()) and modinfo(ko, "signer") == ""
    frag = json.loads(Path(doc["layer"]).read_text())
    entry = frag["drivers"][MODULE]["versions"]["1.0_lab"]["packages"][bed.kver]["deb"]
    assert entry["signed"] is False and entry["sha256"] == doc["sha256"]
    # a bad fragment is refused by the same validator (the schema knows the field)
    entry["sha256"] = "not-a-digest"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(frag))
    res = run_cli("catalog", "validate", "--alone", str(bad))
    assert res.returncode == EXIT_BAD_INPUT and "sha256" in res.stderr, res.stderr


@pytest.mark.slow
@needs_dpkg
def test_kernel_without_headers_is_refused_before_anything(bed, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = run_cli("package", MODULE, "--catalog", str(bed.catalog), "--version", "1.0_lab",
                  "--binary", "deb", "--kernel", "9.9.9-nosuch-amd64", "--out", str(out),
                  env=bed.env)
    assert res.returncode == EXIT_NOT_FOUND
    lines = [ln for ln in res.stderr.splitlines() if "not recommended" not in ln]
    assert len(lines) == 1 and "9.9.9-nosuch-amd64" in lines[0], res.stderr
    assert not (out.exists() and any(out.iterdir()))
    res = run_cli("package", MODULE, "--catalog", str(bed.catalog), "--version", "1.0_lab",
                  "--binary", "deb", "--out", str(out), env=bed.env)
    assert res.returncode == EXIT_BAD_INPUT and "--kernel" in res.stderr



# ------------------------------------------------------------------------ kmod RPM
RPMLINT_KNOWN = {"unstripped-binary-or-object", "no-documentation", "invalid-license"}


@pytest.mark.slow
@pytest.mark.skipif(not all(shutil.which(t) for t in ("rpmbuild", "rpmlint", "dkms")),
                    reason="rpmbuild, rpmlint and dkms are needed")
def test_kmod_rpm(bed, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = run_cli("package", MODULE, "--catalog", str(bed.catalog), "--version", "1.0_lab",
                  "--binary", "rpm", "--kernel", bed.kver, "--out", str(out), "--packager",
                  PACKAGER, "--json", env=bed.env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)["data"]
    release = "1.k" + bed.kver.replace("-", "_")
    rpm = out / f"kmod-{MODULE}-1.0_lab-{release}.x86_64.rpm"
    assert Path(doc["path"]) == rpm and doc["signed"] is True
    q = sh("rpm", "-qp", "--nosignature", "--qf", "%{NAME} %{VERSION} %{RELEASE}", str(rpm))
    assert q.stdout == f"kmod-{MODULE} 1.0_lab {release}"
    ko = f"/lib/modules/{bed.kver}/extra/{MODULE}/{MODULE}.ko"
    listed = sh("rpm", "-qpl", "--nosignature", str(rpm)).stdout.split()
    assert listed == [f"/lib/modules/{bed.kver}/extra/{MODULE}", ko]
    scripts = sh("rpm", "-qp", "--scripts", "--nosignature", str(rpm)).stdout
    post = scripts.split("postinstall scriptlet")[1].split("postuninstall scriptlet")[0]
    postun = scripts.split("postuninstall scriptlet")[1]
    assert f"printf '%s\\n' {ko} | /usr/sbin/weak-modules --add-modules" in post
    assert f"/sbin/depmod -a {bed.kver}" in post
    assert f"printf '%s\\n' {ko} | /usr/sbin/weak-modules --remove-modules" in postun
    assert '[ "$1" -eq 0 ]' in postun
    # the module inside is the signed one hwmgr built (rpm never strips it)
    x = tmp_path / "x"
    x.mkdir()
    cpio = subprocess.run(f"rpm2cpio {rpm} | cpio -idm --quiet", shell=True, cwd=x,
                          capture_output=True, check=False)
    assert cpio.returncode == 0, cpio.stderr
    inside = x / ko.lstrip("/")
    assert has_signature(inside.read_bytes()) and modinfo(inside, "version") == "1.0_lab"
    assert doc["modules"][0]["sha256"] == hashlib.sha256(inside.read_bytes()).hexdigest()
    lint = sh("rpmlint", "-r", str(Path(__file__).resolve().parents[1] / "specs" / "rpmlintrc"),
              str(rpm))
    tags = set(re.findall(r": [EW]: (\S+)", lint.stdout))
    assert not re.search(r": E: ", lint.stdout), lint.stdout
    assert tags <= RPMLINT_KNOWN, lint.stdout
    frag = json.loads(Path(doc["layer"]).read_text())
    entry = frag["drivers"][MODULE]["versions"]["1.0_lab"]["packages"][bed.kver]["rpm"]
    assert entry == {"file": rpm.name, "sha256": doc["sha256"], "size": rpm.stat().st_size,
                     "signed": True}
