"""`hwmgr catalog trust` of signed SRPMs with real gpg, rpmsign and rpmkeys: the key ID is
shown, verified with hwmgr's keyring and recorded; `fetch` then checks it. A key other than
the pinned one, a corrupt signature, an unknown key, and an unsigned package where a
signature is required are each refused (exit 9, one line) with nothing changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterator

import pytest
from srpmfactory import build_be2net_srpm, corrupt_header_signature
from support import run_cli
from vendorkey import VendorKey, forget, import_key, make_key, sign

pytestmark = pytest.mark.skipif(not shutil.which("gpg") or not shutil.which("rpmsign"),
                                reason="gpg and rpmsign are needed")
DRIVER, VERSION = "be2net", "10.2.470.14"
SOURCE = f"$.drivers.{DRIVER}.versions['{VERSION}'].source"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, VendorKey]]:
    """X signs the packages; Y is another vendor's key (ed25519: rpm 4.18 checks EdDSA)."""
    tmp = tmp_path_factory.mktemp("vendor-keys")
    made = {"x": make_key(tmp / "x", "x@vendor.invalid"),
            "y": make_key(tmp / "y", "y@vendor.invalid", "ed25519")}
    yield made
    for key in made.values():
        forget(key)


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, VendorKey]
             ) -> dict[str, Path]:
    """The vendor SRPM unsigned, signed by X, signed by Y, and X-signed with a corrupt MPI."""
    tmp = tmp_path_factory.mktemp("vendor-pkgs")
    unsigned = build_be2net_srpm(tmp / "unsigned")
    out = {"unsigned": unsigned}
    for name in ("x", "y"):
        (tmp / name).mkdir()
        out[name] = sign(Path(shutil.copy(unsigned, tmp / name / unsigned.name)), keys[name])
    out["corrupt"] = corrupt_header_signature(out["x"], tmp / "corrupt" / unsigned.name)
    return out


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HWMGR_SITE_CATALOG_DIR": str(tmp_path / "catalog.d"),
            "HWMGR_STATE_DIR": str(tmp_path / "state"),
            "HWMGR_CACHE_DIR": str(tmp_path / "cache"), "HWMGR_CATALOG_DIR": ""}


