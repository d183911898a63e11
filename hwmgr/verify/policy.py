"""What `verify` does with its verdict: mark verified, count boots, roll back once, reboot.

The pure checks live in `hwmgr.verify.checks`; this is the policy on top, apart so that a
check never changes the host and the one place that may roll back and reboot is easy to read.
"""

from __future__ import annotations

import contextlib
import json
import signal
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence, TypedDict

from hwmgr.catalog.load import Catalog
from hwmgr.config import Config
from hwmgr.errors import HwmgrError
from hwmgr.host.seam import Host
from hwmgr.lifecycle.expect import load_expectations
from hwmgr.lifecycle.plan import plan_rollback, run_plan
from hwmgr.transaction.journal import utcnow
from hwmgr.transaction.pending import pending_for, reboot_pending
from hwmgr.transaction.state import StateDir
from hwmgr.verify import throughput as tp
from hwmgr.verify.checks import (
    Check,
    Expectation,
    ExpectationResult,
    as_expectation,
    check_with_link_wait,
    overall,
    running_kernel,
    worst,
)

REBOOT_PENDING = "reboot-pending"


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
    throughput: tp.Options | None = None  # peer, floor... when --throughput
    catalog: Callable[[], Catalog | None] | None = None  # lazily: the throughput floor's


class RebootRequest(TypedDict):
    """The reboot verify asked for after an automatic rollback, and how the command went."""

    argv: list[str]
    rc: int | None
    ok: bool
    error: str | None


@dataclass
class VerifyReport:
    """All expectations' results, the overall status and any reboot that was requested."""

    status: str
    results: list[ExpectationResult] = field(default_factory=list)
    reboot: RebootRequest | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"status": self.status, "expectations": [r.as_dict() for r in self.results],
                "reboot": self.reboot, "notes": self.notes}


