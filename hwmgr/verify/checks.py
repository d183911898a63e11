"""Post-reboot verification: is the armed driver state really live on this host?

An upgrade or rollback arms `<state>/expectations/<driver>.json`. `check_expectation` compares
it with what the host shows through the seam — `/sys/module/<m>/version` and `srcversion`, the
module file on disk, each device's driver binding, `ethtool -i`, link state and speed — and
returns one `Check` per fact (device, field, expected, actual, result). `Verifier` adds the
boot counter, the "verified" mark and the at-most-once automatic rollback.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping

from hwmgr.host.seam import Host
from hwmgr.inventory.scan import hex_id, parse_ethtool_i
from hwmgr.lifecycle.expect import ArmedDevice, Expectation, validate
from hwmgr.numtext import to_int

MAX_MODULE_BYTES = 256 << 20
INBOX = ("inbox", "in-tree", None)
RESULTS = ("ok", "fail", "unknown", "warn", "info")


# ----------------------------------------------------------------------------- the armed file
def as_expectation(doc: Mapping[str, object], where: str) -> Expectation:
    """An expectation handed in from elsewhere, checked (BadInputError naming `where` and the
    field) and typed by the format's owner; the same dict, so verify's marks are written back."""
    return validate(doc, where)


@dataclass
class Check:
    """One compared fact. result: ok | fail | unknown (could not read) | warn | info."""

    device: str
    field: str
    expected: object
    actual: object
    result: str
    source: str = ""
    message: str = ""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def line(self) -> str:
        """`0000:02:00.0 version: expected 10.2.470.14, actual 4.1.307r (ethtool -i eth2)`."""
        text = (f"{self.device} {self.field}: expected {_show(self.expected)}, "
                f"actual {_show(self.actual)}")
        if self.source:
            text += f" ({self.source})"
        return text + (f"; {self.message}" if self.message else "")


def _show(v: object) -> str:
    if v is None:
        return "absent"
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


def overall(checks: list[Check]) -> str:
    """verified | failed | unknown: any fail fails; else any unknown is unknown."""
    results = {c.result for c in checks}
    if "fail" in results:
        return "failed"
    if "unknown" in results:
        return "unknown"
    return "verified"


# ----------------------------------------------------------------------------- checking
def running_kernel(host: Host) -> str | None:
    """The kernel release the host runs (a snapshot's recorded one under --root)."""
    if host.meta.get("kernel"):
        return str(host.meta["kernel"])
    return host.read_attr("/proc/sys/kernel/osrelease")


def _link_target(host: Host, logical: str) -> str | None:
    target = host.readlink(logical)
    if not target:
        return None
    name = target.rstrip("/").rsplit("/", 1)[-1]
    return name or None


def _sha256(host: Host, logical: str) -> str | None:
    data = host.read_bytes(logical, limit=MAX_MODULE_BYTES)
    return None if data is None else hashlib.sha256(data).hexdigest()


def _eq(device: str, field_: str, expected: object, actual: object, source: str,
        unreadable: bool = False) -> Check:
    """ok when equal; unknown when the value could not be read; fail otherwise."""
    if actual == expected:
        return Check(device=device, field=field_, expected=expected, actual=actual, result="ok",
                     source=source)
    if unreadable:
        return Check(device=device, field=field_, expected=expected, actual=actual,
                     result="unknown", source=source, message="could not read it")
    return Check(device=device, field=field_, expected=expected, actual=actual, result="fail",
                 source=source)


def _module_checks(host: Host, exp: Expectation, kernel: str | None) -> list[Check]:
    checks: list[Check] = []
    kernels = exp.get("kernels") or {}
    files = kernels.get(kernel) if kernel else None
    inbox = exp.get("expected_version") in INBOX
    if kernel is None:
        checks.append(Check(device="host", field="kernel", expected=sorted(kernels), actual=None,
                            result="unknown", source="/proc/sys/kernel/osrelease",
                            message="running kernel not readable"))
    elif kernels and files is None:
        checks.append(Check(device="host", field="kernel", expected=sorted(kernels), actual=kernel,
                            result="unknown", source="",
                            message="the running kernel is not one this expectation was armed for"))
    for m in exp["modules"]:
        dev = f"module {m}"
        base = f"/sys/module/{m.replace('-', '_')}"
        rec = (files or {}).get(m) if isinstance(files, dict) else None
        rec = rec if isinstance(rec, dict) else None
        loaded = host.is_dir(base)
        if rec is not None and not rec.get("path"):
            checks.append(_eq(dev, "loaded", False, loaded, base))  # armed: no such module
        elif rec is None and inbox and not loaded:
            checks.append(Check(device=dev, field="loaded", expected=True, actual=False,
                                result="unknown", source=base,
                                message="in-tree driver on a kernel this expectation does "
                                "not cover"))
        else:
            checks.append(_eq(dev, "loaded", True, loaded, base))
        if rec is not None:
            want_ver = rec.get("version")
        elif not inbox:
            want_ver = exp.get("expected_version")
        else:
            want_ver = "?"  # in-tree, kernel not covered: nothing to compare against
        if loaded and want_ver != "?":
            got = host.read_attr(f"{base}/version")
            checks.append(_eq(dev, "version", want_ver, got, f"{base}/version"))
        if loaded and rec is not None and rec.get("srcversion"):
            got = host.read_attr(f"{base}/srcversion")
            checks.append(_eq(dev, "srcversion", rec["srcversion"], got, f"{base}/srcversion",
                              unreadable=got is None))
        path, sha = (rec.get("path"), rec.get("sha256")) if rec is not None else (None, None)
        if path and sha:
            checks.append(_file_check(host, dev, path, sha))
    return checks


def _file_check(host: Host, dev: str, path: str, sha: str) -> Check:
    """The module file on disk is the one the transaction installed (by sha256)."""
    got = _sha256(host, path)
    if got is None and not host.live:
        return Check(device=dev, field="module_file", expected=sha, actual=None, result="info",
                     source=path, message="not captured in the snapshot")
    if got is None:
        return Check(device=dev, field="module_file", expected=sha, actual=None, result="fail",
                     source=path, message="the module file is gone")
    return _eq(dev, "module_file", sha, got, path)


def _device_checks(host: Host, exp: Expectation, dev: ArmedDevice,
                   kernel: str | None) -> list[Check]:
    addr = dev["address"].lower()
    base = f"/sys/bus/pci/devices/{addr}"
    if not host.is_dir(base):
        return [Check(device=addr, field="present", expected=True, actual=False, result="fail",
                      source=base, message="the PCI function is gone")]
    checks = [Check(device=addr, field="present", expected=True, actual=True, result="ok",
                    source=base)]
    for key, attr, want in (("vendor_id", "vendor", dev.get("vendor_id")),
                            ("device_id", "device", dev.get("device_id"))):
        if want:
            got = hex_id(host.read_attr(f"{base}/{attr}"), 4)
            checks.append(_eq(addr, key, str(want).lower(), got, f"{base}/{attr}",
                              unreadable=got is None))
    names = {exp["driver"], *exp["modules"]}
    bound = _link_target(host, f"{base}/driver")
    check = _eq(addr, "driver", exp["driver"], bound, f"{base}/driver")
    if bound in names:
        check.result = "ok"
    checks.append(check)
    present = set(host.listdir(f"{base}/net"))
    for ifname in dev.get("interfaces", []):
        if ifname not in present:
            checks.append(Check(device=ifname, field="interface", expected=addr, actual=None,
                                result="fail", source=f"{base}/net",
                                message=f"{addr} now has {_show(sorted(present))}"))
            continue
        checks += _ethtool_checks(host, exp, dev, ifname, kernel)
        checks += _link_checks(host, dev, ifname)
    return checks


def _ethtool_checks(host: Host, exp: Expectation, dev: ArmedDevice, ifname: str,
                    kernel: str | None) -> list[Check]:
    src = f"ethtool -i {ifname}"
    res = host.run(["ethtool", "-i", ifname], timeout=10)
    if not res.ok:
        return [Check(device=ifname, field="ethtool", expected="driver info", actual=None,
                      result="unknown", source=src, message=res.describe())]
    info = parse_ethtool_i(res.stdout)
    checks = []
    got_drv = info.get("driver")
    c = _eq(ifname, "driver", exp["driver"], got_drv, src)
    if got_drv in {exp["driver"], *exp["modules"]}:
        c.result = "ok"
    checks.append(c)
    want = exp.get("expected_version")
    rec = ((exp.get("kernels") or {}).get(kernel) or {}).get(exp["modules"][0]) if kernel else None
    if isinstance(rec, dict) and rec.get("version"):
        want = rec["version"]
    elif want in INBOX or (isinstance(rec, dict) and rec.get("version") is None):
        want = kernel  # in-tree drivers without a version report the kernel release
    got = info.get("version")
    checks.append(_eq(ifname, "version", want, got, src, unreadable=want is None))
    bus = info.get("bus-info")
    if bus:
        checks.append(_eq(ifname, "bus_info", dev["address"].lower(), bus.lower(), src))
    fw = info.get("firmware-version")
    if dev.get("firmware_version"):
        checks.append(_eq(ifname, "firmware", dev["firmware_version"], fw, src))
    else:
        checks.append(Check(device=ifname, field="firmware", expected=None, actual=fw,
                            result="info", source=src, message="not armed; recorded"))
    return checks


def _link_checks(host: Host, dev: ArmedDevice, ifname: str) -> list[Check]:
    """Link up and speed; judged against the armed baseline (`links`), else only reported."""
    base = f"/sys/class/net/{ifname}"
    oper = host.read_attr(f"{base}/operstate")
    raw = host.read_attr(f"{base}/speed")
    speed = to_int(raw)
    speed = speed if speed is not None and speed > 0 else None
    baseline = (dev.get("links") or {}).get(ifname)
    checks = []
    if isinstance(baseline, dict):
        if baseline.get("operstate") == "up":
            checks.append(_eq(ifname, "link", "up", oper, f"{base}/operstate",
                              unreadable=oper is None))
        want = baseline.get("speed_mbps")
        if isinstance(want, int) and want > 0 and baseline.get("operstate") == "up":
            res = "ok" if speed is not None and speed >= want else (
                "unknown" if raw is None else "fail")
            checks.append(Check(device=ifname, field="speed_mbps", expected=want, actual=speed,
                                result=res, source=f"{base}/speed"))
        return checks
    checks.append(Check(device=ifname, field="link", expected="up", actual=oper,
                        result="ok" if oper == "up" else "warn", source=f"{base}/operstate",
                        message="" if oper == "up" else "no baseline armed"))
    checks.append(Check(device=ifname, field="speed_mbps", expected=None, actual=speed,
                        result="info", source=f"{base}/speed"))
    return checks


def check_expectation(host: Host, exp: Expectation) -> list[Check]:
    """Every check of one expectation against the host (no side effects)."""
    kernel = running_kernel(host)
    checks = _module_checks(host, exp, kernel)
    for dev in exp.get("devices", []):
        checks += _device_checks(host, exp, dev, kernel)
    return checks


def check_with_link_wait(host: Host, exp: Expectation, wait: float,
                         sleep: Callable[[float], None] = time.sleep) -> list[Check]:
    """Re-check while only link checks fail, up to `wait` seconds (links come up late)."""
    deadline = time.monotonic() + wait
    while True:
        checks = check_expectation(host, exp)
        failing = {c.field for c in checks if c.result == "fail"}
        if not failing or not failing <= {"link", "speed_mbps"} \
                or time.monotonic() >= deadline:
            return checks
        sleep(1.0)


# ----------------------------------------------------------------------------- outcome
@dataclass
class ExpectationResult:
    """The verdict on one armed expectation and what verify did about it."""

    path: str
    driver: str
    txn: int | None
    kind: str | None
    expected_version: str | None
    status: str
    checks: list[Check] = field(default_factory=list)
    previously_verified: bool = False
    boot_attempts: int = 0
    action: str = "none"  # none | marked-verified | reported | rolled-back | rollback-refused ...
    action_detail: str = ""
    throughput: dict[str, object] | None = None

    @property
    def findings(self) -> list[Check]:
        """The checks that did not pass (fail, unknown, warn)."""
        return [c for c in self.checks if c.result in ("fail", "unknown", "warn")]

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "driver": self.driver, "txn": self.txn, "kind": self.kind,
                "expected_version": self.expected_version, "status": self.status,
                "previously_verified": self.previously_verified,
                "boot_attempts": self.boot_attempts, "action": self.action,
                "action_detail": self.action_detail,
                "findings": [c.as_dict() for c in self.findings],
                "checks": [c.as_dict() for c in self.checks],
                "throughput": self.throughput}


def worst(statuses: list[str]) -> str:
    """Combine per-expectation statuses: failed > unknown > verified."""
    for s in ("failed", "unknown"):
        if s in statuses:
            return s
    return "verified" if statuses else "nothing-armed"
