"""The lab's e1000e "vendor" source RPMs, made from Debian's linux-source e1000e.

Each SRPM is shaped like Intel's: `e1000e-<version>.tar.gz` with `e1000e-<version>/src/` (the
driver and a kbuild Makefile) and the spec, built with the real `rpmbuild -bs`. The version
string is patched in where tools read it: MODULE_VERSION (modinfo, /sys/module/e1000e/version)
and the ethtool drvinfo (`ethtool -i`). The `broken` build's PCI probe fails with -ENODEV, so
the module loads but binds nothing: exactly what boot-time verification must catch. The
`3.8.8_lab` Makefile stops with an error when kbuild builds it for the image's second kernel
(a lab construct: a vendor release that does not build on a newer kernel), so the kernel
gate's refusal costs no DKMS build (tests/lab/test_kernel_gate.py, run b).

RPM forbids '-' in Version and hwmgr requires SRPM Version == catalog version == module
version, so lab versions use '_' (3.8.7_lab, not 3.8.7-lab).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lab.image import LabError

NAME = "e1000e"
MTIME = 1795000000  # fixed, so a version's tarball (and SRPM payload) is reproducible


@dataclass(frozen=True)
class LabVersion:
    """One lab release of e1000e: its version string and whether its probe fails."""

    version: str
    broken: bool = False
    note: str = ""
    refuses_second_kernel: bool = False  # kbuild stops with an error for the image's kver2


VERSIONS = (
    LabVersion("3.8.7_lab", note="first lab vendor release"),
    LabVersion("3.8.8_lab", note="second lab vendor release; does not build on the lab's "
               "second kernel", refuses_second_kernel=True),
    LabVersion("3.8.9_lab_broken", broken=True,
               note="builds and loads, but its PCI probe fails with -ENODEV"),
)

MAKEFILE = """\
# e1000e @VERSION@ (hwmgr lab build of the Linux 6.1 in-tree driver, Intel-style src/ tree).
# kbuild part: used by `make -C <kernel build dir> M=<this dir> modules` (what DKMS runs).
ifneq ($(KERNELRELEASE),)
@REFUSE@obj-m += e1000e.o
e1000e-objs := 82571.o ich8lan.o 80003es2lan.o mac.o manage.o nvm.o phy.o param.o \\
	ethtool.o netdev.o ptp.o
else
KVER ?= $(shell uname -r)
KSRC ?= /lib/modules/$(KVER)/build
all:
\t$(MAKE) -C $(KSRC) M=$(CURDIR) modules
clean:
\t$(MAKE) -C $(KSRC) M=$(CURDIR) clean
endif
"""

SPEC = """\
# Shaped like Intel's e1000e.spec: one tarball, sources and Makefile under src/.
%{!?kver: %define kver %(uname -r)}
Name:           e1000e
Summary:        Intel(R) Gigabit Ethernet Connection (hwmgr lab build)
Version:        @VERSION@
Release:        1
Source:         %{name}-%{version}.tar.gz
Vendor:         hwmgr lab (Debian linux-source e1000e with a lab version string)
License:        GPL-2.0-only
URL:            https://example.invalid/hwmgr-lab/e1000e
BuildRequires:  kernel-devel

%description
e1000e @VERSION@ for the Intel 82574L (8086:10d3): @NOTE@.

%prep
%setup -q

%build
make -C src KVER=%{kver}

%install
install -D -m 644 src/e1000e.ko \\
    %{buildroot}/lib/modules/%{kver}/updates/drivers/net/ethernet/intel/e1000e/e1000e.ko

%files
/lib/modules/%{kver}/updates/drivers/net/ethernet/intel/e1000e/e1000e.ko

%changelog
* Sat Nov 21 2026 hwmgr lab <lab@example.invalid> - @VERSION@-1
- lab release: @NOTE@
"""

BROKEN_PROBE = """\
/* hwmgr lab: this release's probe fails on purpose, like a vendor driver that does not
 * support the installed NIC. The module loads; no interface appears. */
static bool lab_probe_fails = true;

static int e1000_probe_lab(struct pci_dev *pdev, const struct pci_device_id *ent)
{
\tif (lab_probe_fails) {
\t\tdev_err(&pdev->dev, "e1000e @VERSION@: probe refused (hwmgr lab broken build)\\n");
\t\treturn -ENODEV;
\t}
\treturn e1000_probe(pdev, ent);
}

