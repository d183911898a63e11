"""`hwmgr catalog trust` of signed SRPMs with real gpg, rpmsign and rpmkeys: the key ID is
shown, verified with hwmgr's keyring and recorded; `fetch` then checks it. A key other than
the pinned one, a corrupt signature, an unknown key, and an unsigned package where a
signature is required are each refused (exit 9, one line) with nothing changed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest
from srpmfactory import build_be2net_srpm, corrupt_header_signature
from support import run_cli
from vendorkey import VendorKey, forget, gpg, import_key, make_key, sign

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
    # trust kept the file in the cache, where fetch looks first (issue 39); taken out here,
    # fetch checks the recorded key: from a mirror dir, then from the cache with a keyring
    # that no longer holds X
    kept = tmp_path / "cache" / "sha256" / src["sha256"] / packages["x"].name
    assert kept.read_bytes() == packages["x"].read_bytes()
    shutil.rmtree(tmp_path / "cache" / "sha256")
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


@pytest.mark.slow  # a real download or gpg/collector run of a few seconds: the slow lane
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


# --------------------------------------------------------------------------- --key KEYFILE

def pubkeys(state: Path) -> list[str]:
    """The gpg-pubkey entries in hwmgr's keyring (read from a copy: rpm writes to a db it
    opens, and would create a missing one)."""
    ring = state / "keyring"
    if not ring.exists():
        return []
    copy = state.parent / "ring-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(ring, copy)
    res = subprocess.run(["rpm", "--dbpath", str(copy), "-qa", "gpg-pubkey"],
                         capture_output=True, text=True, check=True, timeout=120)
    shutil.rmtree(copy)
    return sorted(res.stdout.split())


def rpm_name(key: VendorKey) -> str:
    return f"gpg-pubkey-{key.key_id[-8:]}-"


def no_workspace_left(state: Path) -> bool:
    return not state.exists() or not list(state.glob(".trust-key-*"))


@pytest.mark.parametrize("form", ["armored", "binary"])
def test_key_shown_imported_recorded_then_fetch_verifies(
        form: str, env: dict[str, str], keys: dict[str, VendorKey], packages: dict[str, Path],
        tmp_path: Path) -> None:
    x = keys["x"]
    state = Path(env["HWMGR_STATE_DIR"])
    keyfile = x.public
    if form == "binary":  # rpm imports armored keys only: hwmgr converts it
        keyfile = tmp_path / "vendor.gpg"
        keyfile.write_bytes(subprocess.run(
            ["gpg", "--homedir", str(x.home), "--batch", "--export", x.fingerprint],
            capture_output=True, check=True, timeout=120).stdout)
    res = trust(packages["x"], env, "--key", str(keyfile))
    assert res.returncode == 0, res.stderr
    fpr = " ".join(x.fingerprint[i:i + 4] for i in range(0, 40, 4))
    for line in (f"signed by:  {x.key_id}", f"key file:   {keyfile}",
                 f"key:        {fpr} (key ID {x.key_id})",
                 f"user ID:    test vendor <{x.email}>",
                 f"keyring:    to be imported into {state / 'keyring'}"):
        assert line + "\n" in res.stderr, res.stderr
    assert f"imported key {x.key_id} into {state / 'keyring'}; " in res.stdout
    assert recorded_source(env)["signing_key"] == x.key_id
    [entry] = pubkeys(state)
    assert entry.startswith(rpm_name(x))
    assert no_workspace_left(state)
    # fetch verifies the recorded key with the keyring --key filled
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    shutil.copy(packages["x"], mirror)
    res = run_cli("fetch", DRIVER, "--to", VERSION, "--offline", "--mirror", str(mirror),
                  "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["data"]["signed_by"] == x.key_id


def test_key_already_in_keyring_is_not_imported_again(
        env: dict[str, str], keys: dict[str, VendorKey], packages: dict[str, Path]) -> None:
    """Also the rerun after a crash between the import and the record: it completes."""
    x, y = keys["x"], keys["y"]
    state = Path(env["HWMGR_STATE_DIR"])
    import_key(state, y)
    import_key(state, x)
    before = tree(state / "keyring")
    res = run_cli("catalog", "trust", DRIVER, VERSION, "--file", str(packages["x"]), "--key",
                  str(x.public), "--yes", "--json", env=env)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)["data"]
    assert data["key_imported"] is False and data["key"]["in_keyring"] is True
    assert data["recorded"] is True and recorded_source(env)["signing_key"] == x.key_id
    res = trust(packages["x"], env, "--key", str(x.public))
    assert res.returncode == 0, res.stderr
    assert f"keyring:    already in {state / 'keyring'}\n" in res.stderr
    assert f"key {x.key_id} already in {state / 'keyring'}, not imported again" in res.stdout
    assert tree(state / "keyring") == before
    assert len([k for k in pubkeys(state) if k.startswith(rpm_name(x))]) == 1


KEY_REFUSALS = {
    # case: (package, key file, reason)
    "wrong-key": ("x", "y", "signed by key {x}, but {keyfile} holds key {y}"),
    "unsigned": ("unsigned", "x", "not signed, but --key {keyfile} was given"),
    "corrupt-signature": ("corrupt", "x", "signature by key {x8} is BAD"),
}


@pytest.mark.parametrize("ring", ["no-keyring", "keyring"])
@pytest.mark.parametrize("case", sorted(KEY_REFUSALS))
def test_key_refusals_change_nothing(case: str, ring: str, env: dict[str, str],
                                     keys: dict[str, VendorKey], packages: dict[str, Path],
                                     tmp_path: Path) -> None:
    pkg_name, key_name, why = KEY_REFUSALS[case]
    state = Path(env["HWMGR_STATE_DIR"])
    if ring == "keyring":
        import_key(state, keys["y"] if key_name == "x" else keys["x"])
    before = tree(tmp_path)
    keyfile = keys[key_name].public
    res = trust(packages[pkg_name], env, "--key", str(keyfile))
    assert res.returncode == 9, res.stderr
    line = res.stderr.strip()
    assert "\n" not in line and line.endswith("; not recorded, no key imported"), line
    reason = why.format(x=keys["x"].key_id, x8=keys["x"].key_id[-8:], y=keys["y"].key_id,
                        keyfile=keyfile)
    assert f"{packages[pkg_name].name}: " in line and reason in line, line
    assert tree(tmp_path) == before
    assert state.exists() == (ring == "keyring") and no_workspace_left(state)


def bad_key_file(case: str, tmp: Path, keys: dict[str, VendorKey]) -> Path:
    """A key file that is not one public key."""
    path = tmp / f"bad-{case}.asc"
    if case == "garbage":
        path.write_bytes(b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnot base64 \x1b[31m\n"
                         b"-----END PGP PUBLIC KEY BLOCK-----\n")
    elif case == "binary-garbage":
        path.write_bytes(bytes(range(256)) * 4)
    elif case == "private":
        x = keys["x"]
        path.write_text(gpg(x.home, "--armor", "--export-secret-keys", x.fingerprint))
    elif case == "empty":
        path.write_bytes(b"")
    elif case == "directory":
        path.mkdir()
    elif case == "fifo":
        os.mkfifo(path)
    elif case == "two-keys":
        path.write_text(keys["x"].public.read_text() + keys["y"].public.read_text())
    return path


BAD_KEYS = {"garbage": "not an OpenPGP public key", "binary-garbage": "not an OpenPGP public key",
            "private": "is a private (secret) key", "empty": "is empty",
            "directory": "is a directory", "fifo": "is a FIFO", "two-keys": "holds 2 public keys"}


@pytest.mark.parametrize("case", sorted(BAD_KEYS))
def test_bad_key_files_exit_8_change_nothing(case: str, env: dict[str, str],
                                             keys: dict[str, VendorKey],
                                             packages: dict[str, Path], tmp_path: Path) -> None:
    state = Path(env["HWMGR_STATE_DIR"])
    import_key(state, keys["y"])
    (tmp_path / "keys").mkdir()
    keyfile = bad_key_file(case, tmp_path / "keys", keys)
    before = tree(tmp_path)
    res = trust(packages["x"], env, "--key", str(keyfile))  # run_cli times out: no hang
    assert res.returncode == 8, res.stderr
    line = res.stderr.strip()
    assert "\n" not in line and f"{keyfile}: " in line, line
    assert BAD_KEYS[case] in line and "Traceback" not in res.stderr, line
    assert tree(tmp_path) == before and no_workspace_left(state)


def test_bad_key_file_creates_no_state_dir(env: dict[str, str], keys: dict[str, VendorKey],
                                           packages: dict[str, Path], tmp_path: Path) -> None:
    keyfile = bad_key_file("garbage", tmp_path, keys)
    res = trust(packages["x"], env, "--key", str(keyfile))
    assert res.returncode == 8, res.stderr
    assert not Path(env["HWMGR_STATE_DIR"]).exists()
    missing = trust(packages["x"], env, "--key", str(tmp_path / "nope.asc"))
    assert missing.returncode == 3 and "nope.asc: key file not found" in missing.stderr


@pytest.fixture(scope="module")
def subkeyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VendorKey, str, Path]]:
    """A vendor key whose signing subkey (not the primary) signs the package: (key, the
    subkey's long ID, the package)."""
    tmp = tmp_path_factory.mktemp("subkeyed")
    key = make_key(tmp / "k", "sub@vendor.invalid")
    gpg(key.home, "--quick-add-key", key.fingerprint, "rsa2048", "sign", "never")
    sub = [line.split(":")[9] for line in gpg(key.home, "--with-colons", "--list-keys")
           .splitlines() if line.startswith("fpr:")][1]
    key.public.write_text(gpg(key.home, "--armor", "--export", key.fingerprint))
    (tmp / "pkg").mkdir()
    pkg = build_be2net_srpm(tmp / "unsigned")
    pkg = sign(Path(shutil.copy(pkg, tmp / "pkg" / pkg.name)),
               VendorKey(key.home, f"{sub}!", key.fingerprint, key.public))  # ! = this subkey
    yield key, sub[-16:].lower(), pkg
    forget(key)


def test_key_whose_subkey_signed_the_package(env: dict[str, str],
                                             subkeyed: tuple[VendorKey, str, Path]) -> None:
    key, sub_id, pkg = subkeyed
    res = trust(pkg, env, "--key", str(key.public))
    assert res.returncode == 0, res.stderr
    assert f"signed by:  {sub_id}\n" in res.stderr and f"subkey:     {sub_id}\n" in res.stderr
    assert f"imported key {key.key_id} into " in res.stdout
    assert recorded_source(env)["signing_key"] == sub_id
    [entry] = pubkeys(Path(env["HWMGR_STATE_DIR"]))
    assert entry.startswith(rpm_name(key))


def _dead_key(tmp: Path, case: str) -> Path:
    """An ed25519 public key that expired in 2020 (made at a faked time), or one revoked by
    its own revocation certificate; exported armored as a vendor would hand it out."""
    home = tmp / f"gnupg-{case}"
    home.mkdir(mode=0o700)

    def g(*args: str) -> str:
        res = subprocess.run(["gpg", "--homedir", str(home), "--batch", "--no-options",
                              "--passphrase", "", *args], capture_output=True, text=True,
                             timeout=60, check=False)
        assert res.returncode == 0, res.stderr
        return res.stdout

    uid = f"{case} <{case}@vendor.invalid>"
    if case == "expired":
        g("--faked-system-time", "20200101T000000", "--quick-gen-key", uid, "ed25519", "sign",
          "1d")
    else:
        g("--quick-gen-key", uid, "ed25519", "sign", "never")
        (cert,) = (home / "openpgp-revocs.d").iterdir()
        rev = tmp / "rev.asc"
        rev.write_text(cert.read_text().replace(":-----BEGIN", "-----BEGIN"))
        g("--import", str(rev))
    out = tmp / f"{case}.asc"
    out.write_text(g("--armor", "--export", f"{case}@vendor.invalid"))
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False,
                   capture_output=True)  # the gpg-agent key generation started
    return out


