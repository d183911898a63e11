"""The binary .deb of `hwmgr package --binary deb`: the signed modules under
/lib/modules/K/updates/hwmgr/, control fields naming the driver, its catalog version and the
kernel, and maintainer scripts that run depmod for that kernel. Built by the real
`dpkg-deb --build`.

No `Depends: linux-image-K`: a kernel installed outside dpkg (a lab guest, a custom build)
would make the package uninstallable; the kernel is stated in the control fields instead and
hwmgr checks it before installing (hwmgr.lifecycle.pkgsteps).
"""

from __future__ import annotations

import gzip
import hashlib
import textwrap
import time
from pathlib import Path

from hwmgr import __version__
from hwmgr.errors import HwmgrError
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.binpkg import (
    DEB_SUBDIR,
    MAX_MODULE_BYTES,
    Staged,
    deb_name,
    deb_version,
)

BUILD_TIMEOUT = 300.0
QUICK_TIMEOUT = 60.0

_SCRIPT = """\
#!/bin/sh
# {what}: hwmgr package --binary deb ({driver} {version} for kernel {kernel})
set -e
case "$1" in
    {cases})
        if [ -d /lib/modules/{kernel} ] && command -v depmod >/dev/null 2>&1; then
            depmod -a {kernel}
        fi
        ;;
esac
exit 0
"""


def _field(text: str) -> str:
    """One control-field line: whitespace collapsed."""
    return " ".join(str(text).split())


def control(s: Staged, name: str, arch: str, packager: str, installed_kib: int) -> str:
    """DEBIAN/control: the kernel and the catalog version V stated as fields."""
    mods = ", ".join(f"{m.name}.ko" for m in s.modules)
    synopsis = f"{s.driver} {s.version} kernel driver for Linux {s.kernel}"
    body = (f"The {s.driver} kernel driver version {s.version} ({mods}), built by hwmgr "
            f"{__version__} with DKMS for kernel {s.kernel} only, "
            + ("signed with the site's module-signing key. " if s.signed else "unsigned. ")
            + f"Source: {s.source_name} (sha256 {s.source_sha256}), catalog "
            f"{s.catalog_version}. The module goes to /lib/modules/{s.kernel}/{DEB_SUBDIR}/; "
            "installing and removing run depmod for that kernel.")
    lines = [
        f"Package: {name}",
        f"Version: {deb_version(s.version)}",
        f"Architecture: {arch}",
        f"Maintainer: {_field(packager)}",
        f"Installed-Size: {installed_kib}",
        "Section: kernel",
        "Priority: optional",
        *([f"Homepage: {_field(s.url)}"] if s.url.startswith(("http://", "https://")) else []),
        f"Description: {_field(synopsis)}",
        *(" " + ln for ln in textwrap.wrap(_field(body), 72, break_on_hyphens=False)),
        f"Hwmgr-Driver: {s.driver}",
        f"Hwmgr-Driver-Version: {s.version}",
        f"Hwmgr-Kernel: {s.kernel}",
        f"Hwmgr-Modules: {' '.join(m.name for m in s.modules)}",
        f"Hwmgr-Signed: {'yes' if s.signed else 'no'}",
        f"Hwmgr-Source-Sha256: {s.source_sha256}",
    ]
    return "\n".join(lines) + "\n"


def _changelog(s: Staged, name: str, packager: str) -> bytes:
    """usr/share/doc/NAME/changelog.Debian.gz: one entry, gzip -9n (reproducible)."""
    when = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime())
    text = (f"{name} ({deb_version(s.version)}) unstable; urgency=medium\n\n"
            f"  * Built by hwmgr {__version__} from {s.source_name} for kernel {s.kernel}.\n\n"
            f" -- {_field(packager)}  {when}\n")
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def _copyright(s: Staged) -> str:
    return (f"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
            f"Upstream-Name: {s.driver}\n"
            + (f"Source: {_field(s.url)}\n" if s.url else "")
            + f"\nFiles: *\nCopyright: the {s.driver} driver's authors (see {s.source_name})\n"
            f"License: {_field(s.license)}\n"
            + (" On Debian systems the GNU GPL version 2 is in\n"
               " /usr/share/common-licenses/GPL-2.\n" if "GPL" in s.license else ""))


def make_deb(host: Host, s: Staged, work: str, out: Path, packager: str) -> Path:
    """Stage the package tree under `work` and `dpkg-deb --build` it; returns the .deb (in
    `work`: the caller publishes it)."""
    res = host.run(["dpkg", "--print-architecture"], timeout=QUICK_TIMEOUT)
    arch = res.stdout.strip()
    if not res.available:
        raise HwmgrError("dpkg-deb is not installed: install 'dpkg' to build a .deb")
    if not res.ok or not arch:
        raise HwmgrError(f"cannot tell the Debian architecture ({res.describe()})")
    name = deb_name(s.driver, s.kernel)
    root = f"{work}/deb"
    host.remove_tree(root)
    payload: dict[str, bytes] = {}  # path below the package root -> contents
    for m in s.modules:
        data = host.read_bytes(str(m.path), limit=MAX_MODULE_BYTES)
        if data is None:
            raise HwmgrError(f"cannot read the built module {m.path}")
        payload[f"lib/modules/{s.kernel}/{DEB_SUBDIR}/{m.path.name}"] = data
    payload[f"usr/share/doc/{name}/copyright"] = _copyright(s).encode()
    payload[f"usr/share/doc/{name}/changelog.Debian.gz"] = _changelog(s, name, packager)
    for rel, data in payload.items():
        host.write_bytes(f"{root}/{rel}", data, mode=0o644)
    size = sum(len(d) for d in payload.values())
    host.write_bytes(f"{root}/DEBIAN/md5sums", "".join(
        f"{hashlib.md5(d).hexdigest()}  {rel}\n"  # noqa: S324 - dpkg's md5sums format
        for rel, d in sorted(payload.items())).encode())
    real = host.path(root)
    host.write_bytes(f"{root}/DEBIAN/control",
                     control(s, name, arch, packager, (size + 1023) // 1024).encode())
    for script, cases in (("postinst", "configure"), ("postrm", "remove|purge")):
        host.write_bytes(f"{root}/DEBIAN/{script}", _SCRIPT.format(
            what=script, driver=s.driver, version=s.version, kernel=s.kernel,
            cases=cases).encode(), mode=0o755)
    deb = Path(host.path(f"{work}/{name}_{deb_version(s.version)}_{arch}.deb"))
    res = host.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(real), str(deb)],
                   timeout=BUILD_TIMEOUT)
    if not res.ok or not deb.is_file():
        raise HwmgrError(f"dpkg-deb --build of {name} failed: {res.describe()}")
    return deb