def tree(d: Path) -> dict[str, bytes]:
    """Every file under `d` with its bytes (empty when `d` does not exist); an rpmdb's
    `-shm` (SQLite's shared-memory index, rewritten by any reader) is left out."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and not p.name.endswith("-shm")}


def trust(pkg: Path, env: dict[str, str], *extra: str):
    return run_cli("catalog", "trust", DRIVER, VERSION, "--file", str(pkg), "--yes", *extra,
                   env=env)


def pin(env: dict[str, str], key: str, name: str = "10-pin.json") -> Path:
    """A site layer that requires `key` for the be2net version (written by hand)."""
    site = Path(env["HWMGR_SITE_CATALOG_DIR"])
    site.mkdir(parents=True, exist_ok=True)
    layer = {"schema_version": 1, "drivers": {DRIVER: {"versions": {VERSION: {
        "source": {"signing_key": key}}}}}}
    (site / name).write_text(json.dumps(layer))
    return site / name


def recorded_source(env: dict[str, str]) -> dict:
    doc = json.loads((Path(env["HWMGR_SITE_CATALOG_DIR"]) / "50-trusted.json").read_text())
    return doc["drivers"][DRIVER]["versions"][VERSION]["source"]


def test_signed_package_shown_recorded_then_checked_by_fetch(
        env: dict[str, str], keys: dict[str, VendorKey], packages: dict[str, Path],
        tmp_path: Path) -> None:
    x, y = keys["x"], keys["y"]
    state = Path(env["HWMGR_STATE_DIR"])
    import_key(state, x)
    res = trust(packages["x"], env)
    assert res.returncode == 0, res.stderr
    assert f"signed by:  {x.key_id}\n" in res.stderr
    assert f"signing key {x.key_id}" in res.stdout
    src = recorded_source(env)
    assert src["signing_key"] == x.key_id and x.fingerprint.lower().endswith(src["signing_key"])
    assert src["sha256"] and src["size"] == packages["x"].stat().st_size
    eff = run_cli("catalog", "show", DRIVER, "--effective", "--json", env=env)
    rows = {r["path"]: r for r in json.loads(eff.stdout)["data"]["effective"]}
    assert rows[f"{SOURCE}.signing_key"]["value"] == x.key_id
    # fetch checks the recorded key: from a mirror dir, then from the cache with a keyring
    # that no longer holds X
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    shutil.copy(packages["x"], mirror)
    args = ("fetch", DRIVER, "--to", VERSION, "--offline", "--mirror", str(mirror), "--json")
    res = run_cli(*args, env=env)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)["data"]
    assert data["signed_by"] == x.key_id and data["origin"] == "mirror"
    shutil.rmtree(state / "keyring")
    import_key(state, y)
    res = run_cli(*args, env=env)
    assert res.returncode == 9, res.stderr
    assert f"key {x.key_id[-8:]} is not in hwmgr's keyring" in res.stderr


def test_pinned_key_is_kept_as_written(env: dict[str, str], keys: dict[str, VendorKey],
                                       packages: dict[str, Path]) -> None:
    x = keys["x"]
    spaced = " ".join(x.fingerprint[i:i + 4] for i in range(0, 40, 4))  # as gpg prints it
    pin(env, spaced)
    import_key(Path(env["HWMGR_STATE_DIR"]), x)
    res = trust(packages["x"], env)
    assert res.returncode == 0, res.stderr
    assert recorded_source(env)["signing_key"] == spaced


def test_unsigned_package_recorded_without_key(env: dict[str, str],
                                                packages: dict[str, Path]) -> None:
    res = trust(packages["unsigned"], env)
    assert res.returncode == 0, res.stderr
    assert "signed by:  (unsigned)" in res.stderr
    assert "signing_key" not in recorded_source(env)


CASES = {
    # case: (package, key pinned in the site layer, key imported, extra args, reason)
    "other-key-than-pinned": ("y", "x", "y", (), "signed by key {y}, but the catalog "
                              "requires key {X} (pinned for be2net 10.2.470.14 in {pin})"),
    "corrupt-signature": ("corrupt", None, "x", (), "signature by key {x8} is BAD"),
    "unknown-key": ("x", None, None, (), "key {x} is not in hwmgr's keyring"),
    "unsigned-but-required": ("unsigned", None, "x", ("--require-signature",),
                              "not signed, and --require-signature was given"),
    "unsigned-but-pinned": ("unsigned", "x", "x", (), "not signed, but the catalog requires "
                            "a signature by key {X}"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refusals_change_nothing(case: str, env: dict[str, str], keys: dict[str, VendorKey],
                                 packages: dict[str, Path], tmp_path: Path) -> None:
    pkg_name, pinned, imported, extra, why = CASES[case]
    pin_file = pin(env, keys[pinned].fingerprint) if pinned else None
    state = Path(env["HWMGR_STATE_DIR"])
    if imported:
        import_key(state, keys[imported])
    before = tree(tmp_path)
    res = trust(packages[pkg_name], env, *extra)
    assert res.returncode == 9, res.stderr
    reason = why.format(x=keys["x"].key_id, x8=keys["x"].key_id[-8:], y=keys["y"].key_id,
                        X=keys["x"].fingerprint, pin=pin_file)
    line = res.stderr.strip()
    assert "\n" not in line and line.endswith("; not recorded"), line
    assert f"{packages[pkg_name].name}: " in line and reason in line, line
    assert tree(tmp_path) == before  # site layers, keyring, state: byte for byte
    assert imported or not (state / "keyring").exists()  # rpmkeys did not create it


def test_signing_key_must_be_a_key_id(env: dict[str, str]) -> None:
    layer = pin(env, "https://vendor.invalid/key.asc")
    res = run_cli("catalog", "show", DRIVER, env=env)
    assert res.returncode == 8, res.stderr
    assert str(layer) in res.stderr and "signing_key" in res.stderr
