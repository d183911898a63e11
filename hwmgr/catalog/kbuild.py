"""The kernel build a host runs: its release, its family and, where the family's own
versioning states it, the upstream release it is built on.

An in-tree driver is identified by the kernel build, not by its version string (many print
the same string for years, or the kernel release). Known issues give kernel ranges per line:
`upstream` (mainline and stable; Debian, Ubuntu and vanilla builds map to it) and the
RHEL-family lines `el7`..`el10` (backports make upstream ranges wrong there). A build this
module cannot place is `family=None`: the catalog then says "uncatalogued kernel build".

How each family is placed (docs/known-issues.md):
- upstream: a release `X.Y[.Z]` with no distribution marker (vanilla, NixOS, Arch's
  `-archN`, Gentoo), Fedora's `.fcNN` (Fedora ships stable releases) or Proxmox VE's
  `X.Y.Z-N-pve` (named after the upstream release it is built on), ELRepo's kernel-ml and
  kernel-lt for EL (`5.14.8-1.el8.elrepo`: the kernel.org release, unpatched), or Ubuntu's mainline
  builds (`6.8.9-060809-generic`, unpatched upstream releases): its `X.Y.Z`; a stable release
  `X.Y.Z` (Z > 0) with a local version of its own (`6.18.44-fc-v657`) as that release.
- Debian: `/proc/version` names the package (`Debian 6.1.76-1`), whose upstream part is the
  base; else the ABI (`6.1.0-18-amd64`) through the catalog's `kernel_builds.debian` table;
  trixie's releases (`6.12.12+deb13-amd64`) carry the upstream version themselves.
- Ubuntu: `/proc/version_signature` (`Ubuntu 5.15.0-91.101-generic 5.15.131`) ends with the
  base; else the ABI (`5.15.0-91-generic`) through `kernel_builds.ubuntu`.
- Proxmox VE builds past the last stable release of their series, whose sources Proxmox moves
  to later Ubuntu uploads (`6.8.12-30-pve`): on the Ubuntu line at the upload Proxmox's
  changelog names, where the catalog lists it; else not placed (never upstream 6.8.12).
- Ubuntu cloud kernels (`5.15.0-1121-aws`, `-azure`, `-gcp`), whose ABIs are their own: as
  the master upload their changelog says they are built on (`kernel_builds.ubuntu_flavours`).
- Ubuntu lines: an Ubuntu ABI the catalog lists under `kernel_builds.ubuntu_lines` (noble's
  6.8.0-N past its last whole stable release) sits on that line, compared by ABI number:
  Ubuntu's changelog names the CVEs each upload fixes (catalog-src/ubuntu_kernels.py).
- EL: `.elN` (and `.elN_M`) on the kernel base RHEL N ships (3.10.0, 4.18.0, 5.14.0, 6.12.0);
  any other base with `.elN` (PowerKVM's 4.7.0) is not RHEL's build, nor is Oracle's UEK
  (`.elNuek`), whose fixed X.Y.Z names no stable release.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Collection, Mapping, Optional

from hwmgr.catalog.rpmver import rpmvercmp
from hwmgr.numtext import digits_key

if TYPE_CHECKING:
    from _typeshed import SupportsAllComparisons

UPSTREAM = "upstream"
EL_BASES = {"el6": "2.6.32", "el7": "3.10.0", "el8": "4.18.0", "el9": "5.14.0",
            "el10": "6.12.0"}
# Ubuntu kernels past their last whole upstream stable release (noble's 6.8.0-41 on, also
# 22.04's HWE 6.8): Ubuntu backports into a frozen base, so its uploads are a line of their
# own, ordered by ABI number; the catalog lists the uploads whose changelogs it read
UBUNTU_LINES = {"ubuntu-6.8": "6.8.0"}
LINES = (UPSTREAM, *EL_BASES, *UBUNTU_LINES)
# Ubuntu's cloud kernels, whose ABIs are their own: placed through the master upload each
# rebases on (`kernel_builds.ubuntu_flavours`, catalog-src/ubuntu_flavours.py)
CLOUD_FLAVOURS = ("aws", "azure", "gcp")
# where the host says more than `uname -r` does (read through Host; recorded by snapshots)
PROC_VERSION = "/proc/version"
VERSION_SIGNATURE = "/proc/version_signature"

_NUM = re.compile(r"^(\d{1,3})\.(\d{1,3})(?:\.(\d{1,5}))?$")
_EL = re.compile(r"^(\d+\.\d+\.\d+)-([0-9][0-9.]*)\.(el\d+)(?:_(\d+))?(?:\.[A-Za-z0-9_.]+)?$")
_UBUNTU_ABI = re.compile(
    r"^(\d+\.\d+\.0-\d+)-(generic|lowlatency|aws|azure|gcp|gke|kvm|oracle|ibm|nvidia|"
    r"generic-hwe-[0-9.]+|generic-64k|raspi|realtime)$")
_DEBIAN_ABI = re.compile(r"^(\d+\.\d+\.0-\d+)-(amd64|arm64|686|686-pae|cloud-amd64|"
                         r"cloud-arm64|rt-amd64|rt-arm64|armmp|armmp-lpae|powerpc64le|s390x)$")
_DEBIAN_UPSTREAM = re.compile(r"^(\d+\.\d+\.\d+)\+deb(\d+)(?:[.+]\d+)?-[a-z0-9-]+$")
_PLAIN = re.compile(r"^(\d+\.\d+(?:\.\d+)?)(?:-rc\d+)?(?:-(?:arch\d+-\d+|gentoo[a-z0-9-]*|"
                    r"x86_64|amd64|default))?$")
# a stable release built with a local version of its own (CONFIG_LOCALVERSION): 6.18.44-fc-v657;
# not SUSE's frozen base with a six-digit build (5.14.21-150500.55.39-default)
_LOCAL = re.compile(r"^(\d+\.\d+\.[1-9]\d*)[-+](?!\d{6}\.)[A-Za-z0-9][A-Za-z0-9._+-]*$")
_FEDORA = re.compile(r"^(\d+\.\d+\.\d+)-\d+\.fc\d+\.[a-z0-9_]+$")
_PROXMOX = re.compile(r"^(\d+\.\d+\.\d+)-\d+-pve$")
_PVE_RELEASE = re.compile(r"^((\d+\.\d+\.\d+)-\d+)-pve$")
# ELRepo's kernel-ml / kernel-lt for EL (`5.14.8-1.el8.elrepo.x86_64`): the spec builds the
# kernel.org tarball its version names, with no patch (github.com/elrepo/kernel)
_ELREPO = re.compile(r"^(\d+\.\d+\.\d+)-\d+\.el\d+(?:_\d+)?\.elrepo(?:\.[a-z0-9_]+)?$")
# kernel.ubuntu.com's mainline builds: unpatched upstream releases, 6.8.9 as 6.8.9-060809-generic
_MAINLINE = re.compile(r"^(\d+)\.(\d+)\.(\d+)-(\d{2})(\d{2})(\d{2})(?:rc\d+)?"
                       r"-(?:generic|lowlatency)$")
_UBUNTU_LINE_ABI = re.compile(r"^(\d+\.\d+\.0)-(\d{1,5})$")
_ARCH = re.compile(r"\.(?:x86_64|aarch64|ppc64le|s390x|i686)$")
# Oracle's Unbreakable Enterprise Kernel keeps one X.Y.Z for years and backports into it
# (5.4.17-2136.307.3.1.el8uek): its X.Y.Z is no stable release
_UEK = re.compile(r"\.el\d+uek(?:[._]|$)")
_PROC_DEBIAN = re.compile(r"\bDebian (\d+\.\d+\.\d+)-\d+\S*")
_SIGNATURE = re.compile(r"^Ubuntu \S+ (\d+\.\d+\.\d+)\s*$")


# releases whose own name states the upstream release they are built on (group 1), tried in
# this order after the EL and distribution-ABI forms: (pattern, family, how)
_NAMES_ITS_BASE = (
    (_DEBIAN_UPSTREAM, "Debian", "the release names its upstream version"),
    (_FEDORA, "Fedora", "Fedora builds upstream stable releases"),
    (_ELREPO, "ELRepo", "ELRepo's kernel-ml/kernel-lt build the kernel.org release they are "
                        "named after, unpatched"),
    (_PROXMOX, "Proxmox", "Proxmox VE names the upstream release its kernel is built on"),
    (_PLAIN, UPSTREAM, "an upstream release"),
    (_LOCAL, "local build", "stable release {} with a local version suffix"),
)


@dataclass(frozen=True)
class KernelBuild:
    """What is known of the running kernel build: `line` (upstream / elN / None) and the
    version compared on that line (the upstream base, or the EL release itself)."""

    release: Optional[str]
    line: Optional[str] = None
    version: Optional[str] = None  # upstream base X.Y.Z, or the EL release
    family: Optional[str] = None  # debian / ubuntu / fedora / upstream / rhel
    how: str = ""  # how the line and version were found, for the verdict's reason

    @property
    def known(self) -> bool:
        """Whether the build is placed on a line known issues are stated on."""
        return self.line is not None and self.version is not None

    def label(self) -> str:
        """`6.1.0-18-amd64 (Debian, upstream 6.1.76)` for reasons and tables."""
        if not self.release:
            return "an unrecorded kernel"
        if self.line == UPSTREAM and self.family != UPSTREAM and self.version:
            return f"{self.release} ({self.family}, upstream {self.version})"
        return self.release


def identify(release: Optional[str], *, proc_version: Optional[str] = None,
             signature: Optional[str] = None,
             builds: Optional[Mapping[str, Mapping[str, str]]] = None,
             lines: Optional[Mapping[str, Collection[str]]] = None,
             proxmox: Optional[Mapping[str, tuple[str, str]]] = None,
             flavours: Optional[Mapping[str, str]] = None) -> KernelBuild:
    """Place a kernel release on a line; `builds` is the catalog's ABI table per distribution
    ({"debian": {"6.1.0-18": "6.1.76"}, "ubuntu": {...}}), `lines` the Ubuntu uploads read
    per Ubuntu line ({"ubuntu-6.8": ["6.8.0-41", ...]}), `proxmox` the Proxmox releases
    built on one of them ({"6.8.12-30": ("ubuntu-6.8", "6.8.0-130")}), `flavours` Ubuntu's
    cloud kernel ABIs and the master ABI each is built on ({"5.15.0-1121-aws": "5.15.0-204"})."""
    rel = release.strip() if isinstance(release, str) else None
    if not rel or len(rel) > 128:
        return KernelBuild(None)
    tables = builds or {}
    if _UEK.search(rel):
        return KernelBuild(rel, None, None, "UEK", "Oracle's UEK keeps one upstream base and "
                           "backports into it, so its release names no stable release")
    el = None if _ELREPO.match(rel) else _EL.match(rel)
    if el:
        base, _build, line = el.group(1), el.group(2), el.group(3)
        if EL_BASES.get(line) == base:  # compared without the architecture
            return KernelBuild(rel, line, _ARCH.sub("", rel), "rhel", f"a {line} build")
        return KernelBuild(rel, None, None, None, f"'.{line}' on kernel {base}, which is not "
                           f"the kernel RHEL ships for {line}")
    sig = _SIGNATURE.match(signature.strip()) if isinstance(signature, str) else None
    m = _MAINLINE.match(rel)
    if m and [digits_key(x) for x in m.group(1, 2, 3)] == [digits_key(x) for x in m.group(4, 5, 6)]:
        base = ".".join(m.group(1, 2, 3))
        return KernelBuild(rel, UPSTREAM, base, "Ubuntu mainline",
                           "an unpatched upstream build of kernel.ubuntu.com's mainline archive")
    deb = _PROC_DEBIAN.search(proc_version) if isinstance(proc_version, str) else None
    for family, abi, said, how in (
            ("Ubuntu", _UBUNTU_ABI, sig, "its /proc/version_signature names the upstream base"),
            ("Debian", _DEBIAN_ABI, deb, "its /proc/version names the Debian package")):
        m = abi.match(rel)
        if m:
            key, cloud = m.group(1), ""
            if family == "Ubuntu" and m.group(2) in CLOUD_FLAVOURS:
                master = (flavours or {}).get(f"{key}-{m.group(2)}")
                if not master and said:  # the host names its base itself
                    return KernelBuild(rel, UPSTREAM, said.group(1), family, how)
                if not master:
                    return KernelBuild(rel, None, None, family, f"Ubuntu's {m.group(2)} kernel "
                                       f"ABI {key} is not in the catalog's table of cloud "
                                       "kernels")
                key, cloud = master, f"Ubuntu's {m.group(2)} kernel {m.group(1)} is built on "\
                    f"the master upload {master}; "
            own = _ubuntu_line(key, lines or {}) if family == "Ubuntu" else None
            if own:
                return KernelBuild(rel, own, key, family, f"{cloud}Ubuntu ABI {key}, an "
                                   f"upload of the {own} line whose changelog the catalog read")
            placed = _by_abi(rel, family, key, said.group(1) if said else None, how,
                             tables.get(family.lower(), {}))
            return replace(placed, how=cloud + placed.how) if cloud else placed
    pve = _PVE_RELEASE.match(rel)
    if pve and proxmox and any(k.startswith(pve.group(2) + "-") for k in proxmox):
        on = proxmox.get(pve.group(1))
        if on:
            return KernelBuild(rel, on[0], on[1], "Proxmox", f"Proxmox VE {pve.group(1)} is "
                               f"built on Ubuntu's upload {on[1]} (Proxmox's changelog)")
        return KernelBuild(rel, None, None, "Proxmox", f"Proxmox VE {pve.group(1)} is built on "
                           f"an Ubuntu upload past upstream {pve.group(2)} that the catalog "
                           "did not read (or carries fixes of its own)")
    for pattern, family, how in _NAMES_ITS_BASE:
        m = pattern.match(rel)
        if m:
            return KernelBuild(rel, UPSTREAM, m.group(1), family, how.format(m.group(1)))
    return KernelBuild(rel, None, None, None, "a kernel release of no family the catalog "
                       "places (a derivative with its own patches)")


def _ubuntu_line(abi: str, lines: Mapping[str, Collection[str]]) -> Optional[str]:
    """The Ubuntu line whose read uploads include this ABI, else None (never guessed)."""
    return next((line for line, abis in lines.items()
                 if line in UBUNTU_LINES and abi in abis), None)


def _by_abi(rel: str, family: str, abi: str, said: Optional[str], how: str,
            table: Mapping[str, str]) -> KernelBuild:
    """A distribution ABI's build: the base the host itself names (`said`, `how`), else the
    catalog's table row for the ABI, else unplaced (an ABI is never guessed)."""
    if said:
        return KernelBuild(rel, UPSTREAM, said, family, how)
    base = table.get(abi)
    if base:
        return KernelBuild(rel, UPSTREAM, base, family,
                           f"{family} ABI {abi} is built on {base} (catalog table)")
    return KernelBuild(rel, None, None, family, f"{family} ABI {abi} is not in the catalog's "
                       f"table of {family} kernel builds")


