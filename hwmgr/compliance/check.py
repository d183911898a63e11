"""`hwmgr check`: the host judged against the catalog, one finding per item, and the exit code.

Driver and firmware findings come from the inventory's catalog verdicts (known-bad or
outdated is drift, fixed by `hwmgr upgrade`); setting findings from every interface a
catalog entry governs (its PCI device matches the entry, or its netdev driver is one of the
entry's `netdev_drivers`), with conditional rules evaluated on that interface; sysctl
findings from the catalog's host rules. Only the ethtool sub-commands the rules need are
run, `ip -d link show` once for all links, and the sysctls the rules name: the same reads a
snapshot records, so `check --root SNAPSHOT` judges exactly what `check` judges live.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, cast

from hwmgr.catalog.load import Catalog
from hwmgr.catalog.refs import Cite, cite, inbox_policies
from hwmgr.catalog.verdict import Verdict
from hwmgr.compliance import kernellog, rules
from hwmgr.compliance.ethtool import parse_version
from hwmgr.compliance.fixes import upgrade_fix
from hwmgr.compliance.iplink import LinkInfo, parse_ip_link
from hwmgr.compliance.items import FIRMWARE_MIN, KNOWN_ISSUE, ItemValue, Status
from hwmgr.compliance.judge import LAYERS, Finding, judge_setting, judge_sysctl, summary
from hwmgr.compliance.read import GROUP_WHAT, GROUPS, read_interface
from hwmgr.compliance.sysctl import read_sysctls
from hwmgr.errors import EXIT_DRIFT, EXIT_OK, EXIT_REBOOT_PENDING, EXIT_UNKNOWN, UsageError
from hwmgr.host import capture
from hwmgr.host.ifname import tool_safe
from hwmgr.host.seam import Host
from hwmgr.inventory import guard
from hwmgr.inventory.scan import Inventory, Scan, host_identity, parse_ethtool_i
from hwmgr.transaction.pending import reboot_pending

# the kernel gate's items for a host's managed drivers and newer kernels (host, state dir,
# the kernel it runs): lifecycle.gate.gaterecord.check_items, handed in by the verb (the gate's
# records live beside compliance, not below it)
GateItems = Callable[[Host, str, Optional[str]], "Sequence[Mapping[str, object]]"]

LAYER_WORDS = {"driver": "driver", "drivers": "driver", "firmware": "firmware",
               "setting": "setting", "settings": "setting", "sysctl": "sysctl",
               "sysctls": "sysctl"}
_OPTION = {group: option for option, group, *_ in GROUPS}
# the check data's schema (hwmgr/schemas/check.schema.json `$id`): 2 added `uncatalogued`,
# 3 cites each finding's source by reference and URL instead of carrying its evidence text
SCHEMA_VERSION = 3
_VERDICT_STATUS = {"ok": "ok", "outdated": "drift", "known-bad": "drift",
                   "uncatalogued": "uncatalogued", "unknown": "unknown"}


def parse_layers(text: str | None) -> set[str]:
    """`--layer driver,settings` → {"driver", "setting"}; UsageError naming a bad word."""
    if not text:
        return set(LAYERS)
    out = set()
    for word in (w.strip().lower() for w in text.split(",") if w.strip()):
        if word not in LAYER_WORDS:
            raise UsageError(f"--layer: {word!r} is not one of driver, firmware, settings, "
                             "sysctl")
        out.add(LAYER_WORDS[word])
    return out or set(LAYERS)


@dataclass
class Governed:
    """An interface a catalog entry governs, and how it was found."""

    ifname: str
    device: str | None  # PCI address, None for netdev_drivers matches (veth)
    entry: str


@dataclass
class CheckResult:
    """Findings of one host, its identity and the catalog judged against."""

    findings: list[Finding] = field(default_factory=list)
    hostname: str | None = None
    kernel: str | None = None
    catalog_version: str | None = None
    devices: dict[str, str] = field(default_factory=dict)  # address -> display name
    notes: list[str] = field(default_factory=list)

    def data(self, reboot_pending: Sequence[Mapping[str, object]], code: int
             ) -> dict[str, Any]:
        """The normative `check --json` data object, for the exit code `judge_host` gave (a
        dict the verb adds its notes and outputs to before printing it)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "compliant": code == EXIT_OK,
            "summary": summary(self.findings),
            "reboot_pending": list(reboot_pending),
            "catalog_version": self.catalog_version,
            "host": {"hostname": self.hostname, "kernel": self.kernel},
            "findings": [f.to_json() for f in self.findings],
            **({"notes": list(self.notes)} if self.notes else {}),
        }


