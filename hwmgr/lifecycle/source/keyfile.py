"""A vendor's OpenPGP public key for `hwmgr catalog trust --key KEYFILE`: read it, prove the
package verifies with it in a throw-away copy of hwmgr's keyring, import it on confirmation.

gpg, on a private empty GNUPGHOME, reads the bytes (armored or binary) and re-exports the one
public key armored, because rpm 4.18 imports armored keys only. rpmkeys then imports that into
a temporary copy of `<state>/keyring`, so the real keyring changes only after the admin said
yes, and only through the same import that just worked on the copy. Importing is idempotent
(a key already there is left alone), so a run cut short before the catalog is written is
completed by running it again.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, TypedDict

from hwmgr import safejson
from hwmgr.errors import BadInputError, HwmgrError, NotFoundError, RefusedError
from hwmgr.host.runner import Result
from hwmgr.host.seam import Host
from hwmgr.lifecycle.source.signature import RPM_TIMEOUT, keyring_path, same_key, verify_in_keyring
from hwmgr.numtext import to_int

MAX_KEY_BYTES = 1 << 20  # a public key with many signatures is tens of KiB
GPG_TIMEOUT = 60
_GPG = ("gpg", "--batch", "--no-tty", "--no-autostart", "--no-permission-warning",
        "--no-options", "--with-colons")


@dataclass
class VendorKey:
    """One public key as gpg reads it, and its armored export for rpmkeys."""

    file: str
    fingerprint: str
    created: int
    user_ids: list[str]
    subkeys: list[str]
    armored: str = field(repr=False)
    in_keyring: bool = False

    @property
    def key_id(self) -> str:
        """The 16-hex-digit long key ID (the primary key's), as rpm prints it."""
        return self.fingerprint[-16:].lower()

    @property
    def rpm_name(self) -> str:
        """The name rpm gives the imported key: gpg-pubkey-<short id>-<creation time, hex>."""
        return f"gpg-pubkey-{self.fingerprint[-8:].lower()}-{self.created:08x}"

    def signs(self, key_id: str) -> bool:
        """Whether the signature key ID is this key's primary key or one of its subkeys."""
        return any(same_key(key_id, fpr) for fpr in (self.fingerprint, *self.subkeys))

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "fingerprint": self.fingerprint, "key_id": self.key_id,
                "user_ids": self.user_ids, "subkeys": self.subkeys,
                "rpm_name": self.rpm_name, "in_keyring": self.in_keyring}


STALE_SECONDS = 3600  # a trust run waits at its prompt; one older than this was killed


class Workspace:
    """A private temp dir under the state dir (gpg home, the key, the keyring copy); removed
    afterwards, with the state dir itself when this run created it."""

    def __init__(self, host: Host, state_dir: str) -> None:
        self.host, self.state_dir = host, state_dir.rstrip("/") or "/"
        self._made_state = not host.exists(self.state_dir)
        self.dir = host.make_temp_dir(self.state_dir, ".trust-key-")

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.host.remove_tree(self.dir)
        if exc_type is None:  # a refused run changes nothing, not even old leftovers
            self._remove_stale()
        if self._made_state and not self.host.listdir(self.state_dir):
            self.host.remove_tree(self.state_dir)

    def _remove_stale(self) -> None:
        """Remove workspaces a killed run left (SIGKILL or SIGTERM at the prompt skips
        __exit__): those older than STALE_SECONDS, so a concurrent run's is never touched."""
        for name in self.host.listdir(self.state_dir):
            if not name.startswith(".trust-key-"):
                continue
            try:
                st = os.lstat(self.host.path(f"{self.state_dir}/{name}"))
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and time.time() - st.st_mtime > STALE_SECONDS:
                self.host.remove_tree(f"{self.state_dir}/{name}")

    def path(self, name: str) -> str:
        """Logical path of `name` in the workspace."""
        return f"{self.dir}/{name}"

    def real(self, name: str) -> str:
        """Real path of `name` (for the commands' argv)."""
        return str(self.host.path(self.path(name)))