# ------------------------------------------------------------------ ordering on one line
def _upstream_key(version: str) -> tuple[int, int, int] | None:
    m = _NUM.match(version)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def valid(line: str, version: str) -> bool:
    """Whether `version` is a well-formed version on `line` (catalog validation)."""
    if line == UPSTREAM:
        return _upstream_key(version) is not None
    if line in UBUNTU_LINES:
        abi = _UBUNTU_LINE_ABI.match(version)
        return abi is not None and abi.group(1) == UBUNTU_LINES[line]
    el = _EL.match(version)
    return el is not None and el.group(3) == line and EL_BASES.get(line) == el.group(1)


def compare(line: str, a: str, b: str) -> int:
    """-1/0/1 of two versions on one line (upstream X.Y.Z numerically, EL as RPM versions)."""
    if line == UPSTREAM:
        ka, kb = _upstream_key(a), _upstream_key(b)
        if ka is None or kb is None:
            raise ValueError(f"not an upstream kernel version: {a if ka is None else b}")
        return (ka > kb) - (ka < kb)
    if line in UBUNTU_LINES:
        na, nb = _UBUNTU_LINE_ABI.match(a), _UBUNTU_LINE_ABI.match(b)
        if na is None or nb is None:
            raise ValueError(f"not an Ubuntu ABI: {a if na is None else b}")
        return (int(na.group(2)) > int(nb.group(2))) - (int(na.group(2)) < int(nb.group(2)))
    return rpmvercmp(a, b)


