"""The lab's megaraid_sas "vendor" source RPM, made from Debian's linux-source megaraid_sas.

Shaped like Broadcom's kmod SRPM (`kmod-megaraid_sas-<version>-1.src.rpm`: the sources and a
Makefile in `megaraid_sas-<version>.tar.bz2` under `megaraid_sas-<version>/`, plus the
depmod.d override `megaraid_sas.conf`; see drivers/megaraid_sas/README.md), built with the
real `rpmbuild -bs`. The version string is patched into MEGASAS_VERSION, which the driver
passes to MODULE_VERSION (modinfo, /sys/module/megaraid_sas/version). A documented
reconstruction, not Broadcom's code: the in-tree 6.1 driver with another version.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from lab.image import LabError

NAME = "megaraid_sas"
SRPM_NAME = "kmod-megaraid_sas"
VERSION = "07.719.90.00_lab"  # RPM forbids '-' in Version: '_' (the in-tree one is -rc1)
MTIME = 1795000000  # fixed, so the tarball (and SRPM payload) is reproducible

MAKEFILE = """\
# megaraid_sas @VERSION@ (hwmgr lab build of the Linux 6.1 in-tree driver, shaped like the
# vendor tarball: sources and this Makefile at the top of megaraid_sas-<version>/).
ifneq ($(KERNELRELEASE),)
obj-m += megaraid_sas.o
megaraid_sas-objs := megaraid_sas_base.o megaraid_sas_fusion.o megaraid_sas_fp.o \\
	megaraid_sas_debugfs.o
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
# Shaped like Broadcom's kmod-megaraid_sas spec: one tarball, a depmod.d override.
%{!?kver: %define kver %(uname -r)}
Name:           kmod-megaraid_sas
Summary:        MegaRAID SAS driver (hwmgr lab build)
Version:        @VERSION@
Release:        1
Source0:        megaraid_sas-%{version}.tar.bz2
Source1:        megaraid_sas.conf
Vendor:         hwmgr lab (Debian linux-source megaraid_sas with a lab version string)
License:        GPL-2.0-only
URL:            https://example.invalid/hwmgr-lab/megaraid_sas

%description
megaraid_sas @VERSION@ for the LSI MegaRAID SAS 2108 (1000:0079), QEMU's megasas-gen2.

%prep
%setup -q -n megaraid_sas-%{version}

%build
make KVER=%{kver}

%install
install -D -m 644 megaraid_sas.ko \\
    %{buildroot}/lib/modules/%{kver}/extra/megaraid_sas/megaraid_sas.ko
install -D -m 644 %{SOURCE1} %{buildroot}/etc/depmod.d/megaraid_sas.conf

%files
/lib/modules/%{kver}/extra/megaraid_sas/megaraid_sas.ko
/etc/depmod.d/megaraid_sas.conf
"""

DEPMOD_CONF = ("# the kmod package's own module ahead of the in-tree one\n"
               "override megaraid_sas * extra/megaraid_sas\n")


def patched_sources(src: Path, version: str) -> dict[str, bytes]:
    """megaraid_sas*.[ch] of the in-tree driver with MEGASAS_VERSION set to `version`."""
    files = {p.name: p.read_bytes() for p in sorted(src.iterdir())
             if p.name.startswith("megaraid_sas") and p.suffix in (".c", ".h")}
    header, n = re.subn(r'#define MEGASAS_VERSION\s+"[^"]*"',
                        f'#define MEGASAS_VERSION\t\t\t\t"{version}"',
                        files.get("megaraid_sas.h", b"").decode())
    if n != 1:
        raise LabError(f"megaraid_sas source {src}/megaraid_sas.h: no single MEGASAS_VERSION")
    files["megaraid_sas.h"] = header.encode()
    files["Makefile"] = MAKEFILE.replace("@VERSION@", version).encode()
    return files


def _tarball(src: Path, version: str, dest: Path) -> None:
    top = f"{NAME}-{version}"
    members = patched_sources(src, version)
    with open(dest, "wb") as raw, tarfile.open(fileobj=raw, mode="w:bz2",
                                               format=tarfile.GNU_FORMAT) as tar:
        ti = tarfile.TarInfo(top)
        ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, MTIME
        tar.addfile(ti)
        for name in sorted(members):
            ti = tarfile.TarInfo(f"{top}/{name}")
            ti.size, ti.mode, ti.mtime = len(members[name]), 0o644, MTIME
            tar.addfile(ti, io.BytesIO(members[name]))


def build_srpm(src: Path, out_dir: Path, version: str = VERSION) -> Path:
    """Write kmod-megaraid_sas-<version>-1.src.rpm into `out_dir`; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    top = Path(tempfile.mkdtemp(prefix="lab-raid-srpm-"))
    try:
        (top / "SOURCES").mkdir()
        (top / "SPECS").mkdir()
        _tarball(src, version, top / "SOURCES" / f"{NAME}-{version}.tar.bz2")
        (top / "SOURCES" / "megaraid_sas.conf").write_text(DEPMOD_CONF)
        spec = top / "SPECS" / "megaraid_sas.spec"
        spec.write_text(SPEC.replace("@VERSION@", version))
        res = subprocess.run(
            ["rpmbuild", "-bs", "--nodeps", "--define", f"_topdir {top}",
             "--define", "_source_payload w6.gzdio", str(spec)],
            capture_output=True, text=True, timeout=300, check=False)
        built = top / "SRPMS" / f"{SRPM_NAME}-{version}-1.src.rpm"
        if res.returncode != 0 or not built.is_file():
            raise LabError(f"rpmbuild -bs of megaraid_sas {version} failed: "
                           f"{(res.stdout + res.stderr).strip().splitlines()[-1:]}")
        dest = out_dir / built.name
        shutil.copyfile(built, dest)
        return dest
    finally:
        shutil.rmtree(top, ignore_errors=True)
