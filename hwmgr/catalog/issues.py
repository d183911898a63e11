"""Which known issues and firmware floors a device runs into, and the way out of them.

A driver-version range judges the version string the driver reports (vendor and in-tree
builds alike, never a kernel release; an issue may name the builds it speaks of, and a RHEL
kernel's in-tree build is judged only by ranges stated for it: RHEL backports fixes under
older version strings); a kernel range judges an in-tree build by the kernel build the host
runs (kbuild). A hit names the fix this very device needs: the first fixed
driver version, or the fix of the host's kernel stream (else the lowest later one).
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Optional, Sequence, Tuple

from hwmgr.catalog import kbuild, versions
from hwmgr.catalog.kbuild import KernelBuild
from hwmgr.catalog.model import (
    CONDITIONS,
    FirmwareRequirement,
    KernelRange,
    Knowledge,
    KnownIssue,
    VersionRange,
)
from hwmgr.catalog.refs import ref_hits
from hwmgr.errors import VersionError

Ids = Tuple[Optional[str], ...]  # vendor, device, subvendor, subdevice
_TOKEN = re.compile(r"\d+(?:\.\d+)+")

# Why a bad-severity hit makes a device outdated rather than known-bad, where no condition is
# the reason (docs/known-issues.md, "Known-bad or outdated"): known-bad is for a build a
# source ties to the defect. One owner: the verdict, the findings and `catalog stats` say these.
KERNEL_CVE = "a kernel CVE fix, applicability unassessed"
UNBOUNDED = "no first affected release stated"


@dataclass(frozen=True)
class Hit:
    """One known issue a device runs into: on its `driver` version or its `kernel` build."""

    issue: KnownIssue
    on: str  # "driver" or "kernel"
    fixed: Optional[str]  # the fix this device needs (None: no fix known)
    how: str  # why it matches, in words
    seen: Optional[bool] = None  # the issue's condition (only_when) seen met, unmet, unknown
    bounded: bool = True  # the range that matched names its first affected release

    @property
    def caveat(self) -> Optional[str]:
        """Why this bad-severity hit does not tie the device's build to the defect (None: it
        does, or the severity is not bad). A kernel range is a CVE record's: the kernel CNA
        gives every bug fix a CVE and leaves applicability to the user (its process document,
        docs/known-issues.md); a driver range without a first affected release says only
        where the fix is."""
        return caveat_of(self.issue, self.on, self.bounded)

    @property
    def armed(self) -> bool:
        """Known-bad here: a bad severity that a source ties to this build (no caveat), with
        no condition or one the host is seen to meet."""
        return self.issue.bad and self.caveat is None and \
            (self.issue.only_when is None or self.seen is True)

    @property
    def condition(self) -> Optional[str]:
        """The issue's condition in words, with what the host shows of it (None: none)."""
        cond = self.issue.only_when
        if cond is None:
            return None
        words = CONDITIONS.get(cond, cond)
        state = {True: "this host meets it", False: "this host is not seen to",
                 None: "hwmgr cannot see whether this host does"}[self.seen]
        return f"only when {words} ({state})"


def caveat_of(issue: KnownIssue, on: str, bounded: bool) -> Optional[str]:
    """The one rule: why a bad-severity hit `on` a driver or kernel range (`bounded`: the range
    names its first affected release) does not make a device known-bad; None when it does,
    or when the severity is not bad."""
    if not issue.bad:
        return None
    if on == "kernel":
        return KERNEL_CVE
    return None if bounded else UNBOUNDED


def ceiling(issue: KnownIssue) -> str:
    """The strongest verdict an issue can give a device, and why no stronger (what `catalog
    stats` counts): its best hit under caveat_of, a driver range naming its first affected
    release before an open one, either before a kernel range."""
    if not issue.bad:
        return "outdated: severity"
    if issue.driver_versions:
        why = caveat_of(issue, "driver", any(r.introduced for r in issue.driver_versions))
    else:
        why = caveat_of(issue, "kernel", True)
    if why:
        return f"outdated: {why}"
    return "known-bad" if issue.only_when is None else "known-bad where its condition is seen"


def observed(dev: Mapping[str, object]) -> dict[str, bool]:
    """The conditions a device's record shows met or unmet; the rest cannot be seen. SR-IOV:
    the function's sriov record (VFs enabled or not)."""
    sriov = dev.get("sriov")
    if isinstance(sriov, Mapping):
        numvfs = sriov.get("numvfs")
        return {"sriov": isinstance(numvfs, int) and numvfs > 0}
    return {}


def _applies(refs: Sequence[str], ids: Ids) -> bool:
    return not refs or any(ref_hits(r, ids) for r in refs)