def cloud_flavour(build: KernelBuild) -> Optional[str]:
    """`aws` of an Ubuntu cloud kernel (5.15.0-1121-aws), else None."""
    m = _UBUNTU_ABI.match(build.release or "") if build.family == "Ubuntu" else None
    return m.group(2) if m and m.group(2) in CLOUD_FLAVOURS else None


def way_out(build: KernelBuild, target: str) -> str:
    """How a verdict names the kernel past every fix: an Ubuntu line's is an upload's ABI,
    which a Proxmox VE kernel or an Ubuntu cloud kernel reaches by being built on it."""
    cloud = cloud_flavour(build)
    if build.line in UBUNTU_LINES and cloud:
        return f"an Ubuntu {cloud} kernel built on the master upload {target} or later"
    if build.line in UBUNTU_LINES and build.family == "Proxmox":
        return (f"a Proxmox VE kernel built on Ubuntu's upload {target} or later, or of a "
                "later series")
    if build.line in UBUNTU_LINES:
        return f"an Ubuntu kernel of ABI {target} or later"
    return f"a kernel built on {target} or later"


def debian_release(release: str) -> Optional[str]:
    """The Debian release a `+debNN` kernel names (13 of 6.12.33+deb13-amd64), else None."""
    m = _DEBIAN_UPSTREAM.match(release)
    return m.group(2) if m else None