@dataclass(frozen=True)
class Judged:
    """One host judged: the `check --json` data, its exit code and the findings behind them."""

    data: dict[str, Any]
    code: int
    result: CheckResult


def exit_code(findings: Iterable[Finding], reboot_pending: Sequence[object]) -> int:
    """`exit_for` the findings."""
    return exit_for([(f.layer, f.status) for f in findings], reboot_pending)


def exit_for(statuses: list[tuple[str, str]], reboot_pending: Sequence[object]) -> int:
    """From the findings' (layer, status): 5 drift; 7 a reboot is pending (and nothing but
    driver/firmware items drifted, which the pending change may be what fixes); 11 something
    unknown and nothing drifted; 0 (uncatalogued items, on which the catalog has no opinion,
    never change it). The table's headline says the same (`ui.check_table`)."""
    drift = [layer for layer, st in statuses if st == "drift"]
    if reboot_pending and all(layer in ("driver", "firmware") for layer in drift):
        return EXIT_REBOOT_PENDING
    if drift:
        return EXIT_DRIFT
    if any(st == "unknown" for _, st in statuses):
        return EXIT_UNKNOWN
    return EXIT_OK


# ------------------------------------------------------------------ driver and firmware
def _object(value: object) -> Mapping[str, object]:
    """A JSON object of the (validated) catalog, or an empty one where the key is absent."""
    return value if isinstance(value, dict) else {}


def _versions(cat: Catalog, entry: str) -> Mapping[str, object]:
    """The catalog's version entries of driver `entry` by version ({} for none)."""
    drv: Mapping[str, object] = cat.drivers.get(entry, {})
    return _object(drv.get("versions"))


def _version_cite(cat: Catalog, entry: str, *versions: object) -> Cite:
    """The version entry a driver verdict rests on (the running one, else the recommended);
    else the driver entry consulted, with its in-tree policy's evidence."""
    drv: Mapping[str, object] = cat.drivers.get(entry, {})
    known = _versions(cat, entry)
    for ver in versions:
        if isinstance(ver, str) and ver in known:
            return cite(f"version:{entry}/{ver}", _object(known[ver]).get("evidence"))
    return cite(f"driver:{entry}", next((p.get("evidence") for p in inbox_policies(drv)
                                         if p.get("evidence")), None))


def _verdict(dev: Mapping[str, object]) -> Verdict | None:
    """A device's catalog verdict: `Catalog.verdict`'s record (inventory keeps it as made),
    None when the device has none."""
    v = dev.get("catalog")
    return cast(Verdict, v) if isinstance(v, dict) and v else None


