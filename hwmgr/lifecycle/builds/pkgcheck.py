"""A site-built binary package offered to `hwmgr upgrade --package FILE`, treated as hostile
input: its sha256 must be one the catalog in force records for the driver version
(`packages` → kernel → format), and its contents only the module files of that kernel under
/lib/modules/K/updates/hwmgr/ (plus the package's own copyright and changelog), read with
`dpkg-deb -c/-f/-I` before anything is installed. Every refusal is one line naming the file.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Mapping, TypedDict, cast

from hwmgr.errors import HwmgrError, NotFoundError, RefusedError
from hwmgr.host.hashing import sha256_file
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.binpkg import DEB_SUBDIR, deb_name
from hwmgr.lifecycle.builds.dkms import KO_SUFFIXES

QUICK_TIMEOUT = 60.0
CONTROL_MEMBERS = {"control", "md5sums", "postinst", "postrm"}  # what hwmgr's .deb carries
_CTRL_MEMBER_RE = re.compile(r"^\s+\d+ bytes,\s+\d+ lines\s+(?:\*\s+)?(\S+)", re.M)
FILE_MODE, DIR_MODE = "-rw-r--r--", "drwxr-xr-x"


class PackageRecord(TypedDict, total=False):
    """`PackageFacts.as_dict()`, journaled as an upgrade's params["package"] (a plan the
    package refused keeps only its "path")."""

    path: str
    sha256: str
    size: int
    format: str
    kernel: str
    name: str
    signed: bool
    modules: dict[str, str]


@dataclass
class PackageFacts:
    """What was checked about the package; journaled as the upgrade's params["package"]."""

    path: str
    sha256: str
    size: int
    format: str
    kernel: str
    name: str
    signed: bool
    modules: dict[str, str] = field(default_factory=dict)  # module -> logical path it installs

    def as_dict(self) -> PackageRecord:
        """Every field, in order (the record's keys are the dataclass's fields)."""
        return cast(PackageRecord, asdict(self))


def recorded(info: Mapping[str, object], digest: str
             ) -> list[tuple[str, str, Mapping[str, object]]]:
    """(kernel, format, entry) of every package the version's catalog entry records with
    this sha256."""
    out: list[tuple[str, str, Mapping[str, object]]] = []
    packages = info.get("packages") or {}
    for kernel, formats in (packages.items() if isinstance(packages, dict) else ()):
        for fmt, entry in (formats.items() if isinstance(formats, dict) else ()):
            if isinstance(entry, dict) and entry.get("sha256") == digest:
                out.append((kernel, fmt, entry))
    return out


def _deb(host: Host, *args: str) -> str:
    res = host.run(["dpkg-deb", *args], timeout=QUICK_TIMEOUT)
    if not res.available:
        raise HwmgrError("dpkg-deb is not installed: install 'dpkg' to install a .deb")
    if not res.ok:
        raise RefusedError(f"{args[-1]}: not a readable .deb ({res.describe()})")
    return res.stdout


def allowed_paths(name: str, kernel: str, modules: list[str]) -> tuple[set[str], set[str]]:
    """(directories, files) a hwmgr .deb for `kernel` may hold, as `dpkg-deb -c` names them."""
    mod_dir = f"./lib/modules/{kernel}/{DEB_SUBDIR}/"
    dirs = {"./", "./lib/", "./lib/modules/", f"./lib/modules/{kernel}/",
            f"./lib/modules/{kernel}/updates/", mod_dir, "./usr/", "./usr/share/",
            "./usr/share/doc/", f"./usr/share/doc/{name}/"}
    files = {f"{mod_dir}{m}{s}" for m in modules for s in KO_SUFFIXES}
    files |= {f"./usr/share/doc/{name}/copyright", f"./usr/share/doc/{name}/changelog.Debian.gz"}
    return dirs, files


def inspect_deb(host: Host, path: str, driver: str, version: str, kernel: str,
                modules: list[str]) -> tuple[str, dict[str, str]]:
    """Check the .deb's control fields and every member; returns (package name, module ->
    the logical path it installs). RefusedError names the file and the first problem."""
    name = deb_name(driver, kernel)
    fields: dict[str, str] = {}
    for line in _deb(host, "-f", path).splitlines():
        if line[:1] not in (" ", "\t") and ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    want = {"Package": name, "Hwmgr-Driver": driver, "Hwmgr-Driver-Version": version,
            "Hwmgr-Kernel": kernel}
    for key, value in want.items():
        if fields.get(key) != value:
            raise RefusedError(f"{path}: control field {key} is {fields.get(key)!r}, "
                               f"expected {value!r}")
    extra = set(_CTRL_MEMBER_RE.findall(_deb(host, "-I", path))) - CONTROL_MEMBERS
    if extra:
        raise RefusedError(f"{path}: control member(s) {', '.join(sorted(extra))} are not "
                           "what hwmgr packages carry")
    dirs, files = allowed_paths(name, kernel, modules)
    found: dict[str, str] = {}
    for line in _deb(host, "-c", path).splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6:
            raise RefusedError(f"{path}: unreadable member line {line[:80]!r}")
        mode, owner, member = parts[0], parts[1], parts[5]
        if owner != "root/root":
            raise RefusedError(f"{path}: {member} is owned by {owner}, not root/root")
        if mode == DIR_MODE and member in dirs:
            continue
        if mode == FILE_MODE and member in files:
            base = os.path.basename(member)
            mod = next((m for m in modules for s in KO_SUFFIXES if base == m + s), None)
            if mod is not None:
                found[mod] = member[1:]  # "./lib/..." -> "/lib/..."
            continue
        raise RefusedError(f"{path}: member {member} ({mode}) is not a module file of kernel "
                           f"{kernel} under /lib/modules/{kernel}/{DEB_SUBDIR}/")
    missing = [m for m in modules if m not in found]
    if missing:
        raise RefusedError(f"{path}: holds no {', '.join(missing)} module for kernel {kernel}")
    return name, found


def check_package(host: Host, info: Mapping[str, object], driver: str, version: str, path: str,
                  kernels: list[str] | None, modules: list[str]) -> PackageFacts:
    """The catalog-pinned, inspected package for `driver` `version`; one-line refusals."""
    real = os.path.abspath(path)
    if not os.path.isfile(real):
        raise NotFoundError(f"package {path}: no such file")
    digest, size = sha256_file(real), os.path.getsize(real)
    hits = recorded(info, digest)
    if not hits:
        raise RefusedError(f"package {path}: sha256 {digest} is not a package the catalog in "
                           f"force records for {driver} {version} (catalog.d layer from "
                           "'hwmgr package --binary' missing, or the file was changed)")
    if kernels:
        hits = [h for h in hits if h[0] in kernels]
        if not hits or len(set(kernels)) > 1:
            raise RefusedError(f"package {path}: the catalog records it for kernel "
                               f"{recorded(info, digest)[0][0]}, not {', '.join(kernels)}")
    kernel, fmt, entry = hits[0]
    if entry.get("size") != size:
        raise RefusedError(f"package {path}: {size} bytes, the catalog records {entry['size']}")
    if fmt != "deb":
        raise RefusedError(f"package {path}: installing a {fmt} package is not supported yet "
                           "(only .deb)")
    name, files = inspect_deb(host, real, driver, version, kernel, modules)
    return PackageFacts(real, digest, size, fmt, kernel, name, bool(entry.get("signed")),
                        files)
