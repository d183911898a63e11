"""Throw-away OpenPGP vendor keys for the signature tests: make one in a private GNUPGHOME,
sign an SRPM with the real `rpmsign --addsign`, import the public key into hwmgr's keyring."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class VendorKey:
    """A key in its own GNUPGHOME: fingerprint, long key ID, armored public key."""

    home: Path
    email: str
    fingerprint: str
    public: Path

    @property
    def key_id(self) -> str:
        """The 16-hex-digit long key ID rpm shows for its signatures."""
        return self.fingerprint[-16:].lower()


def gpg(home: Path, *args: str) -> str:
    """Run gpg in `home` without any agent prompt; returns stdout."""
    res = subprocess.run(["gpg", "--homedir", str(home), "--batch", "--yes",
                          "--pinentry-mode", "loopback", "--passphrase", "", *args],
                         capture_output=True, text=True, check=True, timeout=120)
    return res.stdout


def make_key(home: Path, email: str, algo: str = "rsa2048") -> VendorKey:
    """A fresh signing key for `email` in a new GNUPGHOME `home`."""
    home.mkdir(parents=True)
    os.chmod(home, 0o700)
    gpg(home, "--quick-gen-key", f"test vendor <{email}>", algo, "sign", "never")
    fpr = next(line.split(":")[9] for line in gpg(home, "--with-colons", "--list-keys")
               .splitlines() if line.startswith("fpr:"))
    pub = home / "public.asc"
    pub.write_text(gpg(home, "--armor", "--export", fpr))
    return VendorKey(home, email, fpr, pub)


def forget(key: VendorKey) -> None:
    """Stop the gpg-agent the key's GNUPGHOME started."""
    subprocess.run(["gpgconf", "--homedir", str(key.home), "--kill", "all"], check=False,
                   capture_output=True)


def sign(pkg: Path, key: VendorKey) -> Path:
    """Sign `pkg` in place with rpmsign (a header signature, as rpm 4.18 writes)."""
    gpg_bin = shutil.which("gpg") or "gpg"  # Debian's rpm macros name gpg2, which may be absent
    subprocess.run(["rpmsign", "--addsign", "--define", f"__gpg {gpg_bin}",
                    "--define", f"_gpg_name {key.email}", "--define", f"_gpg_path {key.home}",
                    str(pkg)], check=True, capture_output=True, timeout=120)
    return pkg


def import_key(state: Path, key: VendorKey) -> Path:
    """Trust `key` for hwmgr: import it into `<state>/keyring` (an rpm database)."""
    keyring = state / "keyring"
    keyring.mkdir(parents=True, exist_ok=True)
    subprocess.run(["rpmkeys", "--dbpath", str(keyring), "--import", str(key.public)],
                   check=True, capture_output=True, timeout=120)
    return keyring
