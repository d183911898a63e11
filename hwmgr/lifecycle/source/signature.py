"""Vendor package signatures: the header's key ID, then `rpmkeys --checksig` against hwmgr's
own keyring.

The keyring is an rpm database under the state dir (`<state>/keyring`), so trusting a vendor
key for hwmgr does not make the host's rpm trust it. A key gets there with
`hwmgr catalog trust DRIVER VERSION --file PKG --key VENDOR-KEY.asc` (`keyfile`).
"""

from __future__ import annotations

import re
from pathlib import Path

from hwmgr.errors import BadInputError, HwmgrError, RefusedError
from hwmgr.host.seam import Host

# seconds an rpm query, check or unpack may take (every rpm call of lifecycle/ uses it)
RPM_TIMEOUT = 120.0
KEYRING = "keyring"
_SIG = re.compile(r"(?i)\bsignature, key ID ([0-9a-f]{8,16}): (\S+)")
_KEY_ID = re.compile(r"Key ID ([0-9a-fA-F]{8,40})")
# the header-only signatures rpmsign >= 4.14 writes (RSA; DSA/ECDSA/EdDSA), then the older
# header+payload ones (rpm 3/4 era vendors): the first one present names the key
_HEADER_KEY_QUERY = ("%|RSAHEADER?{%{RSAHEADER:pgpsig}}:{%|DSAHEADER?{%{DSAHEADER:pgpsig}}:"
                     "{%|SIGPGP?{%{SIGPGP:pgpsig}}:{%|SIGGPG?{%{SIGGPG:pgpsig}}:{(none)}|}|}|}|")


def keyring_path(state_dir: str) -> str:
    """Logical path of the keyring for a state dir."""
    return f"{state_dir.rstrip('/')}/{KEYRING}"


def normalize_fingerprint(raw: str) -> str:
    """'1234 ABCD …' → '1234abcd…'; refuses something that is not a hex fingerprint/key ID."""
    fp = re.sub(r"\s+", "", raw).lower().removeprefix("0x")
    if not re.fullmatch(r"[0-9a-f]{8,64}", fp):
        raise BadInputError(f"signing_key {raw!r} is not a hex key ID or fingerprint")
    return fp


def same_key(a: str, b: str) -> bool:
    """Whether two key IDs / fingerprints name the same key (the shorter ends the longer)."""
    x, y = sorted((normalize_fingerprint(a), normalize_fingerprint(b)), key=len)
    return y.endswith(x)


def header_key_id(host: Host, package: Path) -> str | None:
    """The key ID of the package's signature (16 hex digits), read without the key; None when
    unsigned. Says nothing about whether the signature is valid: `verify_in_keyring` does."""
    res = host.run(["rpm", "-qp", "--nosignature", "--qf", _HEADER_KEY_QUERY, str(package)],
                   timeout=RPM_TIMEOUT)
    if not res.available:
        raise HwmgrError("rpm is not installed: install the 'rpm' package")
    if not res.ok:
        raise BadInputError(f"{package}: not a readable RPM package ({res.describe()})")
    key = _KEY_ID.search(res.stdout)
    return key.group(1).lower() if key else None


def verify_in_keyring(host: Host, package: Path, state_dir: str, key_id: str) -> None:
    """Require every signature on `package` to verify (OK) with hwmgr's keyring.

    rpm prints nothing about signatures for an unsigned package and still exits 0, so a
    matching `... Signature, key ID X: OK` line is required, not just a zero exit code. A
    missing keyring is refused before rpmkeys runs (rpmkeys would create it).
    """
    ring = keyring_path(state_dir)
    keyring = host.path(ring)
    hint = ("give the vendor's key to 'hwmgr catalog trust DRIVER VERSION --file PKG "
            "--key KEYFILE'")
    if not host.exists(ring):
        raise RefusedError(f"{package.name}: key {key_id} is not in hwmgr's keyring "
                           f"({keyring} does not exist); {hint}")
    res = host.run(["rpmkeys", "--dbpath", str(keyring), "--checksig", "-v", str(package)],
                   timeout=RPM_TIMEOUT)
    if not res.available:
        raise HwmgrError("rpmkeys is not installed: install the 'rpm' package")
    sigs = _SIG.findall(res.stdout + res.stderr)
    if not sigs:
        raise RefusedError(f"{package.name}: rpmkeys found no signature by key {key_id} "
                           f"({res.describe()})")
    for keyid, verdict in sigs:
        if verdict.upper() == "NOKEY":
            raise RefusedError(f"{package.name}: key {keyid} is not in hwmgr's keyring; {hint}")
        if verdict.upper() != "OK":
            raise RefusedError(f"{package.name}: signature by key {keyid} is {verdict} "
                               "(corrupt or tampered)")
    if not res.ok:
        raise RefusedError(f"{package.name}: signature check failed: {res.describe()}")


def check_signature(host: Host, package: Path, state_dir: str, signing_key: str) -> str:
    """Require a valid signature by `signing_key` on `package`; returns the key ID seen."""
    normalize_fingerprint(signing_key)
    seen = header_key_id(host, package)
    if seen is None:
        raise RefusedError(f"{package.name} is not signed, but the catalog requires a "
                           f"signature by key {signing_key}")
    if not same_key(seen, signing_key):
        raise RefusedError(f"{package.name} is signed by key {seen}, not by the "
                           f"catalog's key {signing_key}")
    verify_in_keyring(host, package, state_dir, seen)
    return seen
