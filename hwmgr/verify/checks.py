"""Post-reboot verification: is the armed driver state really live on this host?

An upgrade or rollback arms `<state>/expectations/<driver>.json`. `check_expectation` compares
it with what the host shows through the seam — `/sys/module/<m>/version` and `srcversion`, the
module file on disk, each device's driver binding, `ethtool -i`, link state and speed — and
returns one `Check` per fact (device, field, expected, actual, result). `Verifier` adds the
boot counter, the "verified" mark and the at-most-once automatic rollback.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from hwmgr.errors import BadInputError, HwmgrError
from hwmgr.host.seam import Host
from hwmgr.inventory.scan import hex_id, parse_ethtool_i

EXPECTATION_FORMAT = "hwmgr-expectation"
MAX_MODULE_BYTES = 256 << 20
INBOX = ("inbox", "in-tree", None)
RESULTS = ("ok", "fail", "unknown", "warn", "info")


@dataclass
class Check:
    """One compared fact. result: ok | fail | unknown (could not read) | warn | info."""

    device: str
    field: str
    expected: Any
    actual: Any
    result: str
    source: str = ""
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """`0000:02:00.0 version: expected 10.2.470.14, actual 4.1.307r (ethtool -i eth2)`."""
        text = (f"{self.device} {self.field}: expected {_show(self.expected)}, "
                f"actual {_show(self.actual)}")
        if self.source:
            text += f" ({self.source})"
        return text + (f"; {self.message}" if self.message else "")


def _show(v: Any) -> str:
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


# ----------------------------------------------------------------------------- loading
def validate(doc: Any, where: str) -> dict[str, Any]:
    """Check an expectation's shape; BadInputError naming the file and field."""
    if not isinstance(doc, dict):
        raise BadInputError(f"{where}: expected a JSON object")
    if doc.get("format") != EXPECTATION_FORMAT:
        raise BadInputError(f"{where}: format is {doc.get('format')!r}, "
                            f"expected {EXPECTATION_FORMAT!r}")
    if doc.get("version") != 1:
        raise BadInputError(f"{where}: version {doc.get('version')!r} is not supported (1)")
    if not isinstance(doc.get("driver"), str) or not doc["driver"]:
        raise BadInputError(f"{where}: 'driver' must be a non-empty string")
    mods = doc.get("modules")
    if not isinstance(mods, list) or not mods or not all(isinstance(m, str) for m in mods):
        raise BadInputError(f"{where}: 'modules' must be a non-empty list of module names")
    if not isinstance(doc.get("kernels", {}), dict):
        raise BadInputError(f"{where}: 'kernels' must be an object keyed by kernel release")
    devs = doc.get("devices", [])
    if not isinstance(devs, list) or not all(
            isinstance(d, dict) and isinstance(d.get("address"), str) for d in devs):
        raise BadInputError(f"{where}: 'devices' must be a list of objects with an 'address'")
    for i, d in enumerate(devs):
        ifs = d.get("interfaces", [])
        if not isinstance(ifs, list) or not all(isinstance(x, str) for x in ifs):
            raise BadInputError(f"{where}: devices[{i}].interfaces must be a list of names")
    return doc