"""


def _patch(text: str, old: str, new: str, fname: str) -> str:
    if text.count(old) != 1:
        raise LabError(f"e1000e source {fname}: expected exactly one {old.strip()!r}")
    return text.replace(old, new)


REFUSE = """\
ifeq ($(KERNELRELEASE),@KVER2@)
$(error e1000e @VERSION@ does not support kernel @KVER2@ (hwmgr lab construct))
endif
"""


def patched_sources(src: Path, lv: LabVersion, kver2: str = "") -> dict[str, bytes]:
    """The driver files of `lv`: Debian's e1000e with the lab version (and breakage) patched in;
    `kver2`: the kernel a `refuses_second_kernel` release does not build for."""
    files: dict[str, bytes] = {}
    for p in sorted(src.iterdir()):
        if p.suffix in (".c", ".h"):
            files[p.name] = p.read_bytes()
    v = lv.version
    netdev = files["netdev.c"].decode()
    netdev = _patch(netdev, 'MODULE_LICENSE("GPL v2");\n',
                    f'MODULE_LICENSE("GPL v2");\nMODULE_VERSION("{v}");\n', "netdev.c")
    if lv.broken:
        netdev = _patch(netdev, "static struct pci_driver e1000_driver = {\n",
                        BROKEN_PROBE.replace("@VERSION@", v)
                        + "static struct pci_driver e1000_driver = {\n", "netdev.c")
        netdev = _patch(netdev, "\t.probe    = e1000_probe,\n",
                        "\t.probe    = e1000_probe_lab,\n", "netdev.c")
    files["netdev.c"] = netdev.encode()
    line = "\tstrscpy(drvinfo->driver, e1000e_driver_name, sizeof(drvinfo->driver));\n"
    files["ethtool.c"] = _patch(
        files["ethtool.c"].decode(), line,
        line + f'\tstrscpy(drvinfo->version, "{v}", sizeof(drvinfo->version));\n',
        "ethtool.c").encode()
    refuse = REFUSE.replace("@KVER2@", kver2) if lv.refuses_second_kernel and kver2 else ""
    files["Makefile"] = MAKEFILE.replace("@REFUSE@", refuse).replace("@VERSION@", v).encode()
    return files


def _tarball(src: Path, lv: LabVersion, spec: str, dest: Path, kver2: str) -> None:
    top = f"{NAME}-{lv.version}"
    members: dict[str, bytes] = {f"src/{k}": d
                                 for k, d in patched_sources(src, lv, kver2).items()}
    members["e1000e.spec"] = spec.encode()
    members["README"] = (f"e1000e {lv.version}: hwmgr lab build of the Linux 6.1 e1000e driver "
                         f"({lv.note}).\nBuild: make -C src KVER=<kernel release>\n").encode()
    with open(dest, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz",
                                               format=tarfile.GNU_FORMAT) as tar:
        for d in (top, f"{top}/src"):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, MTIME
            tar.addfile(ti)
        for name in sorted(members):
            ti = tarfile.TarInfo(f"{top}/{name}")
            ti.size, ti.mode, ti.mtime = len(members[name]), 0o644, MTIME
            tar.addfile(ti, io.BytesIO(members[name]))


def build_srpm(src: Path, lv: LabVersion, out_dir: Path, kver2: str = "") -> Path:
    """Write e1000e-<version>-1.src.rpm into `out_dir` with `rpmbuild -bs`; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    top = Path(tempfile.mkdtemp(prefix="lab-srpm-"))
    try:
        (top / "SOURCES").mkdir()
        (top / "SPECS").mkdir()
        spec = SPEC.replace("@VERSION@", lv.version).replace("@NOTE@", lv.note)
        _tarball(src, lv, spec, top / "SOURCES" / f"{NAME}-{lv.version}.tar.gz", kver2)
        (top / "SPECS" / f"{NAME}.spec").write_text(spec)
        res = subprocess.run(
            ["rpmbuild", "-bs", "--nodeps", "--define", f"_topdir {top}",
             "--define", "_source_payload w6.gzdio", str(top / "SPECS" / f"{NAME}.spec")],
            capture_output=True, text=True, timeout=300, check=False)
        built = top / "SRPMS" / f"{NAME}-{lv.version}-1.src.rpm"
        if res.returncode != 0 or not built.is_file():
            raise LabError(f"rpmbuild -bs of e1000e {lv.version} failed: "
                           f"{(res.stdout + res.stderr).strip().splitlines()[-1:]}")
        dest = out_dir / built.name
        shutil.copyfile(built, dest)
        return dest
    finally:
        shutil.rmtree(top, ignore_errors=True)


def build_all(src: Path, out_dir: Path, kver2: str = "") -> dict[str, Path]:
    """All lab releases: version -> SRPM path (`kver2`: the image's second kernel)."""
    return {lv.version: build_srpm(src, lv, out_dir, kver2) for lv in VERSIONS}