def read_key_bytes(host: Host, key_file: str) -> bytes:
    """The key file's bytes: a regular file, not empty, at most MAX_KEY_BYTES. Never blocks on
    a FIFO: the seam opens non-blocking and reads regular files only."""
    where = os.path.abspath(key_file)
    raw = host.read_bytes(where, limit=MAX_KEY_BYTES + 1)
    if raw is None:
        try:
            os.stat(host.path(where))
        except FileNotFoundError:
            raise NotFoundError(f"{key_file}: key file not found") from None
        except OSError as exc:
            raise BadInputError(f"{key_file}: cannot read the key file ({exc.strerror})") from None
        kind = safejson.not_regular(host.path(where))
        raise BadInputError(f"{key_file}: is {kind}, not an OpenPGP public key file"
                            if kind and kind.startswith("a ") else
                            f"{key_file}: cannot read the key file")
    if not raw.strip():
        raise BadInputError(f"{key_file}: is empty; expected an OpenPGP public key")
    if len(raw) > MAX_KEY_BYTES:
        raise BadInputError(f"{key_file}: larger than {MAX_KEY_BYTES} bytes; not an OpenPGP "
                            "public key file")
    return raw


def _gpg(host: Host, home: str, *args: str) -> Result:
    res = host.run([_GPG[0], "--homedir", home, *_GPG[1:], *args], timeout=GPG_TIMEOUT)
    if not res.available:
        raise HwmgrError("gpg is not installed: install the 'gnupg' package")
    return res


_DEAD = {"r": "revoked", "e": "expired"}  # gpg --with-colons validity letters


def _field_int(fields: list[str], index: int) -> int:
    """A gpg --with-colons date field (seconds since the epoch); 0 when absent or garbled."""
    value = to_int(fields[index]) if len(fields) > index else None
    return value if value is not None and value >= 0 else 0


class GpgKey(TypedDict):
    """One key of gpg's --with-colons listing."""

    kind: str  # "pub" or "sec"
    fpr: str
    created: int
    uids: list[str]  # escapes such as \x3a left as gpg wrote them
    subkeys: list[str]  # their fingerprints
    secret_sub: bool  # a secret subkey ("ssb") is in the file
    validity: str  # gpg's verdict: r revoked, e expired, ...
    expires: int


def parse_colons(text: str) -> list[GpgKey]:
    """gpg --with-colons records → one dict per key: kind ('pub'/'sec'), fpr, created,
    uids, subkey fprs, validity (r revoked, e expired), expiry (a uid's escapes such as
    \\x3a are left as gpg wrote them)."""
    keys: list[GpgKey] = []
    last = ""
    for line in text.splitlines():
        f = line.split(":")
        rec = f[0]
        if rec in ("pub", "sec"):
            keys.append({"kind": rec, "fpr": "", "created": _field_int(f, 5), "uids": [],
                         "subkeys": [], "secret_sub": False,
                         "validity": f[1] if len(f) > 1 else "",
                         "expires": _field_int(f, 6)})
        elif not keys:
            continue
        elif rec == "fpr" and len(f) > 9:
            if last in ("pub", "sec"):
                keys[-1]["fpr"] = f[9].upper()
            elif last in ("sub", "ssb"):
                keys[-1]["subkeys"].append(f[9].upper())
        elif rec == "uid" and len(f) > 9:
            keys[-1]["uids"].append(f[9])
        elif rec == "ssb":
            keys[-1]["secret_sub"] = True
        if rec in ("pub", "sec", "sub", "ssb"):
            last = rec
    return keys


def load_key(host: Host, key_file: str, work: Workspace) -> VendorKey:
    """Read and check the key file (exit 8 unless it holds exactly one public key, no secret
    material) and export it armored for rpmkeys."""
    raw = read_key_bytes(host, key_file)
    host.write_bytes(work.path("key.in"), raw, mode=0o600)
    host.makedirs(work.path("gnupg"), mode=0o700)
    home = work.real("gnupg")
    res = _gpg(host, home, "--show-keys", work.real("key.in"))
    keys = parse_colons(res.stdout)
    if any(k["kind"] == "sec" or k["secret_sub"] for k in keys):
        raise BadInputError(f"{key_file}: is a private (secret) key; give the vendor's public "
                            "key ('gpg --armor --export KEYID'), and keep the private one private")
    if not res.ok or not keys or not all(k["fpr"] for k in keys):
        raise BadInputError(f"{key_file}: not an OpenPGP public key (gpg found no key in it)")
    if len(keys) > 1:
        raise BadInputError(f"{key_file}: holds {len(keys)} public keys; give the one that "
                            "signs the package ('gpg --armor --export KEYID')")
    key = keys[0]
    if key["validity"] in _DEAD:  # gpg's own verdict from the key's signatures and dates
        when = ""
        if key["validity"] == "e" and key["expires"]:
            when = time.strftime(" on %Y-%m-%d", time.gmtime(key["expires"]))
        raise RefusedError(f"{key_file}: key {key['fpr']} is {_DEAD[key['validity']]}{when}; "
                           "a package it signed is not trusted (ask the vendor for its "
                           "current key)")
    imp = _gpg(host, home, "--import", "--import-options", "import-minimal",
               work.real("key.in"))
    exp = _gpg(host, home, "--armor", "--export", key["fpr"])
    if not imp.ok or not exp.ok or "BEGIN PGP PUBLIC KEY BLOCK" not in exp.stdout:
        raise BadInputError(f"{key_file}: gpg cannot import the key {key['fpr']} "
                            f"({(imp if not imp.ok else exp).describe()})")
    host.write_bytes(work.path("key.asc"), exp.stdout.encode(), mode=0o600)
    return VendorKey(key_file, key["fpr"], key["created"], key["uids"], key["subkeys"],
                     exp.stdout)