def el_minor(release: str) -> Optional[str]:
    """The minor release an EL z-stream build names itself (`8.4` of ...el8_4), else None."""
    el = _EL.match(release)
    return f"{el.group(3)[2:]}.{el.group(4)}" if el and el.group(4) else None


def _el_main_line(version: str) -> bool:
    """An EL main-line build (`4.18.0-490.el8`), not a z-stream one: RHEL 7's z-streams
    (`3.10.0-1160.119.1.el7`) carry no `_N`, so the dotted release says it."""
    el = _EL.match(version)
    return el is not None and "." not in el.group(2)


def stream(line: str, version: str) -> str:
    """The stream a fix covers: `6.1` of 6.1.84; the EL build number (`477` of
    4.18.0-477.10.1.el8_8); an Ubuntu line is one stream."""
    if line == UPSTREAM:
        key = _upstream_key(version)
        return f"{key[0]}.{key[1]}" if key else version
    if line in UBUNTU_LINES:
        return UBUNTU_LINES[line]
    el = _EL.match(version)
    return el.group(2).split(".")[0] if el else version


def fix_for(line: str, version: str, fixed: tuple[str, ...]) -> tuple[bool, Optional[str]]:
    """(covered, the fix this build needs): each fix covers its own stream from that release
    on; upstream, the highest fix (mainline's) every later stream too; on EL, a main-line
    fix (the build number alone) every later stream, a z-stream fix only its own. When not
    covered, the fix named is the one of the build's own stream, else the lowest fix above."""
    if not fixed:
        return False, None
    ordered = sorted(fixed, key=_sorter(line))
    mine = stream(line, version)
    for f in ordered:
        if stream(line, f) == mine:
            return compare(line, version, f) >= 0, f
    spanning = ordered[-1:] if line == UPSTREAM else [f for f in ordered if _el_main_line(f)]
    for f in spanning:
        if compare(line, version, f) >= 0:
            return True, f
    above = [f for f in ordered if compare(line, f, version) > 0]
    main = [f for f in above if f in spanning] if line != UPSTREAM else []
    named = main or above
    return False, named[0] if named else None


def _sorter(line: str) -> Callable[[str], SupportsAllComparisons]:
    """A sort key ordering versions of one line."""
    return functools.cmp_to_key(lambda a, b: compare(line, a, b))