class Verifier:
    """Runs verification for a host and state dir, then acts on the outcome (mark/rollback)."""

    def __init__(self, host: Host, settings: Config, opts: VerifyOptions) -> None:
        self.host = host
        self.settings = settings
        self.opts = opts
        self.state = StateDir(host, settings.state_dir)
        self._hold = False  # True while an armed change awaits a reboot: act on nothing

    def run(self, armed: Sequence[tuple[str, Mapping[str, object]]] | None = None
            ) -> VerifyReport:
        """Verify `armed` (default: the state dir's expectations) and act on the results."""
        if armed is None:
            armed = load_expectations(self.host, self.state.expectations, self.opts.driver)
        report = VerifyReport("nothing-armed")
        if not armed:
            what = f" for {self.opts.driver}" if self.opts.driver else ""
            report.notes.append(f"no expectation is armed{what} in {self.state.expectations}")
            return report
        typed = [(p, as_expectation(e, p)) for p, e in armed]
        todo = [(p, e) for p, e in typed if not (self.opts.boot and e.get("verified"))]
        if not todo:
            report.notes.append("every armed expectation is already verified")
            return report
        waiting = self._waiting(todo, report)
        # before the reboot the old module is still live: judging it would roll back a good
        # upgrade, so while any armed change waits for a reboot this run changes nothing
        self._hold = bool(waiting)
        for path, exp in todo:
            if exp["driver"] in waiting:
                report.results.append(self._pending(path, exp, waiting[exp["driver"]]))
            else:
                report.results.append(self._one(path, exp))
        statuses = [r.status for r in report.results]
        report.status = worst(statuses)
        if report.status != "failed" and REBOOT_PENDING in statuses:
            report.status = REBOOT_PENDING
        if any(r.action == "rolled-back" for r in report.results):
            report.reboot = self._reboot()
        return report

    # ------------------------------------------------------------------ reboot pending
    def _waiting(self, todo: list[tuple[str, Expectation]], report: VerifyReport
                 ) -> dict[str, Mapping[str, object]]:
        """{driver: journal entry} for the armed drivers whose change awaits a reboot."""
        entries = reboot_pending(self.host, self.state.path)
        waiting: dict[str, Mapping[str, object]] = {}
        for _, exp in todo:
            entry = pending_for(entries, exp["driver"])
            if entry is None:
                continue
            if entry["status"] == "pending":
                waiting[exp["driver"]] = entry
            else:
                report.notes.append(f"{exp['driver']}: reboot pending is unknown: "
                                    f"{entry['reason']}")
        return waiting

    def _pending(self, path: str, exp: Expectation, entry: Mapping[str, object]
                 ) -> ExpectationResult:
        """The result for an expectation whose transaction committed during this boot."""
        res = ExpectationResult(path, exp["driver"], exp.get("txn"), exp.get("kind"),
                                exp.get("expected_version"), REBOOT_PENDING,
                                previously_verified=bool(exp.get("verified")),
                                boot_attempts=int(exp.get("boot_attempts") or 0))
        res.action_detail = f"{entry['reason']}; reboot, then verify"
        return res

    # ------------------------------------------------------------------ one expectation
    def _one(self, path: str, exp: Expectation) -> ExpectationResult:
        res = ExpectationResult(path, exp["driver"], exp.get("txn"), exp.get("kind"),
                                exp.get("expected_version"), "unknown",
                                previously_verified=bool(exp.get("verified")),
                                boot_attempts=int(exp.get("boot_attempts") or 0))
        if self._hold:  # another armed change awaits the reboot: check, never act
            res.checks = check_with_link_wait(self.host, exp, 0.0)
            res.status = overall(res.checks)
            res.action_detail = "not acted on: another armed change awaits a reboot"
            return res
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

    def _throughput(self, exp: Expectation, res: ExpectationResult) -> list[Check]:
        opts = self.opts.throughput
        if opts is None:  # not asked for
            return []
        ifaces = [i for d in exp.get("devices", []) for i in d.get("interfaces", [])]
        if not ifaces:
            return [Check(device="throughput", field="interface", expected=None, actual=None,
                          result="info", source="",
                          message="no interface is armed for this driver: nothing to measure")]
        if not opts.peer:
            return [Check(device="throughput", field="peer", expected="a peer", actual=None,
                          result="unknown", source="",
                          message="no peer: pass --peer or set throughput_peer in the site "
                          "config")]
        iface = opts.bind_dev
        if iface is None:
            addr = tp.resolve_peer(self.host, opts.peer)
            iface = tp.route_interface(self.host, addr) if addr else None
        if iface is None or iface not in ifaces:
            return [Check(device="throughput", field="interface", expected=ifaces, actual=iface,
                          result="unknown", source="",
                          message=f"traffic to {opts.peer} would not cross a {exp['driver']} "
                          "interface: set bind_dev / --interface")]
        opts = tp.Options(**{**opts.__dict__, "bind_dev": iface})
        try:
            catalog = self.opts.catalog() if self.opts.catalog and opts.floor_mbps is None \
                else None
            report = tp.check(self.host, opts, catalog=catalog, driver=exp["driver"])
        except HwmgrError as exc:
            return [Check(device=iface, field="throughput", expected=None, actual=None,
                          result="unknown", source="", message=str(exc))]
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
            out.append(Check(device=iface, field=f"throughput_{run.direction}", expected=floor,
                             actual=actual, result=result, source=f"iperf3 to {opts.peer}",
                             message=run.reason))
        return out

    def _before(self, exp: Expectation, iface: str) -> dict[str, object] | None:
        started = self._txn_started(exp)
        return tp.previous(self.host, self.state.path, iface, started) if started else None

    def _txn_started(self, exp: Expectation) -> str | None:
        """When the expectation's transaction started, from the journal (None: unknown)."""
        journal = self.state.read_journal()
        txn = exp.get("txn")
        if journal is None or not isinstance(txn, int):
            return None
        try:
            row: Mapping[str, object] = journal.get(txn)
        except HwmgrError:  # the transaction is not in this journal: no "before"
            return None
        started = row.get("started")
        return started if isinstance(started, str) else None

    # ------------------------------------------------------------------ acting
    def _write(self, path: str, exp: Expectation) -> None:
        self.host.write_bytes(path, (json.dumps(exp, indent=1) + "\n").encode())

    def _results(self, exp: Expectation, **values: object) -> None:
        journal = self.state.read_journal()
        txn = exp.get("txn")
        if journal is None or not isinstance(txn, int):
            return
        try:
            journal.add_results(txn, **values)
        except HwmgrError:  # the transaction is not in this journal (copied state dir)
            return

    def _act(self, path: str, exp: Expectation, res: ExpectationResult) -> None:
        now = utcnow()
        summary = {"status": res.status, "at": now,
                   "findings": [c.line() for c in res.findings if c.result != "warn"][:5]}
        extra: dict[str, object] = {}
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

    def _no_rollback_reason(self, exp: Expectation, res: ExpectationResult) -> str | None:
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

    def _rollback(self, path: str, exp: Expectation, res: ExpectationResult) -> None:
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
            result = run_plan(self.host, plan, self.settings.state_dir,
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
            npath, nexp = new[0][0], as_expectation(new[0][1], new[0][0])
            nexp["auto_rollback_allowed"] = False
            nexp["armed_by"] = {"verify_failure_of_txn": exp.get("txn"), "reason": reason}
            self._write(npath, nexp)
        self._results(exp, auto_rollback={"txn": result.id, "reason": reason})
        res.action = "rolled-back"
        res.action_detail = (f"rolled {exp['driver']} back to {plan.to_version} "
                             f"(transaction #{result.id}); reboot requested")

    def _reboot(self) -> RebootRequest:
        # `systemctl reboot` makes systemd stop this very unit (SIGTERM) while the report is
        # still being written; the rollback is already committed, so finish and exit normally
        with contextlib.suppress(ValueError):  # not the main thread: nothing to protect
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        argv = list(self.opts.reboot_command)
        r = self.host.run(argv, timeout=120)
        return {"argv": argv, "rc": r.rc, "ok": r.ok,
                "error": None if r.ok else r.describe()}
