"""Vendor package signatures: `rpmkeys --checksig` against hwmgr's own keyring.

The keyring is an rpm database under the state dir (`<state>/keyring`), so trusting a vendor
key for hwmgr does not make the host's rpm trust it. Import a key with
`rpmkeys --dbpath /var/lib/hwmgr/keyring --import VENDOR-KEY.asc`.
"""

from __future__ import annotations

import re
from pathlib import Path

from hwmgr.errors import HwmgrError, RefusedError
from hwmgr.host.seam import Host

KEYRING = "keyring"
_SIG = re.compile(r"(?i)\bsignature, key ID ([0-9a-f]{8,16}): (\S+)")


def keyring_path(state_dir: str) -> str:
    """Logical path of the keyring for a state dir."""
    return f"{state_dir.rstrip('/')}/{KEYRING}"


def normalize_fingerprint(raw: str) -> str:
    """'1234 ABCD …' → '1234abcd…'; refuses something that is not a hex fingerprint/key ID."""
    fp = re.sub(r"\s+", "", raw).lower().removeprefix("0x")
    if not re.fullmatch(r"[0-9a-f]{8,64}", fp):
        raise HwmgrError(f"signing_key {raw!r} is not a hex key fingerprint")
    return fp


def check_signature(host: Host, package: Path, state_dir: str, signing_key: str) -> str:
    """Require a valid signature by `signing_key` on `package`; returns the key ID seen.

    rpm prints nothing about signatures for an unsigned package and still exits 0, so a
    matching `... Signature, key ID X: OK` line is required, not just a zero exit code.
    """
    want = normalize_fingerprint(signing_key)
    keyring = host.path(keyring_path(state_dir))
    res = host.run(["rpmkeys", "--dbpath", str(keyring), "--checksig", "-v", str(package)],
                   timeout=120)
    if not res.available:
        raise HwmgrError("rpmkeys is not installed: install the 'rpm' package")
    sigs = _SIG.findall(res.stdout + res.stderr)
    if not sigs:
        raise RefusedError(f"{package.name} is not signed, but the catalog requires a "
                           f"signature by key {signing_key}")
    for keyid, verdict in sigs:
        if not want.endswith(keyid.lower()):
            raise RefusedError(f"{package.name} is signed by key {keyid}, not by the "
                               f"catalog's key {signing_key}")
        if verdict.upper() == "NOKEY":
            raise RefusedError(
                f"{package.name}: key {keyid} is not in hwmgr's keyring; import it with "
                f"'rpmkeys --dbpath {keyring} --import KEYFILE'")
        if verdict.upper() != "OK":
            raise RefusedError(f"{package.name}: signature by key {keyid} is {verdict}")
    if not res.ok:
        raise RefusedError(f"{package.name}: signature check failed: {res.describe()}")
    return sigs[0][0].lower()
