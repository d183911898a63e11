"""Real vendor source RPMs for tests: where they are (HWMGR_VENDOR_DIR) and that they are the
files SUMS.txt names. Not in the repository: the Makefile points HWMGR_VENDOR_DIR at the
directory beside the checkout; unset, the tests that need them skip (an ad-hoc run); set but
a file missing or different, they fail."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.dkms import Dkms
from hwmgr.lifecycle.builds.headers import kernels_with_headers
from support.lifecycle_env import newest_kernels_first

VENDOR_ENV = "HWMGR_VENDOR_DIR"
SUMS = "SUMS.txt"
# "<sha256>  <file>  <bytes> bytes [...]"; lines for files inside a package say "(inside ...)"
_SUM_LINE = re.compile(r"([0-9a-f]{64})\s+(\S+)\s+(\d+) bytes(.*)")
_SRPM = re.compile(r"(?P<name>[a-z0-9_]+)-(?P<version>[0-9][0-9.]*)-(?P<release>[^-]+)\.src\.rpm")
# Linux 6.1 dropped netif_napi_add's weight argument; Intel's igb kcompat copes from 5.13.20 on
# (drivers/igb/README.md): an older release does not compile for a 6.1 or newer kernel.
IGB_KCOMPAT_6_1 = "5.13.20"


class VendorFile(NamedTuple):
    path: Path
    sha256: str
    size: int


def vendor_dir() -> Path:
    """HWMGR_VENDOR_DIR, or skip the test (the variable is unset: an ad-hoc run)."""
    base = os.environ.get(VENDOR_ENV)
    if not base:
        pytest.skip(f"{VENDOR_ENV} is not set: no vendor directory beside this checkout (make "
                    "test sets it when there is one: see docs/testing.md)")
    return Path(base)


def listed(base: Path) -> list[VendorFile]:
    """The files SUMS.txt lists as files of the directory (not those inside a package)."""
    sums = base / SUMS
    try:
        text = sums.read_text()
    except OSError as exc:
        pytest.fail(f"{sums}: cannot read ({exc.strerror}); {VENDOR_ENV} must name the vendor dir")
    files = []
    for line in text.splitlines():
        m = _SUM_LINE.fullmatch(line.strip())
        if m and "(inside" not in m.group(4):
            files.append(VendorFile(base / m.group(2), m.group(1), int(m.group(3))))
    if not files:
        pytest.fail(f"{sums}: lists no file")
    return files


def checked(f: VendorFile) -> Path:
    """The file, after checking it is there with SUMS.txt's size and sha256 (else fail)."""
    try:
        data = f.path.read_bytes()
    except OSError as exc:
        pytest.fail(f"{f.path}: listed in {SUMS} but cannot be read ({exc.strerror})")
    if len(data) != f.size or hashlib.sha256(data).hexdigest() != f.sha256:
        pytest.fail(f"{f.path}: not the file {SUMS} names (size {len(data)}, sha256 "
                    f"{hashlib.sha256(data).hexdigest()}; expected {f.size}, {f.sha256})")
    return f.path


def srpms(name: str) -> dict[str, Path]:
    """{version: path} of the checked `name` SRPMs listed in HWMGR_VENDOR_DIR's SUMS.txt."""
    found = {}
    for f in listed(vendor_dir()):
        m = _SRPM.fullmatch(f.path.name)
        if m and m.group("name") == name:
            found[m.group("version")] = checked(f)
    return found


def newest_first(versions: list[str]) -> list[str]:
    """Dotted numeric versions, newest first (5.18.7 before 5.9.3)."""
    return sorted(versions, key=lambda v: [int(p) for p in v.split(".")], reverse=True)


def igb_predates(version: str, kver: str) -> bool:
    """True when igb `version` is known not to compile for kernel `kver` (IGB_KCOMPAT_6_1)."""
    major_minor = tuple(int(p) for p in kver.split("-")[0].split(".")[:2])
    return major_minor >= (6, 1) and newest_first([version, IGB_KCOMPAT_6_1])[0] != version


def igb_kernels(versions: list[str]) -> list[str]:
    """The kernels with headers here that every igb release of `versions` builds for, newest
    first: Debian 12's 6.1 for releases from IGB_KCOMPAT_6_1 on; an older release has one
    only where an older kernel's headers are installed (make test installs none)."""
    found = kernels_with_headers(Host("/", SubprocessRunner()))
    return [k for k in newest_kernels_first(found)
            if not any(igb_predates(v, k) for v in versions)]


def remove_versions(driver: str, kver: str, versions: list[str]) -> None:
    """Take `versions` of `driver` out of DKMS, /usr/src and KVER's updates/dkms (machine-wide
    state the vendor story and bench/upgrade share; other versions are left alone)."""
    host = Host("/", SubprocessRunner())
    d = Dkms(host)
    for e in d.status(driver):
        if e.version in versions:
            d.remove(driver, e.version, "all", delete_source=True, depmod=False)
    for v in versions:
        shutil.rmtree(f"/usr/src/{driver}-{v}", ignore_errors=True)
        shutil.rmtree(f"/var/lib/dkms/{driver}/{v}", ignore_errors=True)
    for p in Path(f"/lib/modules/{kver}/updates/dkms").glob(f"{driver}.ko*"):
        p.unlink()
    if Path(f"/lib/modules/{kver}/modules.dep").exists():
        host.run(["depmod", "-a", kver])
