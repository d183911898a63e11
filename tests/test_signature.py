"""Package signatures: rpmsign-signed test SRPMs checked by `rpmkeys --checksig` against
hwmgr's own keyring; unsigned, unknown-key and wrong-key packages are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterator

import pytest
from support import run_cli
from support.lifecycle_env import MODULE, cleanup_dkms, make_bed, write_catalog
from support.srpmfactory import build_srpm, corrupt_header_signature
from support.vendorkey import VendorKey, forget, import_key, make_key, sign

from hwmgr.errors import BadInputError, RefusedError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.source.signature import check_signature, header_key_id, keyring_path, same_key

pytestmark = pytest.mark.skipif(not shutil.which("gpg") or not shutil.which("rpmsign"),
                                reason="gpg and rpmsign are needed")
pytestmark = [pytestmark, pytest.mark.slow]  # upgrades built with DKMS


@pytest.fixture(scope="module")
def vendor_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VendorKey]:
    """A throw-away signing key in its own GNUPGHOME."""
    key = make_key(tmp_path_factory.mktemp("gnupg") / "home", "vendor@hwmgr.invalid")
    yield key
    forget(key)


def test_check_signature_cases(tmp_path: Path, vendor_key: VendorKey) -> None:
    fpr = vendor_key.fingerprint
    host = Host("/", SubprocessRunner())
    state = tmp_path / "state"
    signed = sign(build_srpm(MODULE, "1.0", tmp_path / "a"), vendor_key)
    unsigned = build_srpm(MODULE, "1.1", tmp_path / "b")
    assert header_key_id(host, signed) == vendor_key.key_id
    assert header_key_id(host, unsigned) is None
    with pytest.raises(RefusedError, match="not in hwmgr's keyring"):
        check_signature(host, signed, str(state), fpr)
    assert not state.exists(), "a missing keyring is not created by the check"
    import_key(state, vendor_key)
    assert keyring_path(str(state)) == f"{state}/keyring"
    assert check_signature(host, signed, str(state), fpr) == vendor_key.key_id
    assert check_signature(host, signed, str(state), vendor_key.key_id[-8:].upper())
    bad = corrupt_header_signature(signed, tmp_path / "c" / signed.name)
    with pytest.raises(RefusedError, match=r"signature by key \w+ is BAD"):
        check_signature(host, bad, str(state), fpr)
    with pytest.raises(RefusedError, match="is not signed"):
        check_signature(host, unsigned, str(state), fpr)
    with pytest.raises(RefusedError, match="not by the catalog's key"):
        check_signature(host, signed, str(state), "0123456789abcdef0123456789abcdef01234567")


def test_same_key_and_fingerprint_spelling() -> None:
    assert same_key("0x9747 F33E 2E5B 3B1F F21B  7E9A 64FA E4C5 2BE0 ACEE", "64fae4c52be0acee")
    assert same_key("2BE0ACEE", "9747f33e2e5b3b1ff21b7e9a64fae4c52be0acee")
    assert not same_key("2be0acef", "64fae4c52be0acee")
    with pytest.raises(BadInputError, match="signing_key 'https://x' is not a hex key"):
        same_key("https://x", "2be0acee")


def test_upgrade_requires_the_catalog_key(tmp_path: Path, vendor_key: VendorKey) -> None:
    fpr = vendor_key.fingerprint
    bed, srv = make_bed(tmp_path, versions=())
    try:
        cleanup_dkms(bed.kver)
        pkg = sign(build_srpm(MODULE, "1.0", tmp_path / "served"), vendor_key)
        catalog = write_catalog(tmp_path / "signed.json", bed.url, {"1.0": pkg})
        data = json.loads(catalog.read_text())
        data["drivers"][MODULE]["versions"]["1.0"]["source"]["signing_key"] = fpr
        catalog.write_text(json.dumps(data))
        args = ("upgrade", MODULE, "--to", "1.0", "--kernel", bed.kver, "--yes",
                "--catalog", str(catalog))
        res = run_cli(*args, env=bed.env, timeout=300)  # key not imported yet
        assert res.returncode == 1 and "not in hwmgr's keyring" in res.stderr
        assert not list(Path("/usr/src").glob(f"{MODULE}-*")), "nothing installed"
        import_key(Path(bed.env["HWMGR_STATE_DIR"]), vendor_key)
        res = run_cli(*args, env=bed.env, timeout=300)
        assert res.returncode == 0, res.stderr
        assert run_cli("rollback", MODULE, "--yes", env=bed.env).returncode == 0
    finally:
        srv.shutdown()
        cleanup_dkms(bed.kver)