def driver_findings(cat: Catalog, dev: Mapping[str, object], layers: set[str]
                    ) -> list[Finding]:
    """The driver_version and firmware_version findings of one device with a verdict."""
    v = _verdict(dev)
    if v is None:
        return []
    out: list[Finding] = []
    entry, rec, have = v.get("entry") or "", v.get("recommended_version"), dev.get(
        "driver_version")
    addr = str(dev["address"])
    if "driver" in layers:
        status = _VERDICT_STATUS.get(str(v.get("status")), "unknown")
        word = {"drift": str(v.get("status")), "ok": "ok", "unknown": "not judged",
                "uncatalogued": "not judged by the catalog"}[status]
        reason = f"{entry} {have or 'version unknown'} is {word}: {v.get('reason') or ''}"
        fix = (v.get("fix") or upgrade_fix(entry, rec)) if status == "drift" else None
        out.append(Finding("driver", addr, None, "driver_version", v.get("target") or rec,
                           have, status, reason.rstrip(": "), fix,
                           _version_cite(cat, entry, have, rec)))
    if "driver" in layers:
        out += _issue_findings(v, addr, have)
    if "firmware" in layers:
        out += _floor_findings(v, addr, dev.get("firmware_version"))
    fw = v.get("firmware")
    if "firmware" in layers and fw:
        ok = fw.get("ok")
        status = "ok" if ok else "drift" if ok is False else "unknown"
        cur = fw.get("current")
        reason = (f"firmware {cur} meets the minimum {fw['min']} of {entry} {rec}" if ok else
                  f"firmware {cur} is older than {fw['min']}, the minimum {entry} {rec} needs "
                  "(update it with the vendor's firmware tool)" if ok is False else
                  f"firmware version {'unknown' if not cur else f'{cur} cannot be compared'}"
                  + (f": {fw['note']}" if fw.get("note") else ""))
        fw_ev = cite(f"version:{entry}/{rec}", _object(_object(_versions(cat, entry).get(
            rec or "")).get("firmware")).get("evidence"))
        out.append(Finding("firmware", addr, None, "firmware_version", {"min": fw["min"]},
                           cur, status, reason, None, fw_ev))
    return out


def _issue_findings(v: Verdict, addr: str, have: object) -> list[Finding]:
    """A drift finding per known issue the device runs into, compact: the issue's id, its
    severity and symptom, the fix this device needs, the source's URL (the catalog holds the
    rest: `hwmgr catalog show DRIVER`)."""
    out = []
    entry = v.get("entry") or ""
    for ref in v.get("known_issues") or ():
        actual = v.get("kernel_build") if ref["on"] == "kernel" else have
        fixed = ref.get("fixed")
        want = f"{'kernel' if ref['on'] == 'kernel' else entry} {fixed} or later" if fixed \
            else "a fixed version (none published yet)"
        cond = "".join(f", {c}" for c in (ref.get("only_when"), ref.get("caveat")) if c)
        reason = (f"{ref['id']} ({ref['severity']}{cond}): {ref['symptom'].rstrip('. ')}; "
                  + (f"fixed in {fixed}" if fixed else "no fix published yet"))
        out.append(Finding("driver", addr, None, f"{KNOWN_ISSUE}{ref['id']}", want, actual,
                           "drift", reason, v.get("fix"),
                           Cite(f"known_issue:{ref['id']}", ref.get("url"))))
    return out


def _floor_findings(v: Verdict, addr: str, current: object) -> list[Finding]:
    """A finding per firmware requirement of the driver version the device runs."""
    out = []
    entry = v.get("entry") or ""
    for floor in v.get("firmware_floors") or ():
        ok, feature = floor.get("ok"), floor.get("feature")
        # a floor stated for one feature: below it that feature is unavailable, the device
        # is not drifting (whether the host uses the feature cannot be read here)
        status = "ok" if ok else ("unsupported" if feature else "drift") if ok is False \
            else "unknown"
        what = f"{feature} with this {entry} version" if feature else f"this {entry} version"
        reason = (f"firmware {current} meets {floor['min']}, the minimum for {what}" if ok else
                  f"firmware {current} is older than {floor['min']}, the minimum for {what} "
                  "(update it with the vendor's firmware tool)"
                  if ok is False else f"firmware {current or 'unknown'} cannot be compared "
                  f"with {floor['min']}")
        out.append(Finding("firmware", addr, None, f"{FIRMWARE_MIN}{floor['id']}",
                           {"min": floor["min"]}, current, status, reason, None,
                           Cite(f"firmware_min:{floor['id']}", floor.get("url"))))
    return out


# ------------------------------------------------------------------ which interfaces
def _norm(name: object) -> str | None:
    return name.strip().replace("-", "_") if isinstance(name, str) and name.strip() else None


