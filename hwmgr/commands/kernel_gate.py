"""Gate a newly installed kernel: every managed driver built, installed and checked for it,
or the boot default held on the running kernel (docs/kernel-gate.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Mapping, NamedTuple, Optional, Protocol, TypedDict

from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_NOT_FOUND,
    EXIT_NOT_READY,
    EXIT_OK,
    EXIT_PERMISSION,
    EXIT_REFUSED,
    BadInputError,
    HwmgrError,
    NotFoundError,
    RefusedError,
)
from hwmgr.host.runner import allow_commands
from hwmgr.host.seam import Host
from hwmgr.inventory import guard
from hwmgr.lifecycle import INSTALL_TREE
from hwmgr.lifecycle.builds.recipe import check_kernel
from hwmgr.lifecycle.gate import gaterecord
from hwmgr.lifecycle.gate import kernelgate as gate
from hwmgr.lifecycle.gate.gatesteps import GateSteps
from hwmgr.lifecycle.plan import running_kernel
from hwmgr.output import Outcome, printable
from hwmgr.transaction.interrupt import deferring_signals
from hwmgr.transaction.state import StateDir
from hwmgr.transaction.testhook import boot_host
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "kernel-gate"
EXAMPLES = (
    Example("hwmgr kernel-gate 6.1.0-58-amd64", "what the kernel postinst hook runs"),
    Example("hwmgr kernel-gate 6.1.0-58-amd64 --allow-unready",
            "boot it anyway: warn, do not hold (and release an earlier hold)"),
    Example("hwmgr kernel-gate 5.14.0-427.el9.x86_64 --json"),
)
EXIT_CODES = {
    EXIT_OK: "every managed driver is ready for KVER (or none is managed); a hold released",
    EXIT_FAILED: "an operation failed (e.g. the boot loader command)",
    EXIT_NOT_FOUND: "KVER is not installed (/lib/modules/KVER or /boot/vmlinuz-KVER absent)",
    EXIT_BAD_INPUT: "a bad KVER, journal or kernel-gate record (named)",
    EXIT_REFUSED: "KVER is the running kernel; --root names a snapshot (read-only)",
    EXIT_LOCKED: "another hwmgr holds the lock",
    EXIT_NOT_READY: "not ready for kernel KVER (or the site config cannot be read): boot "
                    "default held on the running kernel",
    EXIT_PERMISSION: "not root",
    EXIT_INTERRUPTED: "interrupted (SIGINT, SIGTERM, SIGHUP): KVER recorded as not gated, the "
                      "boot default held on the running kernel",
}


class GateData(TypedDict):
    """What the verb reports (its JSON data, keys in this order): per driver the gate
    record's entry, and the hold kept or released (the gate's records, read as given)."""

    kernel: str
    running: Optional[str]
    ready: bool
    drivers: Mapping[str, Mapping[str, object]]
    held: Optional[Mapping[str, object]]
    released: Optional[Mapping[str, object]]
    site_config_error: Optional[str]
    interrupted: Optional[str]


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=True, root=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernel", metavar="KVER", help="an installed kernel release, not the "
                   "running one")
    p.add_argument("--allow-unready", action="store_true",
                   help="exit 0 although a driver is not ready: warn, do not hold the default")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    host = ctx.host
    ui.require_root(host, "builds modules for another kernel and may hold the boot default")
    kver = check_kernel(args.kernel)
    running = running_kernel(host)
    if kver == running:
        raise RefusedError(f"{kver} is the running kernel: the gate is for a kernel installed "
                           "but not yet booted")
    if host.meta:
        raise RefusedError("kernel-gate builds modules and holds the boot default on this "
                           "machine; a --root snapshot is only read (hwmgr check --root shows "
                           "its gate records)")
    state = StateDir(host, ctx.config.state_dir)
    state.ensure()
    with state.lock(command=f"hwmgr kernel-gate {kver}", wait=args.wait):
        if not gaterecord.installed(host, kver):
            missing = (f"{INSTALL_TREE}/{kver}" if not host.is_dir(f"{INSTALL_TREE}/{kver}")
                       else f"/boot/vmlinuz-{kver} (nor {INSTALL_TREE}/{kver}/vmlinuz)")
            raise NotFoundError(f"kernel {kver} is not installed: no {missing}")
        gaterecord.read_hold(host, state)  # a damaged hold is exit 8 before anything is built
        steps = GateSteps()
        with deferring_signals(steps.note, hold=True):
            try:
                data, unready = _gate(ctx, host, state, kver, running, args.allow_unready,
                                      steps)
            finally:
                allow_commands()
    state.close()
    if steps.stopped:
        return _interrupted(data, steps)
    return _outcome(data, unready, running or "unknown", args.allow_unready)


def _gate(ctx: Context, host: Host, state: StateDir, kver: str, running: str | None,
          allow_unready: bool, steps: GateSteps) -> tuple[GateData, list[NotReady]]:
    """Gate every managed driver, write the record, hold or release the default; a signal
    (`steps`) ends the gate not ready, recorded so, the default held (docs/kernel-gate.md)."""
    try:
        timeout = ctx.site.build_timeout_seconds
        config_error = None
    except BadInputError as exc:  # fail closed: a gate that cannot read its site config
        timeout, config_error = 0.0, exc.message  # builds nothing and holds the default
    unready: list[NotReady]
    gated: Mapping[str, Mapping[str, object]]
    if config_error is None:
        drivers = gate.managed_drivers(state)
        sb = guard.secure_boot(host) if drivers else None
        results = [gate.gate_driver(host, state, m, kver, sb, build_timeout=timeout,
                                    steps=steps) for m in drivers]
        if steps.start("record"):
            for r in results:  # `verify` after booting KVER checks what the gate installed
                gate.extend_expectation(host, state, kver, r)
        if steps.stopped:  # not gated: every driver says so, and the default is held
            steps.settle()
            results = [gate.Readiness(r.driver, r.version, False, steps.why(), r.facts)
                       for r in results]
        record = gate.write_record(host, state, kver, running, results,
                                   interrupted=steps.why() if steps.stopped else None)
        unready = [r for r in results if not r.ready]
        gated = record["drivers"]
    else:  # recorded too: `check` must not go on showing an earlier run's "ready: yes"
        why = f"site config cannot be read: {config_error}"
        gate.write_record(host, state, kver, running, [
            gate.Readiness(m.driver, m.version, False, why) for m in gate.managed_drivers(state)])
        unready, gated = [_Unready("site config", "(unreadable)", config_error)], {}
    data: GateData = {"kernel": kver, "running": running, "ready": not unready,
                      "drivers": gated, "held": None, "released": None,
                      "site_config_error": config_error,
                      "interrupted": steps.why() if steps.stopped else None}
    boot = boot_host(host)
    if unready and (steps.stopped or not allow_unready):
        steps.start("hold", settling=True)
        try:
            data["held"] = gate.hold(host, state, kver, running or "", boot=boot)
        except HwmgrError as exc:
            first = unready[0]
            raise HwmgrError(f"not ready for kernel {kver} ({first.driver} {first.version}: "
                             f"{first.why}), and the boot default could NOT be held: "
                             f"{exc.message}", exit_code=exc.exit_code) from None
    else:
        steps.start("release", settling=True)
        data["released"] = gate.release(host, state, kver, boot=boot)
    return data, unready


def _interrupted(data: GateData, steps: GateSteps) -> Outcome:
    """A signal stopped the gate: exit 130, one line saying where and that the default is
    held (the record says not gated)."""
    held = data["held"]
    then = (f"boot default held on {data['running']} ({held['backend']})" if held else
            "no hwmgr-managed driver: nothing to hold")
    line = f"{steps.why()}; {then}; run hwmgr kernel-gate {data['kernel']} again"
    return Outcome(NAME, status="interrupted", data=data, errors=[line],
                   exit_code=EXIT_INTERRUPTED)


class NotReady(Protocol):
    """What the verb says of a driver that is not ready: a gate's Readiness or _Unready."""

    @property
    def driver(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def why(self) -> str: ...


class _Unready(NamedTuple):
    """Why the gate cannot call KVER ready when no driver build says so (an unreadable site
    config), in the shape of a driver's result."""

    driver: str
    version: str
    why: str
    ready: bool = False


def _outcome(data: GateData, unready: list[NotReady], running: str,
             allowed: bool) -> Outcome:
    kver = data["kernel"]
    held = data["held"]  # (held whenever a driver is not ready and that is not allowed)
    first = f"{unready[0].driver} {unready[0].version}: {unready[0].why}" if unready else ""
    errors: list[str] = []
    code = EXIT_OK
    if unready and not allowed:
        code = EXIT_NOT_READY
        more = f" (and {len(unready) - 1} more)" if len(unready) > 1 else ""
        errors = [f"not ready for kernel {kver}: {first}{more}; boot default held on "
                  f"{running} ({held['backend'] if held is not None else None})"]
    elif unready:
        errors = [f"warning: not ready for kernel {kver} (--allow-unready: default not "
                  f"held): {r.driver} {r.version}: {r.why}" for r in unready]

    def render(c: Console) -> None:
        if data.get("site_config_error"):
            c.print(printable(f"site config cannot be read: {data['site_config_error']}; "
                              f"nothing built for kernel {kver}"), markup=False)
        elif not data["drivers"]:
            c.print(printable(f"no hwmgr-managed drivers: kernel {kver} needs nothing built"),
                    markup=False)
        for name, r in sorted(data["drivers"].items()):
            word = "yes" if r["ready"] else f"no: {r['why']}"
            c.print(printable(f"{name} {r['version']} ready for kernel {kver}: {word}"),
                    markup=False)
        if held:
            saved = held["saved"]
            entry = saved.get("held_entry") if isinstance(saved, Mapping) else None
            c.print(printable(f"boot default held on {running} ({held['backend']}: {entry})"),
                    markup=False)
        if data["released"]:
            rel = data["released"]
            kernels = rel["kernels"]
            left = [k for k in kernels if k != kver] if isinstance(kernels, list) else []
            c.print(printable(f"hold kept for {', '.join(left)}" if left else
                              f"boot default restored ({rel['backend']}): the hold is released"),
                    markup=False)

    status = "ok" if code == EXIT_OK else "not-ready"
    return Outcome(NAME, status=status, data=data, errors=errors, exit_code=code,
                   render=render)