def _pubkeys(host: Host, ring: str) -> list[str]:
    """The gpg-pubkey names in an rpm keyring dir (which must exist: rpm would create it)."""
    res = host.run(["rpm", "--dbpath", str(host.path(ring)), "-qa", "gpg-pubkey",
                    "--qf", "%{NAME}-%{VERSION}-%{RELEASE}\\n"], timeout=RPM_TIMEOUT)
    if not res.available:
        raise HwmgrError("rpm is not installed: install the 'rpm' package")
    if not res.ok:
        raise HwmgrError(f"{host.path(ring)}: cannot read the keyring ({res.describe()})")
    return res.stdout.split()


def _import(host: Host, ring: str, asc: str, key: VendorKey) -> None:
    res = host.run(["rpmkeys", "--dbpath", str(host.path(ring)), "--import", asc],
                   timeout=RPM_TIMEOUT)
    if not res.available:
        raise HwmgrError("rpmkeys is not installed: install the 'rpm' package")
    if not res.ok:
        raise BadInputError(f"{key.file}: rpm cannot import key {key.key_id} "
                            f"({res.describe()})")


def check_package_key(host: Host, package: Path, signing_key: str | None, key: VendorKey,
                      work: Workspace) -> None:
    """Refuse (exit 9) a package not signed by `key`; then verify it with a temporary copy
    of hwmgr's keyring plus the key (sets `key.in_keyring`). The real keyring is only read."""
    if signing_key is None:
        raise RefusedError(f"{package.name}: not signed, but --key {key.file} was given "
                           f"(key {key.key_id}); not recorded, no key imported")
    if not key.signs(signing_key):
        raise RefusedError(f"{package.name}: signed by key {signing_key}, but {key.file} holds "
                           f"key {key.key_id}; not recorded, no key imported")
    real = keyring_path(work.state_dir)
    copy = work.path("keyring")
    if host.exists(real):
        host.copy_tree(host.path(real), copy)
        key.in_keyring = key.rpm_name in _pubkeys(host, copy)
    if not key.in_keyring:
        _import(host, copy, work.real("key.asc"), key)
    try:
        verify_in_keyring(host, package, work.dir, signing_key)
    except RefusedError as exc:
        exc.message = (f"{exc.message.replace(str(host.path(copy)), str(host.path(real)))} "
                       f"(with the key from {key.file}); not recorded, no key imported")
        raise


def install_key(host: Host, key: VendorKey, work: Workspace) -> bool:
    """Import the checked key into hwmgr's keyring; False when it is already there."""
    ring = keyring_path(work.state_dir)
    if host.exists(ring) and key.rpm_name in _pubkeys(host, ring):
        key.in_keyring = True
        return False
    host.makedirs(ring)
    _import(host, ring, work.real("key.asc"), key)
    return True


def key_lines(key: VendorKey, keyring: str) -> Iterator[str]:
    """The key as shown before the question (the caller escapes the lines)."""
    fpr = " ".join(key.fingerprint[i:i + 4] for i in range(0, len(key.fingerprint), 4))
    yield f"key file:   {key.file}"
    yield f"key:        {fpr} (key ID {key.key_id})"
    for uid in key.user_ids or ["(no user ID)"]:
        yield f"user ID:    {uid}"
    for sub in key.subkeys:
        yield f"subkey:     {sub[-16:].lower()}"
    yield (f"keyring:    already in {keyring}" if key.in_keyring else
           f"keyring:    to be imported into {keyring}")
