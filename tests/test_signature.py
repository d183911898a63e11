"""Package signatures: rpmsign-signed test SRPMs checked by `rpmkeys --checksig` against
hwmgr's own keyring; unsigned, unknown-key and wrong-key packages are refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from lifecycle_env import MODULE, cleanup_dkms, make_bed, write_catalog
from srpmfactory import build_srpm
from support import run_cli

from hwmgr.errors import RefusedError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.signature import check_signature, keyring_path

pytestmark = pytest.mark.skipif(not shutil.which("gpg") or not shutil.which("rpmsign"),
                                reason="gpg and rpmsign are needed")
UID = "hwmgr test vendor <vendor@hwmgr.invalid>"


def _gpg(home: Path, *args: str) -> str:
    res = subprocess.run(["gpg", "--homedir", str(home), "--batch", *args],
                         capture_output=True, text=True, check=True)
    return res.stdout


@pytest.fixture(scope="module")
def vendor_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """A throw-away signing key: (GNUPGHOME, fingerprint, exported public key)."""
    home = tmp_path_factory.mktemp("gnupg")
    os.chmod(home, 0o700)
    _gpg(home, "--passphrase", "", "--quick-gen-key", UID, "rsa2048", "sign", "never")
    fpr = next(line.split(":")[9] for line in _gpg(home, "--with-colons", "--list-keys")
               .splitlines() if line.startswith("fpr:"))
    pub = home / "vendor.asc"
    pub.write_text(_gpg(home, "--armor", "--export", UID))
    yield home, fpr, pub
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)


def sign(pkg: Path, home: Path) -> Path:
    gpg = shutil.which("gpg") or "gpg"  # Debian's rpm macros name gpg2, which may be absent
    subprocess.run(["rpmsign", "--addsign", "--define", f"__gpg {gpg}",
                    "--define", "_gpg_name vendor@hwmgr.invalid",
                    "--define", f"_gpg_path {home}", str(pkg)], check=True,
                   capture_output=True)
    return pkg


def import_key(state: Path, pub: Path) -> None:
    keyring = state / "keyring"
    keyring.mkdir(parents=True, exist_ok=True)
    subprocess.run(["rpmkeys", "--dbpath", str(keyring), "--import", str(pub)], check=True)


def test_check_signature_cases(tmp_path: Path, vendor_key: tuple[Path, str, Path]) -> None:
    home, fpr, pub = vendor_key
    host = Host("/", SubprocessRunner())
    state = tmp_path / "state"
    signed = sign(build_srpm(MODULE, "1.0", tmp_path / "a"), home)
    unsigned = build_srpm(MODULE, "1.1", tmp_path / "b")
    with pytest.raises(RefusedError, match="not in hwmgr's keyring"):
        check_signature(host, signed, str(state), fpr)
    import_key(state, pub)
    assert keyring_path(str(state)) == f"{state}/keyring"
    assert fpr.lower().endswith(check_signature(host, signed, str(state), fpr))
    with pytest.raises(RefusedError, match="is not signed"):
        check_signature(host, unsigned, str(state), fpr)
    with pytest.raises(RefusedError, match="not by the catalog's key"):
        check_signature(host, signed, str(state), "0123456789abcdef0123456789abcdef01234567")


def test_upgrade_requires_the_catalog_key(tmp_path: Path,
                                          vendor_key: tuple[Path, str, Path]) -> None:
    home, fpr, pub = vendor_key
    bed, srv = make_bed(tmp_path, versions=())
    try:
        cleanup_dkms(bed.kver)
        pkg = sign(build_srpm(MODULE, "1.0", tmp_path / "served"), home)
        catalog = write_catalog(tmp_path / "signed.json", bed.url, {"1.0": pkg})
        data = json.loads(catalog.read_text())
        data["drivers"][MODULE]["versions"]["1.0"]["source"]["signing_key"] = fpr
        catalog.write_text(json.dumps(data))
        args = ("upgrade", MODULE, "--to", "1.0", "--kernel", bed.kver, "--yes",
                "--catalog", str(catalog))
        res = run_cli(*args, env=bed.env, timeout=300)  # key not imported yet
        assert res.returncode == 1 and "not in hwmgr's keyring" in res.stderr
        assert not list(Path("/usr/src").glob(f"{MODULE}-*")), "nothing installed"
        import_key(Path(bed.env["HWMGR_STATE_DIR"]), pub)
        res = run_cli(*args, env=bed.env, timeout=300)
        assert res.returncode == 0, res.stderr
        assert run_cli("rollback", MODULE, "--yes", env=bed.env).returncode == 0
    finally:
        srv.shutdown()
        cleanup_dkms(bed.kver)