def parse_expectation(raw: bytes, where: str) -> dict[str, Any]:
    """Decode and validate one expectation file."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadInputError(f"{where}: not valid JSON ({exc})") from None
    return validate(doc, where)


def load_expectations(host: Host, expect_dir: str, driver: str | None = None
                      ) -> list[tuple[str, dict[str, Any]]]:
    """(logical path, expectation) for every armed `*.json` (or just `driver`'s), sorted."""
    names = [n for n in host.listdir(expect_dir) if n.endswith(".json")]
    if driver is not None:
        names = [n for n in names if n == f"{driver}.json"]
    out = []
    for n in names:
        path = f"{expect_dir}/{n}"
        raw = host.read_bytes(path)
        if raw is None:
            raise BadInputError(f"{path}: expectation file is not readable")
        out.append((path, parse_expectation(raw, path)))
    return out


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


def _eq(device: str, field_: str, expected: Any, actual: Any, source: str,
        unreadable: bool = False) -> Check:
    """ok when equal; unknown when the value could not be read; fail otherwise."""
    if actual == expected:
        return Check(device, field_, expected, actual, "ok", source)
    if unreadable:
        return Check(device, field_, expected, actual, "unknown", source, "could not read it")
    return Check(device, field_, expected, actual, "fail", source)


def _module_checks(host: Host, exp: dict[str, Any], kernel: str | None) -> list[Check]:
    checks: list[Check] = []
    kernels = exp.get("kernels") or {}
    files = kernels.get(kernel) if kernel else None
    inbox = exp.get("expected_version") in INBOX
    if kernel is None:
        checks.append(Check("host", "kernel", sorted(kernels), None, "unknown",
                            "/proc/sys/kernel/osrelease", "running kernel not readable"))
    elif kernels and files is None:
        checks.append(Check("host", "kernel", sorted(kernels), kernel, "unknown", "",
                            "the running kernel is not one this expectation was armed for"))
    for m in exp["modules"]:
        dev = f"module {m}"
        base = f"/sys/module/{m.replace('-', '_')}"
        rec = (files or {}).get(m) if isinstance(files, dict) else None
        rec = rec if isinstance(rec, dict) else None
        loaded = host.is_dir(base)
        if rec is not None and not rec.get("path"):
            checks.append(_eq(dev, "loaded", False, loaded, base))  # armed: no such module
        elif rec is None and inbox and not loaded:
            checks.append(Check(dev, "loaded", True, False, "unknown", base,
                                "in-tree driver on a kernel this expectation does not cover"))
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
        if rec is not None and rec.get("path") and rec.get("sha256"):
            checks.append(_file_check(host, dev, rec["path"], rec["sha256"]))
    return checks


def _file_check(host: Host, dev: str, path: str, sha: str) -> Check:
    """The module file on disk is the one the transaction installed (by sha256)."""
    got = _sha256(host, path)
    if got is None and not host.live:
        return Check(dev, "module_file", sha, None, "info", path,
                     "not captured in the snapshot")
    if got is None:
        return Check(dev, "module_file", sha, None, "fail", path, "the module file is gone")
    return _eq(dev, "module_file", sha, got, path)


def _device_checks(host: Host, exp: dict[str, Any], dev: dict[str, Any],
                   kernel: str | None) -> list[Check]:
    addr = dev["address"].lower()
    base = f"/sys/bus/pci/devices/{addr}"
    if not host.is_dir(base):
        return [Check(addr, "present", True, False, "fail", base, "the PCI function is gone")]
    checks = [Check(addr, "present", True, True, "ok", base)]
    for key, attr in (("vendor_id", "vendor"), ("device_id", "device")):
        if dev.get(key):
            got = hex_id(host.read_attr(f"{base}/{attr}"), 4)
            checks.append(_eq(addr, key, str(dev[key]).lower(), got, f"{base}/{attr}",
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
            checks.append(Check(ifname, "interface", addr, None, "fail", f"{base}/net",
                                f"{addr} now has {_show(sorted(present))}"))
            continue
        checks += _ethtool_checks(host, exp, dev, ifname, kernel)
        checks += _link_checks(host, dev, ifname)
    return checks


def _ethtool_checks(host: Host, exp: dict[str, Any], dev: dict[str, Any], ifname: str,
                    kernel: str | None) -> list[Check]:
    src = f"ethtool -i {ifname}"
    res = host.run(["ethtool", "-i", ifname], timeout=10)
    if not res.ok:
        return [Check(ifname, "ethtool", "driver info", None, "unknown", src,
                      res.describe())]
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
        checks.append(Check(ifname, "firmware", None, fw, "info", src, "not armed; recorded"))
    return checks


def _link_checks(host: Host, dev: dict[str, Any], ifname: str) -> list[Check]:
    """Link up and speed; judged against the armed baseline (`links`), else only reported."""
    base = f"/sys/class/net/{ifname}"
    oper = host.read_attr(f"{base}/operstate")
    raw = host.read_attr(f"{base}/speed")
    try:
        speed = int(raw) if raw is not None else None
    except ValueError:
        speed = None
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
            checks.append(Check(ifname, "speed_mbps", want, speed, res, f"{base}/speed"))
        return checks
    checks.append(Check(ifname, "link", "up", oper, "ok" if oper == "up" else "warn",
                        f"{base}/operstate", "" if oper == "up" else "no baseline armed"))
    checks.append(Check(ifname, "speed_mbps", None, speed, "info", f"{base}/speed"))
    return checks


def check_expectation(host: Host, exp: dict[str, Any]) -> list[Check]:
    """Every check of one expectation against the host (no side effects)."""
    kernel = running_kernel(host)
    checks = _module_checks(host, exp, kernel)
    for dev in exp.get("devices", []):
        checks += _device_checks(host, exp, dev, kernel)
    return checks


def check_with_link_wait(host: Host, exp: dict[str, Any], wait: float,
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
    txn: Any
    kind: Any
    expected_version: Any
    status: str
    checks: list[Check] = field(default_factory=list)
    previously_verified: bool = False
    boot_attempts: int = 0
    action: str = "none"  # none | marked-verified | reported | rolled-back | rollback-refused ...
    action_detail: str = ""
    throughput: dict[str, Any] | None = None

    @property
    def findings(self) -> list[Check]:
        """The checks that did not pass (fail, unknown, warn)."""
        return [c for c in self.checks if c.result in ("fail", "unknown", "warn")]

    def as_dict(self) -> dict[str, Any]:
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


# ----------------------------------------------------------------------------- orchestration
@dataclass
class VerifyOptions:
    """What one `hwmgr verify` run does besides checking."""

    driver: str | None = None
    on_failure: str = "report"  # report | rollback
    boot: bool = False  # run by the boot service: count attempts, skip verified ones
    readonly: bool = False  # a snapshot (--root) or an explicit --expectation file
    link_wait: float = 0.0
    max_boot_attempts: int = 3
    reboot_command: list[str] = field(default_factory=lambda: ["systemctl", "reboot"])
    throughput: Any = None  # throughput.Options (peer, floor...) when --throughput
    catalog: Callable[[], Any] | None = None  # loads the catalog lazily (throughput floor)


@dataclass
class VerifyReport:
    """All expectations' results, the overall status and any reboot that was requested."""

    status: str
    results: list[ExpectationResult] = field(default_factory=list)
    reboot: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "expectations": [r.as_dict() for r in self.results],
                "reboot": self.reboot, "notes": self.notes}


class Verifier:
    """Runs verification for a host and state dir, then acts on the outcome (mark/rollback)."""

    def __init__(self, host: Host, settings: Any, opts: VerifyOptions) -> None:
        from hwmgr.transaction.state import StateDir

        self.host = host
        self.settings = settings
        self.opts = opts
        self.state = StateDir(host, settings.state_dir)

    def run(self, armed: list[tuple[str, dict[str, Any]]] | None = None) -> VerifyReport:
        """Verify `armed` (default: the state dir's expectations) and act on the results."""
        if armed is None:
            armed = load_expectations(self.host, self.state.expectations, self.opts.driver)
        report = VerifyReport("nothing-armed")
        if not armed:
            what = f" for {self.opts.driver}" if self.opts.driver else ""
            report.notes.append(f"no expectation is armed{what} in {self.state.expectations}")
            return report
        todo = [(p, e) for p, e in armed if not (self.opts.boot and e.get("verified"))]
        if not todo:
            report.notes.append("every armed expectation is already verified")
            return report
        for path, exp in todo:
            report.results.append(self._one(path, exp))
        report.status = worst([r.status for r in report.results])
        if any(r.action == "rolled-back" for r in report.results):
            report.reboot = self._reboot()
        return report

    # ------------------------------------------------------------------ one expectation
    def _one(self, path: str, exp: dict[str, Any]) -> ExpectationResult:
        res = ExpectationResult(path, exp["driver"], exp.get("txn"), exp.get("kind"),
                                exp.get("expected_version"), "unknown",
                                previously_verified=bool(exp.get("verified")),
                                boot_attempts=int(exp.get("boot_attempts") or 0))
        if self.opts.boot and not self.opts.readonly:
            res.boot_attempts += 1
            exp["boot_attempts"] = res.boot_attempts
            self._write(path, exp)
        res.checks = check_with_link_wait(self.host, exp,
                                          self.opts.link_wait if self.opts.boot else 0.0)
        if self.opts.throughput is not None:
            res.checks += self._throughput(exp, res)
        res.status = overall(res.checks)
        if not self.opts.readonly:
            self._act(path, exp, res)
        return res

    def _throughput(self, exp: dict[str, Any], res: ExpectationResult) -> list[Check]:
        from hwmgr.verify import throughput as tp

        opts = self.opts.throughput
        ifaces = [i for d in exp.get("devices", []) for i in d.get("interfaces", [])]
        if not ifaces:
            return [Check("throughput", "interface", None, None, "info", "",
                          "no interface is armed for this driver: nothing to measure")]
        if not opts.peer:
            return [Check("throughput", "peer", "a peer", None, "unknown", "",
                          "no peer: pass --peer or set throughput_peer in the site config")]
        iface = opts.bind_dev
        if iface is None:
            addr = tp.resolve_peer(self.host, opts.peer)
            iface = tp.route_interface(self.host, addr) if addr else None
        if iface not in ifaces:
            return [Check("throughput", "interface", ifaces, iface, "unknown", "",
                          f"traffic to {opts.peer} would not cross a {exp['driver']} "
                          "interface: set bind_dev / --bind-dev")]
        opts = tp.Options(**{**opts.__dict__, "bind_dev": iface})
        try:
            catalog = self.opts.catalog() if self.opts.catalog and opts.floor_mbps is None \
                else None
            report = tp.check(self.host, opts, catalog=catalog, driver=exp["driver"])
        except HwmgrError as exc:
            return [Check(iface, "throughput", None, None, "unknown", "", str(exc))]
        res.throughput = report.as_dict()
        if not self.opts.readonly:
            after = tp.record(self.host, self.state.path, report)
            res.throughput["after"] = after
            res.throughput["before"] = self._before(exp, iface)
        out = []
        for run in report.runs:
            result = {"ok": "ok", "failed": "fail", "measured": "info"}.get(run.status,
                                                                              "unknown")
            floor = None if run.floor_mbps is None else f">= {run.floor_mbps:g} Mbit/s"
            actual = None if run.mbps is None else f"{run.mbps:.0f} Mbit/s"
            out.append(Check(iface, f"throughput_{run.direction}", floor, actual, result,
                             f"iperf3 to {opts.peer}", run.reason))
        return out

    def _before(self, exp: dict[str, Any], iface: str) -> dict[str, Any] | None:
        from hwmgr.verify import throughput as tp

        started = self._txn_field(exp, "started")
        return tp.previous(self.host, self.state.path, iface, started) if started else None

    def _txn_field(self, exp: dict[str, Any], key: str) -> Any:
        journal = self.state.read_journal()
        if journal is None or not isinstance(exp.get("txn"), int):
            return None
        try:
            return journal.get(exp["txn"]).get(key)
        except HwmgrError:  # the transaction is not in this journal: no "before"
            return None

    # ------------------------------------------------------------------ acting
    def _write(self, path: str, exp: dict[str, Any]) -> None:
        self.host.write_bytes(path, (json.dumps(exp, indent=1) + "\n").encode())

    def _results(self, exp: dict[str, Any], **values: Any) -> None:
        journal = self.state.read_journal()
        if journal is None or not isinstance(exp.get("txn"), int):
            return
        try:
            journal.add_results(exp["txn"], **values)
        except HwmgrError:  # the transaction is not in this journal (copied state dir)
            return

    def _act(self, path: str, exp: dict[str, Any], res: ExpectationResult) -> None:
        from hwmgr.transaction.state import utcnow

        now = utcnow()
        summary = {"status": res.status, "at": now,
                   "findings": [c.line() for c in res.findings if c.result != "warn"][:5]}
        extra: dict[str, Any] = {}
        if res.throughput is not None:
            extra = {"throughput_before": res.throughput.get("before"),
                     "throughput_after": res.throughput.get("after")}
        self._results(exp, verify=summary, **extra)
        if res.status == "verified":
            if not exp.get("verified"):
                exp["verified"] = {"at": now, "kernel": running_kernel(self.host)}
                self._write(path, exp)
                res.action = "marked-verified"
            return
        res.action = "reported"
        if res.status != "failed" or self.opts.on_failure != "rollback":
            return
        why_not = self._no_rollback_reason(exp, res)
        if why_not:
            res.action_detail = f"no automatic rollback: {why_not}"
            return
        self._rollback(path, exp, res)

    def _no_rollback_reason(self, exp: dict[str, Any], res: ExpectationResult) -> str | None:
        if exp.get("verified"):
            return f"this expectation was verified at {exp['verified'].get('at')}"
        if exp.get("auto_rollback"):
            return (f"one was already attempted for this expectation "
                    f"({exp['auto_rollback'].get('started')})")
        if exp.get("auto_rollback_allowed") is False:
            return "this state was itself armed by an automatic rollback"
        if res.boot_attempts > self.opts.max_boot_attempts:
            return f"{res.boot_attempts} boot attempts exceed max_boot_attempts"
        return None

    def _rollback(self, path: str, exp: dict[str, Any], res: ExpectationResult) -> None:
        from hwmgr.lifecycle.plan import plan_rollback, run_plan
        from hwmgr.transaction.state import utcnow

        reason = next((c.line() for c in res.findings if c.result == "fail"), "")
        exp["auto_rollback"] = {"started": utcnow(), "reason": reason}
        self._write(path, exp)  # durable first: at most one attempt, even after a crash
        try:
            # force: the previous driver is restored even on the default-route interface;
            # leaving a driver that failed verification in place would be worse
            plan = plan_rollback(self.host, exp["driver"], settings=self.settings, force=True)
            if plan.refusals:
                res.action, res.action_detail = "rollback-refused", plan.refusals[0]
                return
            result = run_plan(self.host, plan, self.settings,
                              command=f"hwmgr verify (automatic rollback of {exp['driver']})")
        except HwmgrError as exc:
            res.action, res.action_detail = "rollback-failed", str(exc)
            return
        exp["auto_rollback"]["txn"] = result.id
        exp["auto_rollback"]["state"] = result.state
        if not result.ok:
            self._write(path, exp)
            res.action = "rollback-failed"
            res.action_detail = result.error or f"transaction #{result.id} {result.state}"
            return
        # the rollback's arm step replaced the expectation: mark it so it never loops
        new = load_expectations(self.host, self.state.expectations, exp["driver"])
        if new:
            npath, nexp = new[0]
            nexp["auto_rollback_allowed"] = False
            nexp["armed_by"] = {"verify_failure_of_txn": exp.get("txn"), "reason": reason}
            self._write(npath, nexp)
        self._results(exp, auto_rollback={"txn": result.id, "reason": reason})
        res.action = "rolled-back"
        res.action_detail = (f"rolled {exp['driver']} back to {plan.to_version} "
                             f"(transaction #{result.id}); reboot requested")

    def _reboot(self) -> dict[str, Any]:
        # `systemctl reboot` makes systemd stop this very unit (SIGTERM) while the report is
        # still being written; the rollback is already committed, so finish and exit normally
        with contextlib.suppress(ValueError):  # not the main thread: nothing to protect
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        argv = list(self.opts.reboot_command)
        r = self.host.run(argv, timeout=120)
        return {"argv": argv, "rc": r.rc, "ok": r.ok,
                "error": None if r.ok else r.describe()}