def governed(host: Host, cat: Catalog, scan: Scan) -> list[Governed]:
    """Interfaces of matched PCI devices (bound to the entry's driver), then non-PCI netdevs
    whose driver an entry lists in `netdev_drivers`."""
    out: list[Governed] = []
    by_addr = {d["address"]: d for d in scan.devices}
    seen: set[str] = set()
    for iface in scan.interfaces:
        seen.add(iface["name"])
        dev = by_addr.get(iface["address"])
        m = cat.match(dev) if dev else None
        if m is None:
            continue
        accepted = {_norm(m.driver)} | {_norm(n) for n in m.entry.get("netdev_drivers", [])}
        drv = _norm(iface.get("driver"))
        if drv is None or drv in accepted:
            out.append(Governed(iface["name"], iface["address"], m.driver))
    if not cat.has_netdev_entries():
        return out
    for ifname in host.listdir("/sys/class/net", tool_safe):
        if ifname in seen or ifname == "lo":
            continue
        link = host.readlink(f"/sys/class/net/{ifname}/device/driver")
        drv = link.rstrip("/").rsplit("/", 1)[-1] if link else None
        if drv is None:
            res = host.run(["ethtool", "-i", ifname], timeout=capture.TIMEOUT)
            drv = parse_ethtool_i(res.stdout).get("driver") if res.ok else None
        entry = cat.netdev_entry(drv)
        if entry is not None:
            out.append(Governed(ifname, None, entry))
    return out


def _missing(host: Host, record: str, what: str) -> str:
    """Why an item has no value: the snapshot lacks the record, or the read gave nothing."""
    if capture.lacks(host, record):
        return capture.retake(what, host, record)
    if host.meta:
        return f"the snapshot's {what} says nothing usable"
    return f"{what} gave no usable answer"


def _too_old(host: Host, group: str, version: str | None) -> str:
    """Why a group's items are unknown when the host's ethtool does not know its
    sub-command: which ethtool (its usage text, else `ethtool --version`) and what it
    cannot report. Not drift and not the device's fault: a newer ethtool can tell."""
    if version is None:
        res = host.run(list(capture.ETHTOOL_VERSION_ARGV), timeout=capture.TIMEOUT)
        version = parse_version(res.stdout) if res.ok else None
    which = f"ethtool version {version} on the host" if version else \
        "the host's ethtool (its version unknown)"
    return (f"{which} does not know `ethtool {_OPTION[group]}`, so it cannot report "
            f"{GROUP_WHAT[group]}; a newer ethtool there can")


def setting_findings(host: Host, cat: Catalog, ifaces: list[Governed],
                     sysctls: Mapping[str, ItemValue]) -> list[Finding]:
    """Every want of every governed interface, judged."""
    conditionals = cat.conditional_settings()
    links: dict[str, LinkInfo] | None = None
    out: list[Finding] = []
    for gov in ifaces:
        if links is None:
            res = host.run(list(capture.IP_LINK_ARGV), timeout=capture.TIMEOUT)
            links = parse_ip_link(res.stdout) if res.ok else {}
        link = links.get(gov.ifname)
        qdisc: ItemValue = link.qdisc if link and link.qdisc else Status.UNKNOWN
        wants = rules.interface_wants(gov.entry, cat.drivers[gov.entry].get("settings"),
                                      conditionals, qdisc, sysctls)
        if not wants:
            continue
        groups = {w.item.split(".", 1)[0] for w in wants.values()} & set(_OPTION)
        rejected: dict[str, str | None] = {}
        items = read_interface(host, gov.ifname, groups=groups, links=links,
                               rejected=rejected)
        for item in sorted(wants):
            group = item.split(".", 1)[0]
            if group in rejected:
                why = _too_old(host, group, rejected[group])
            elif group in _OPTION:
                why = _missing(host, capture.ETHTOOL, f"ethtool {_OPTION[group]} {gov.ifname}")
            else:
                why = _missing(host, capture.IP_LINK, f"/sys/class/net/{gov.ifname}/{item}")
            out.append(judge_setting(wants[item], items, gov.ifname, gov.device, why))
    return out