def in_range(version: str, rng: VersionRange, scheme: str, kernel: Optional[str]) -> bool:
    """introduced <= version < fixed in the driver's scheme; VersionError when a bound cannot
    be compared with the version (a range is never guessed across shapes)."""
    if rng.introduced and versions.compare(version, rng.introduced, scheme, kernel=kernel) < 0:
        return False
    return not (rng.fixed and versions.compare(version, rng.fixed, scheme,
                                               kernel=kernel) >= 0)


def _driver_hit(issue: KnownIssue, version: str, scheme: str,
                kernel: Optional[str]) -> Optional[Hit]:
    for rng in issue.driver_versions:
        try:
            inside = in_range(version, rng, scheme, kernel)
        except VersionError:
            continue
        if inside:
            if rng.fixed:
                span = f"{rng.introduced} up to {rng.fixed}" if rng.introduced else \
                    f"before {rng.fixed}"
            else:
                span = f"{rng.introduced} on, no fix yet" if rng.introduced else "no fix yet"
            return Hit(issue, "driver", rng.fixed, f"driver {version} is in the affected "
                       f"range ({span})", bounded=rng.introduced is not None)
    return None


def _kernel_hit(issue: KnownIssue, build: KernelBuild) -> Optional[Hit]:
    for rng in issue.kernels:
        if rng.line != build.line or build.version is None:
            continue
        try:
            if rng.introduced and kbuild.compare(rng.line, build.version, rng.introduced) < 0:
                continue
            covered, fix = kbuild.fix_for(rng.line, build.version, rng.fixed)
        except ValueError:
            continue
        if covered or _past_what_was_read(rng, build.version, fix):
            continue
        since = f" (affected since {rng.introduced})" if rng.introduced else ""
        need = f"fixed in {fix}" if fix else "no fix yet"
        return Hit(issue, "kernel", fix, f"kernel {build.label()} is affected{since}; {need}")
    return None


def _past_what_was_read(rng: KernelRange, version: str, fix: Optional[str]) -> bool:
    """A build of a stream the source was read only up to an earlier build, with no fix of
    its own listed: the source says nothing of it, so it is not judged."""
    if not rng.read_to:
        return False
    mine = kbuild.stream(rng.line, version)
    read = dict(rng.read_to)
    if fix is not None and kbuild.stream(rng.line, fix) == mine:
        return False
    if mine not in read:  # a stream newer than every one the source was read for
        return mine.isdigit() and all(s.isdigit() and int(mine) > int(s) for s in read)
    return kbuild.compare(rng.line, version, read[mine]) > 0


def judged_on_line(know: Knowledge, ids: Ids, build: KernelBuild) -> int:
    """How many of the driver's known issues on the build's kernel line speak of this very
    build (its stream read far enough, or covered by a fix): what an "ok" may claim."""
    n = 0
    for issue in know.issues:
        if not _applies(issue.applies_to, ids):
            continue
        for rng in issue.kernels:
            if rng.line != build.line or build.version is None:
                continue
            try:
                covered, fix = kbuild.fix_for(rng.line, build.version, rng.fixed)
            except ValueError:
                continue
            n += covered or not _past_what_was_read(rng, build.version, fix)
    return n


def hits(know: Knowledge, ids: Ids, version: str, scheme: str, build: KernelBuild, *,
         kernel_release: bool, in_tree: bool,
         seen: Optional[Mapping[str, bool]] = None) -> list[Hit]:
    """Every known issue of the driver this device runs into, worst first: known-bad ones
    (armed), then bad severities with a caveat (those with an unmet condition last), then
    the rest."""
    out: list[Hit] = []
    for issue in know.issues:
        if not _applies(issue.applies_to, ids) or not _on_its_kernels(issue, build.release):
            continue
        hit = None
        own = issue.build is None or issue.build == ("in-tree" if in_tree else "vendor")
        if in_tree and build.family == "rhel" and issue.build is None:
            own = False  # RHEL backports into its own builds: upstream numbering misleads
        if issue.driver_versions and not kernel_release and own:
            hit = _driver_hit(issue, version, scheme, build.release)
        if hit is None and issue.kernels and in_tree and build.known:
            hit = _kernel_hit(issue, build)
        if hit is not None:
            cond = issue.only_when
            out.append(hit if cond is None else replace(hit, seen=(seen or {}).get(cond)))
    out.sort(key=lambda h: (not h.armed, not h.issue.bad,
                            h.issue.only_when is not None and h.seen is not True, h.issue.id))
    return out