@pytest.mark.parametrize("case", ["expired", "revoked"])
def test_dead_keys_are_refused(case: str, env: dict[str, str], packages: dict[str, Path],
                               tmp_path: Path) -> None:
    """gpg says the key is revoked or expired: exit 9, one line naming the file, the key and
    why; nothing recorded, nothing imported."""
    (tmp_path / "vendor").mkdir()
    keyfile = _dead_key(tmp_path / "vendor", case)
    before = tree(tmp_path)
    res = trust(packages["x"], env, "--key", str(keyfile))
    assert res.returncode == 9, res.stderr
    line = res.stderr.strip()
    assert "\n" not in line and f"{keyfile}: key " in line and f"is {case}" in line, line
    if case == "expired":
        assert "on 2020-01-02" in line, line
    assert tree(tmp_path) == before
    state = Path(env["HWMGR_STATE_DIR"])
    assert not state.exists() or no_workspace_left(state)


def test_a_killed_runs_workspace_is_removed_by_the_next_success(
        env: dict[str, str], keys: dict[str, VendorKey], packages: dict[str, Path]) -> None:
    """SIGKILL (or SIGTERM) at the prompt leaves `.trust-key-*` behind; the next successful
    run removes those older than an hour and leaves a concurrent run's alone. A refused run
    removes nothing."""
    state = Path(env["HWMGR_STATE_DIR"])
    old, new = state / ".trust-key-killed", state / ".trust-key-running"
    for d in (old, new):
        (d / "gnupg").mkdir(parents=True)
        (d / "key.in").write_bytes(b"left over")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    refused = trust(packages["y"], env, "--key", str(keys["x"].public))  # wrong key: exit 9
    assert refused.returncode == 9 and old.is_dir() and new.is_dir()
    res = trust(packages["x"], env, "--key", str(keys["x"].public))
    assert res.returncode == 0, res.stderr
    assert not old.exists() and (new / "key.in").read_bytes() == b"left over"
    assert sorted(p.name for p in state.glob(".trust-key-*")) == [new.name]