def sysctl_findings(host: Host, sysctl_rules: Iterable[Mapping[str, object]],
                    sysctls: Mapping[str, ItemValue]) -> list[Finding]:
    """Every host sysctl rule whose condition holds, judged (unknown when it cannot be told)."""
    out: list[Finding] = []
    for rule in sysctl_rules:
        ok, reason = rules.holds(rule.get("when"), None, sysctls)
        if ok is False:
            continue
        name = str(rule["name"])
        have = sysctls.get(f"sysctl.{name}", Status.UNKNOWN)
        if ok is None:
            have = Status.UNKNOWN
        why = (capture.sysctl_missing(host, name)
               if capture.lacks_sysctl(host, name) and not capture.lacks(
                   host, capture.SYSCTL) else _missing(host, capture.SYSCTL, "/proc/sys"))
        found = judge_sysctl(rule, have, why if ok else f"its condition: {reason}")
        out.append(found)
    return out


# ------------------------------------------------------------------ the whole host
def check_host(host: Host, cat: Catalog, layers: set[str]) -> CheckResult:
    """Scan (when driver, firmware or setting items are wanted), read, judge."""
    result = CheckResult(catalog_version=cat.version)
    sysctl_rules = cat.sysctl_rules() if "sysctl" in layers else []
    conditionals = cat.conditional_settings() if "setting" in layers else []
    names = rules.needed_sysctls(sysctl_rules, conditionals)
    sysctls = read_sysctls(host, names)
    if layers & {"driver", "firmware", "setting"}:
        # no pci.ids names: the catalog's device names head the groups (loading pci.ids
        # would be a third of check's run time)
        scan = Inventory(host, names=None, verdict=cat.verdict).scan()
        result.hostname, result.kernel = scan.hostname, scan.kernel
        netns = guard.other_netns(host)
        for dev in scan.devices:
            if netns and str(dev.get("class", "")).startswith("02") and not dev.get(
                    "interfaces") and dev.get("catalog"):
                result.notes.append(  # a container's check is not the NIC's owner's
                    f"{dev['address']}: no interface of this NIC is in network namespace "
                    f"{netns}; its driver is judged from the namespace that holds it")
                continue
            result.findings += driver_findings(cat, dev, layers)
            name = (dev.get("catalog") or {}).get("device_name")
            if name:
                result.devices[dev["address"]] = str(name)
        if "setting" in layers:
            result.findings += setting_findings(host, cat, governed(host, cat, scan), sysctls)
        if "driver" in layers:
            drivers = {d["driver"] for d in scan.devices if d.get("driver")}
            drivers |= {i["driver"] for i in scan.interfaces if i.get("driver")}
            found, note = kernellog.host_findings(host, drivers)
            result.findings += found
            if note and not host.meta:  # a snapshot without a recorded log says nothing
                result.notes.append(note)
    else:
        result.hostname, result.kernel = host_identity(host)
    result.findings += sysctl_findings(host, sysctl_rules, sysctls)
    return result


def gate_finding(item: Mapping[str, object]) -> Finding:
    """A kernel-gate item ("e1000e ready for kernel KVER: yes" / "no: why" / unknown) as a
    driver-layer finding; no fix command: the why names what to fix before the gate reruns."""
    status = str(item["status"])
    have = {"ok": "yes", "drift": "no"}.get(status)
    return Finding("driver", None, None, f"kernel_ready.{item['driver']}.{item['kernel']}",
                   "yes", have, status, str(item["reason"]))


def judge_host(host: Host, cat: Catalog, layers: set[str], state_dir: str,
               gate_items: GateItems) -> Judged:
    """The check rule, whole: the catalog's findings, the kernel gate's items (driver layer)
    and the reboots pending (from the journal and the boot id, never guessed) → the verdict,
    its exit code and the data `check --json` prints; `check` and the batch both call this."""
    result = check_host(host, cat, layers)
    if "driver" in layers:
        result.findings += [gate_finding(i) for i in gate_items(host, state_dir, result.kernel)]
    pending = reboot_pending(host, state_dir)
    code = exit_code(result.findings, [p for p in pending if p.get("status") == "pending"])
    if code == EXIT_OK and pending:  # only "unknown" entries: the boot id could not be read
        code = EXIT_UNKNOWN
    return Judged(result.data(pending, code), code, result)
