"""Verdicts: a matched device's driver version judged against its catalog entry."""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Mapping, Protocol, Sequence, TypedDict

from hwmgr.catalog import issues, kbuild, versions
from hwmgr.catalog.entry import DriverEntry, Source, VersionEntry
from hwmgr.catalog.kbuild import KernelBuild
from hwmgr.catalog.model import Knowledge
from hwmgr.catalog.refs import FIRMWARE_SCHEME, driver_key, inbox_policies
from hwmgr.catalog.support import Support, last_month
from hwmgr.errors import VersionError


class Match(Protocol):
    """What a verdict needs of the loader's match (load.Match): the loader imports this
    module, so the verdict names the shape, not the class."""

    @property
    def driver(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def entry(self) -> DriverEntry: ...
    @property
    def name(self) -> str: ...


class Catalog(Protocol):
    """What a verdict asks the loaded catalog (load.Catalog)."""

    def recommended(self, dev: Mapping[str, object],
                    kernel: str | None = None) -> tuple[str, VersionEntry] | None: ...

    def applicable(self, m: Any, dev: Mapping[str, object],  # m: a load.Match
                   kernel: str | None) -> dict[str, VersionEntry]: ...

    def knowledge(self, name: str) -> Knowledge: ...

    def kernel_build(self, kernel: str | None) -> KernelBuild: ...

    def distribution(self, build: KernelBuild) -> str | None: ...

    def support(self) -> Support: ...


class Firmware(TypedDict, total=False):
    """The recommended version's firmware floor against what the device runs."""

    min: str
    current: object  # the inventory's raw value (None when unknown)
    ok: bool | None  # None: not comparable (see note) or unknown
    note: str


class _VerdictKeys(TypedDict):
    entry: str
    status: str  # one of load.VERDICTS
    recommended_version: str | None
    reason: str
    match: str  # one of load.LEVELS
    device_name: str


class _IssueRefKeys(TypedDict):
    """A known issue a device runs into, compactly: the catalog holds the rest."""

    id: str
    severity: str
    symptom: str
    on: str  # driver or kernel
    fixed: str | None  # the fix this device needs
    url: str | None


class IssueRef(_IssueRefKeys, total=False):
    """A known issue a device runs into; `only_when` where it needs a condition, `caveat`
    where its bad severity does not make the device known-bad."""

    only_when: str  # the condition, with what the host shows of it
    caveat: str  # why its bad severity does not make the device known-bad (issues.Hit.caveat)


class FirmwareFloor(TypedDict):
    """A firmware requirement of the driver version the device runs."""

    id: str
    min: str
    ok: bool | None
    url: str | None
    feature: str | None  # the floor holds for this feature only


class Verdict(_VerdictKeys, total=False):
    """A device's catalog verdict, as inventory and check report it."""

    firmware: Firmware
    listed_status: str  # the catalog status of the version found, when it is listed
    in_tree: bool  # judged as the kernel's own build (by kernel build or in-tree policy)
    kernel_build: str  # the build judged, as people read it
    known_issues: list[IssueRef]
    target: str  # the way out: a driver version or kernel version at or past every fix
    fix: str  # the command (or step) that gets there
    firmware_floors: list[FirmwareFloor]


def _kernel_ok(globs: Sequence[str] | None, kernel: str | None) -> bool:
    """No globs, or an unknown kernel, never excludes; otherwise one glob must match."""
    if not globs or not kernel:
        return True
    return any(fnmatch.fnmatchcase(kernel, g) for g in globs)

_FROM_STATUS = {"recommended": "ok", "known-good": "ok", "baseline": "ok",
                "deprecated": "outdated", "known-bad": "known-bad"}


# in-kernel markers: Intel's -k (5.1.0-k, 2.8.20-k), RHEL's backport tag (00.00.06.14-rh1)
_K_MARK = re.compile(r"-k(?:$|[-_.])|-rh\d[\d.]*$")


def decide(cat: Catalog, m: Match, dev: Mapping[str, object], kernel: str | None,
           build: KernelBuild | None = None) -> Verdict:
    """Apply the verdict rules: driver binding, then the known issues the device runs into
    (by its driver version, and for an in-tree build by the kernel build), then the in-tree
    build's identity (kernel build, in-tree policy, the host's own distribution), then the
    listed status and the order against the recommended version (never across schemes).
    `unknown` when something could not be read (no driver, no version); `uncatalogued` when
    the version was read but the catalog has no verdict on it."""
    entry, name = m.entry, m.driver
    scheme = entry["version_scheme"]
    build = build or cat.kernel_build(kernel)
    rec = cat.recommended(dev, kernel)
    rec_ver = rec[0] if rec else None
    out: Verdict = {"entry": name, "status": "unknown", "recommended_version": rec_ver,
                    "reason": "", "match": m.level, "device_name": m.name}
    if rec and rec[1].get("firmware"):
        out["firmware"] = _firmware(rec[1]["firmware"]["min"], dev.get("firmware_version"),
                                    entry.get("firmware_scheme", FIRMWARE_SCHEME))

    def settle(status: str, reason: str) -> Verdict:
        out["status"], out["reason"] = status, reason
        return out

    def unknown(reason: str) -> Verdict:  # something about the device could not be read
        return settle("unknown", reason)

    def uncatalogued(reason: str) -> Verdict:  # read, but the catalog has no verdict on it
        return settle("uncatalogued", reason)

    norm = driver_key(name)
    accepted = {norm} | {driver_key(p) for p in entry.get("pci_drivers", [])}
    nic, pci = driver_key(dev.get("driver")), driver_key(dev.get("pci_driver"))
    if not nic and not pci:
        return unknown("no driver is bound to this device")
    if not ({nic, pci} & accepted):
        return unknown(f"bound to {dev.get('driver') or dev.get('pci_driver')}, "
                       f"not to {name} (the catalog entry)")
    if nic != norm and not dev.get("interfaces"):  # e.g. its netdev is in another netns
        return unknown(f"no network interface of this device is visible here (another "
                       f"network namespace?), so whether {name} drives it cannot be read; "
                       "check from the namespace that holds its interface")
    if nic != norm:
        return unknown(f"{name} is not driving this device (driver: {dev.get('driver')})")
    raw = dev.get("driver_version")
    raw = raw.strip() if isinstance(raw, str) else None
    if not raw:
        return unknown(f"{name} version is unknown")
    try:
        kernel_release = versions.parse_driver_version(raw, kernel).kernel_release
    except VersionError:
        kernel_release = False
    if kernel_release and not build.release:  # the driver names the kernel it belongs to
        build = cat.kernel_build(raw)
    listed = None if kernel_release else _listed(cat.applicable(m, dev, kernel), raw, scheme,
                                                 kernel)
    in_tree = kernel_release or bool(_K_MARK.search(raw)) or bool(listed and (
        listed.get("distributions") or (listed["status"] == "baseline" and listed.get(
            "kernels"))))  # a distribution's or a kernel's build, not a vendor release
    if in_tree and listed is None and not kernel_release and any(
            p.get("kernels") and _kernel_ok(p["kernels"], kernel) for p in inbox_policies(entry)):
        in_tree = False  # this kernel's own build reports the release: this one is not it
    know = cat.knowledge(name)
    ids = tuple(v if isinstance(v, str) else None for v in (
        dev.get(k) for k in ("vendor_id", "device_id", "subsystem_vendor_id",
                             "subsystem_device_id")))
    if build.release:
        out["kernel_build"] = build.label()
    if not kernel_release:
        _floors(out, know, ids, raw, scheme, kernel, dev, entry)
    found = issues.hits(know, ids, raw, scheme, build, kernel_release=kernel_release,
                        in_tree=in_tree, seen=issues.observed(dev))
    if found:
        _known(out, found, name, scheme, build, rec, in_tree)
        if listed is not None and listed["status"] == "known-bad" and \
                out["status"] != "known-bad":  # the listing's own evidence still stands
            out["listed_status"] = "known-bad"
            out["status"], out["reason"] = "known-bad", f"{listed['reason']}; also {out['reason']}"
        return out
    if in_tree and (listed is None or listed.get("distributions")
                    or listed["status"] == "baseline"):
        # (a listed verdict of its own, from a field note or a vendor, speaks of the
        # version string wherever it runs)
        return _in_tree(out, cat, know, name, raw, build, kernel, listed, entry,
                        kernel_release, ids, dev.get("driver_version_source"))
    try:
        cmp_rec = versions.compare(raw, rec_ver, scheme, kernel=kernel) if rec_ver else None
    except VersionError as exc:
        if listed is None:
            return uncatalogued(f"cannot compare {raw} with recommended {rec_ver}: {exc}")
        cmp_rec = None
    if listed is not None:
        st = listed["status"]
        out["listed_status"] = st
        if st == "known-good" and cmp_rec is not None and cmp_rec < 0:
            return settle("outdated", f"known-good, but {rec_ver} is recommended")
        return settle(_FROM_STATUS[st], listed["reason"])
    if cmp_rec is None:
        checked = issues.judged_versions(know, raw, scheme, kernel)
        if checked:
            return settle("ok", f"{name} {raw} is not listed; none of the {checked} known "
                          "issues stated in driver versions affects it")
        return uncatalogued(f"{name} {raw} is not in the catalog")
    if cmp_rec < 0:
        return settle("outdated", f"{raw} is older than the recommended {rec_ver}")
    word = "the same as" if cmp_rec == 0 else "newer than"
    return settle("ok", f"{raw} is not listed but {word} the recommended {rec_ver}")


def _known(out: Verdict, found: list[issues.Hit], name: str, scheme: str,
           build: KernelBuild, rec: tuple[str, VersionEntry] | None,
           in_tree: bool) -> Verdict:
    """The verdict of a device that runs into known issues: known-bad for data loss, crash,
    link down or security that a source ties to this build (issues.Hit.armed: no caveat, no
    condition the host is not seen to meet), else outdated; the way out past every fix (for
    an in-tree build hit by kernel issues, a kernel first: a vendor driver is the other way)."""
    worst = found[0].issue
    out["status"] = "known-bad" if found[0].armed else "outdated"
    out["known_issues"] = [_ref(h) for h in found]
    more = f" and {len(found) - 1} more known issue(s)" if len(found) > 1 else ""
    drv_target = issues.driver_target(found, scheme, build.release)
    krn_target = issues.kernel_target(found, build)
    ways = []
    if drv_target:
        upgradable = False
        if rec is not None:
            try:
                upgradable = versions.compare(rec[0], drv_target, scheme) >= 0
            except VersionError:
                upgradable = False
        target = rec[0] if upgradable and rec else drv_target
        out["target"], out["fix"] = target, issues.driver_fix(name, target, upgradable)
        ways.append(f"{name} {target}")
    if krn_target:
        if in_tree or "target" not in out:
            out["target"], out["fix"] = krn_target, issues.kernel_fix(build, krn_target)
        ways.insert(0 if in_tree else len(ways), kbuild.way_out(build, krn_target))
    way = " or ".join(ways) if ways else "no fix is known yet"
    cond = "".join(f", {c}" for c in (found[0].condition, found[0].caveat) if c)
    out["reason"] = (f"{worst.id} ({worst.severity}{cond}): {worst.symptom.rstrip('. ')}"
                     f"{more}; {found[0].how}; the way out: {way}")
    return out


def _ref(hit: issues.Hit) -> IssueRef:
    """The compact form of a hit, with its condition and caveat only where it has them."""
    ref: IssueRef = {"id": hit.issue.id, "severity": hit.issue.severity,
                     "symptom": hit.issue.symptom, "on": hit.on, "fixed": hit.fixed,
                     "url": hit.issue.url}
    if hit.condition:
        ref["only_when"] = hit.condition
    if hit.caveat:
        ref["caveat"] = hit.caveat
    return ref


def _in_tree(out: Verdict, cat: Catalog, know: Knowledge, name: str, raw: str,
             build: KernelBuild, kernel: str | None, listed: VersionEntry | None,
             entry: DriverEntry, kernel_release: bool,
             ids: tuple[str | None, ...], source: object = None) -> Verdict:
    """An in-tree build with no known issue: judged by the kernel build it belongs to, never
    by another distribution's verdict."""
    out["in_tree"] = True
    policies = inbox_policies(entry) if kernel_release else []
    inbox = next((p for p in policies if _kernel_ok(p.get("kernels"), kernel)), None)
    dist = cat.distribution(build)
    n = issues.judged_on_line(know, ids, build) if build.known else 0
    if n:
        whose = f"{_pretty(dist)} ({build.release})" if dist else build.label()
        if inbox is not None:
            out["listed_status"] = inbox["status"]
        elif listed is not None and dist and _same_release(dist, listed.get("distributions")):
            out["listed_status"] = listed["status"]
        out["status"], out["reason"] = "ok", (
            f"in-tree {name} of {whose}: none of the {n} known issues of {name} stated for "
            f"this {build.line} build affects it")
        return out
    if inbox is not None:  # named by this very kernel (its globs); its text may name others
        out["listed_status"] = inbox["status"]
        whose = f"{_pretty(dist)} ({build.release})" if dist else build.label()
        reason = inbox["reason"] if inbox["status"] != "baseline" else (
            f"the in-tree {name} of {whose}, a kernel the catalog's in-tree policy covers "
            f"({', '.join(inbox.get('kernels', []))}); no known issue recorded")
        out["status"], out["reason"] = _FROM_STATUS[inbox["status"]], reason
        return out
    if listed is not None and listed.get("kernels") and build.release and _kernel_ok(
            listed["kernels"], kernel):
        out["listed_status"] = listed["status"]
        whose = f"{_pretty(dist)} ({build.release})" if dist else build.label()
        out["status"], out["reason"] = _FROM_STATUS[listed["status"]], (
            f"the in-tree {name} {raw} of {whose}, a kernel the catalog lists this version "
            "for; no known issue recorded" if listed["status"] == "baseline"
            else listed["reason"])
        return out
    if listed is not None and dist and _same_release(dist, listed.get("distributions", ())):
        out["listed_status"] = listed["status"]
        word = "no known issue recorded" if listed["status"] == "baseline" else listed["reason"]
        out["status"], out["reason"] = _FROM_STATUS[listed["status"]], (
            f"the in-tree {name} {raw} of {dist}, the distribution this kernel "
            f"({build.release}) belongs to; {word}")
        return out
    checked = 0 if build.release or kernel_release else issues.judged_versions(
        know, raw, str(entry["version_scheme"]), None, in_tree=True)
    if checked:  # what the version itself tells, said as no more than that
        out["status"], out["reason"] = "ok", (
            f"none of the {checked} known issues stated in {name} versions affects {raw}; "
            "the host's kernel release is not recorded, so issues stated for kernel builds "
            "were not checked")
        return out
    over = _past_support(cat, name, raw, build, listed, source)
    if over:
        out["listed_status"] = listed["status"] if listed else "baseline"
        out["status"], out["reason"] = "outdated", over
        return out
    if not build.release:
        why = "the host's kernel release is not recorded"
    elif build.known:
        where = dist
        why = (f"the catalog states no {name} issue ranges for {build.line} kernel builds and "
               f"does not list {raw} as {where}'s build" if dist else
               f"the catalog states no {name} issue ranges for {build.line} kernel builds")
    else:
        why = build.how
    out["status"], out["reason"] = "uncatalogued", (
        f"uncatalogued kernel build: in-tree {name} {raw} on {build.label()}; {why}")
    return out


_BASE = re.compile(r"^(\d+\.\d+)(?:[.+-]|$)")


def _past_support(cat: Catalog, name: str, raw: str, build: KernelBuild,
                  listed: VersionEntry | None, source: object) -> str | None:
    """Why an in-tree version string the catalog cannot place is outdated, or None: every
    kernel line known to print it (its distribution releases and upstream series) is past
    its end of support, and so is the host's own upstream base when only that is known.
    The reason names no line the host may not run (`catalog show` lists them)."""
    if listed is None or (build.release and build.known):
        return None
    support = cat.support()
    lines = listed.get("distributions") or ()
    if source == "ethtool":  # not the lines whose ethtool -i prints the kernel release
        lines = [d for d in lines if d not in (listed.get("modinfo_only") or ())]
    ends = support.all_over(lines, listed.get("upstream") or ())
    if not ends:
        return None
    last = last_month(ends)
    since = f", the last of them in {last}" if last else ""
    every = (f"every one of the {len(ends)} kernel lines the catalog knows to print "
             f"{name} {raw} is past its end of support{since} (as of {support.as_of}; "
             f"`hwmgr catalog show {name}` lists them)")
    if not build.release:
        return (f"in-tree {name} {raw} on an unrecorded kernel: {every}; "
                "a supported kernel is the way out")
    base = _BASE.match(build.release)
    ended = support.series(base.group(1)) if base else None
    if ended is None:
        return None
    return (f"in-tree {name} {raw} on {build.label()}, a kernel built on upstream "
            f"{base.group(1) if base else ''}, a series past its end of support; {every}; "
            "a supported kernel is the way out")


_PRETTY = {"rhel": "RHEL", "debian": "Debian", "ubuntu": "Ubuntu"}


def _pretty(dist: str | None) -> str:
    """rhel-9.4 -> RHEL 9.4, debian-12 -> Debian 12."""
    name, _, ver = (dist or "").partition("-")
    return f"{_PRETTY.get(name, name)} {ver}".strip()


_REL = re.compile(r"^(rhel|centos|rocky|almalinux|alma|oracle|ol|debian|ubuntu)-(\d+(?:\.\d+)?)$")
_EL_NAMES = {"rhel", "centos", "rocky", "almalinux", "alma", "oracle", "ol"}


def _same_release(dist: str, listed: Sequence[str] | None) -> bool:
    """Whether the host's distribution (rhel-7.8, debian-12) is among a version's listed
    ones; the RHEL rebuilds (CentOS, Rocky, Alma, Oracle's RHCK) ship the same kernel."""
    want = _REL.match(dist)
    if not want:
        return False
    fam = "el" if want.group(1) in _EL_NAMES else want.group(1)
    for label in listed or ():
        got = _REL.match(str(label))
        if got and got.group(2) == want.group(2) and fam == (
                "el" if got.group(1) in _EL_NAMES else got.group(1)):
            return True
    return False


def _floors(out: Verdict, know: Knowledge, ids: tuple[str | None, ...], raw: str, scheme: str,
            kernel: str | None, dev: Mapping[str, object], entry: DriverEntry) -> None:
    """The firmware requirements of this driver version, each against what the device runs."""
    reqs = issues.firmware_floors(know, ids, raw, scheme, kernel, kernel_release=False)
    if not reqs:
        return
    current = dev.get("firmware_version")
    fw_scheme = entry.get("firmware_scheme", FIRMWARE_SCHEME)
    floors: list[FirmwareFloor] = []
    for req in reqs:
        ok: bool | None = None
        if isinstance(current, str) and current.strip():
            try:
                ok = issues.firmware_at_least(current, req.minimum, fw_scheme)
            except VersionError:
                ok = None
        floors.append({"id": req.id, "min": req.minimum, "ok": ok, "url": req.url,
                       "feature": req.feature})
    out["firmware_floors"] = floors


def _normal(version: str, scheme: str, kernel: str | None) -> str | None:
    """The form a driver scheme reduces a reported version to (decorations dropped), or None
    when it does not parse."""
    try:
        parsed = versions.parse(version, scheme, kernel=kernel)
    except VersionError:
        return None
    return parsed.normalized if isinstance(parsed, versions.DriverVersion) else version


def _listed(known: Mapping[str, VersionEntry], raw: str, scheme: str,
            kernel: str | None) -> VersionEntry | None:
    """The catalog's entry for a reported version: the exact string, else the one whose
    normalised form is the same (the field prints '3.0-1 (January 2015)' where modinfo says
    '3.0-1', '1.713.36-0 storm 7.13.15.0' where the catalog lists '1.713.36-0')."""
    if raw in known:
        return known[raw]
    want = _normal(raw, scheme, kernel)
    if want is None:
        return None
    return next((entry for key, entry in known.items()
                 if _normal(key, scheme, kernel) == want), None)


def _firmware(minimum: str, current: object, scheme: str) -> Firmware:
    """Firmware requirement of the recommended version vs what the device runs."""
    fw: Firmware = {"min": minimum, "current": current, "ok": None}
    if isinstance(current, str) and current.strip():
        try:
            fw["ok"] = versions.compare(current, minimum, scheme) >= 0
        except VersionError as exc:
            fw["note"] = str(exc)
    return fw


def source_refusal(source: Source | None) -> str | None:
    """Why an upgrade must refuse to fetch this source (None if it may): no source, an
    unverified one (no known checksum), or plain http without allow_http."""
    if not source:
        return "the catalog gives no source for this version"
    if source.get("verified") is False or not source.get("sha256"):
        named = source.get("url") or source.get("filename")
        return f"source {named} is not verified (no known sha256/size)"
    if str(source.get("url", "")).startswith("http://") and source.get("allow_http") is not True:
        return f"source {source.get('url')} is plain http and not marked allow_http"
    return None