def _on_its_kernels(issue: KnownIssue, release: Optional[str]) -> bool:
    """Whether the host runs a kernel the issue strikes on: any, unless the source names
    some (`kernel_releases`); an unrecorded release is then not claimed."""
    if not issue.kernel_releases:
        return True
    return bool(release) and any(fnmatch.fnmatchcase(str(release), g)
                                 for g in issue.kernel_releases)


def judged_versions(know: Knowledge, version: str, scheme: str,
                    kernel: Optional[str], *, in_tree: bool = False) -> int:
    """How many of the driver's version-range issues that speak of this kind of build could
    be compared with `version`: 0 means the driver-version knowledge says nothing of it."""
    n = 0
    for issue in know.issues:
        if issue.build not in (None, "in-tree" if in_tree else "vendor"):
            continue
        for rng in issue.driver_versions:
            try:
                in_range(version, rng, scheme, kernel)
            except VersionError:
                continue
            n += 1
            break
    return n


def highest(found: Sequence[str], cmp: Callable[[str, str], int]) -> Optional[str]:
    """The greatest of some versions under `cmp` (None for none)."""
    best: Optional[str] = None
    for v in found:
        if best is None or cmp(v, best) > 0:
            best = v
    return best


def driver_target(found: Sequence[Hit], scheme: str, kernel: Optional[str]) -> Optional[str]:
    """The lowest driver version past every driver-version hit's fix."""
    fixes = [h.fixed for h in found if h.on == "driver" and h.fixed]

    def cmp(a: str, b: str) -> int:
        try:
            return versions.compare(a, b, scheme, kernel=kernel)
        except VersionError:
            return 0
    return highest(fixes, cmp)


def kernel_target(found: Sequence[Hit], build: KernelBuild) -> Optional[str]:
    """The lowest kernel version (on the build's line) past every kernel hit's fix."""
    fixes = [h.fixed for h in found if h.on == "kernel" and h.fixed]
    line = build.line or kbuild.UPSTREAM
    return highest(fixes, lambda a, b: kbuild.compare(line, a, b))


def kernel_fix(build: KernelBuild, target: str) -> str:
    """The command (or step) that puts a kernel at or past `target` on this host's family."""
    if build.family == "Debian":
        return f"apt-get install linux-image-amd64  # a Debian kernel built on {target} or later"
    cloud = kbuild.cloud_flavour(build)
    if cloud:
        return f"apt-get install linux-{cloud}  # {kbuild.way_out(build, target)}"
    if build.family == "Ubuntu" and build.line in kbuild.UBUNTU_LINES:
        return (f"apt-get install linux-image-generic  # {kbuild.way_out(build, target)} "
                "(linux-generic-hwe-22.04 on 22.04's HWE kernel)")
    if build.family == "Proxmox":
        return f"apt-get install proxmox-default-kernel  # {kbuild.way_out(build, target)}"
    if build.family == "Ubuntu":
        return (f"apt-get install linux-image-generic  # an Ubuntu kernel built on {target} "
                "or later")
    if build.family == "rhel":
        return f"dnf upgrade kernel  # {target} or later"
    return f"install a kernel {target} or later"


def driver_fix(driver: str, target: str, upgradable: bool) -> str:
    """`hwmgr upgrade` when the catalog can fetch the target; else the step in words."""
    if upgradable:
        return f"hwmgr upgrade {shlex.quote(driver)} --to {shlex.quote(target)}"
    return f"install {driver} {target} or later from the vendor (the catalog has no " \
        "verified source for it)"


# ------------------------------------------------------------------ firmware floors
def _first_token(value: str) -> Optional[str]:
    m = _TOKEN.search(value)
    return m.group(0) if m else None


def firmware_at_least(current: str, minimum: str, scheme: str) -> bool:
    """current >= minimum under the firmware scheme; when the shapes differ, the first
    version-shaped token of each (ice's '4.30 0x8001af27 1.3429.0' against '4.30').
    VersionError when neither way compares."""
    try:
        return versions.compare(current, minimum, scheme) >= 0
    except VersionError:
        a, b = _first_token(current), _first_token(minimum)
        if a is None or b is None:
            raise
        return versions.rpmvercmp(a, b) >= 0


def firmware_floors(know: Knowledge, ids: Ids, version: str, scheme: str,
                    kernel: Optional[str], *,
                    kernel_release: bool) -> list[FirmwareRequirement]:
    """The firmware requirements that hold for this device and driver version."""
    out = []
    for req in know.firmware:
        if not _applies(req.applies_to, ids):
            continue
        if req.driver_versions:
            if kernel_release:
                continue
            inside = False
            for rng in req.driver_versions:
                try:
                    inside = inside or in_range(version, rng, scheme, kernel)
                except VersionError:
                    continue
            if not inside:
                continue
        out.append(req)
    return out
