"""Shared pieces of the lifecycle verbs: option wiring, plan and transaction rendering."""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, TextIO

from hwmgr.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    NotPermittedError,
    UsageError,
)
from hwmgr.host.seam import Host
from hwmgr.lifecycle.plan import Plan
from hwmgr.output import Outcome, printable
from hwmgr.transaction.result import TxnResult
from hwmgr.ui.options import common_options, lifecycle_options

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console
    from rich.progress import Progress, TaskID


def parents(mutating: bool = True, root: bool = False) -> list[argparse.ArgumentParser]:
    return [common_options(root=root), lifecycle_options(mutating)]


def require_root(host: Host, what: str = "changes drivers (DKMS, /lib/modules, the journal "
                 "in the state dir)") -> None:
    """Mutating the live host needs root; say so, with what the verb changes, before anything
    happens."""
    if host.live and os.geteuid() != 0:
        raise NotPermittedError(f"must run as root: it {what}")


def confirm(args: argparse.Namespace, what: str) -> None:
    """Ask on a terminal; without one, require --yes."""
    if getattr(args, "yes", False):
        return
    if not sys.stdin.isatty():
        raise UsageError(f"refusing to {what} without confirmation: add --yes")
    answer = input(f"{what}? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise UsageError("cancelled")


def plan_outcome(command: str, plan: Plan) -> Outcome:
    data = plan.as_dict()
    if plan.refusals:  # the exit code is the first refusal's (they are in fix-first order)
        return Outcome(command, status="refused", data=data,
                       errors=[r["reason"] for r in data["refusals"]],
                       exit_code=getattr(plan, "exit_code", EXIT_REFUSED),
                       render=lambda c: render_plan(c, data), render_shows_errors=True)
    return Outcome(command, data=data, render=lambda c: render_plan(c, data))


def render_plan(console: Console, d: dict[str, Any]) -> None:
    from rich.markup import escape  # rich: only drawing needs it

    p = printable
    head = p(f"{d['action']} {d['driver']} → {d['to_version']}")
    console.print(f"[bold]{escape(head)}[/]", highlight=False)
    if not d["kernels"]:
        console.print("  target kernel: none", markup=False)
    for k in d["kernels"]:
        path = next((b["path"] for b in d["backups"] if b["kernel"] == k and b["path"]), None)
        now = ("unknown (not in the snapshot)" if k in d.get("unread", [])
               else d["from_versions"].get(k)
               or (f"a module without a version field ({path})" if path else "no module"))
        console.print(printable(f"  target kernel {k}: now {now}")
                      + ("  (module is in the initramfs)" if d["initramfs"].get(k) else ""),
                      markup=False)
    if d["devices"]:
        for dev in d["devices"]:
            console.print(p(f"  device {dev['address']} {dev['vendor_id']}:{dev['device_id']} "
                            f"interfaces {', '.join(dev['interfaces']) or '-'}"), markup=False)
    else:
        console.print("  no device is bound to this driver right now", markup=False)
    console.print("  steps:", markup=False)
    for i, step in enumerate(d["steps"], 1):
        console.print(p(f"    {i}. {step}"), markup=False)
    for b in d["backups"]:
        console.print(p(f"  keeps: {b['kernel']} {b['module']}: {b['path'] or '(none)'} "
                        f"{b['version'] or ''}"), markup=False)
    console.print(f"  reboot required after this {d['action']}: "
                  f"{'yes' if d['reboot_required'] else 'no'}", markup=False)
    now = "; ".join(d.get("reboot_pending") or []) or "no"
    console.print(p(f"  reboot pending now: {'yes: ' if now != 'no' else ''}{now}"), markup=False)
    for w in d["warnings"]:
        console.print(f"  [yellow]warning:[/] {escape(printable(w))}")
    for r in d["refusals"]:
        console.print(f"  [bold red]refused (exit {r['code']}):[/] ", end="")
        console.print(printable(r["reason"]), markup=False, highlight=False, soft_wrap=True)


def interrupted_line(res: TxnResult, what: str) -> str | None:
    """The one line for a transaction a signal stopped (None when none did): rolled back,
    or left open for `hwmgr recover` when an undo failed. Its exit code is 130."""
    if res.signal is None or res.ok:
        return None
    if res.closed:
        return (f"transaction #{res.id} {what}: rolled back: {res.error}; every step it had "
                "done was undone in reverse, the host is as it was before")
    return f"transaction #{res.id} {what}: interrupted by {res.signal}: {res.error}"


def txn_outcome(command: str, plan: Plan, result: TxnResult) -> Outcome:
    data = {"plan": plan.as_dict(), "transaction": result.as_dict()}
    ok = result.state == "committed"
    stopped = interrupted_line(result, f"{plan.action} of {plan.driver} to {plan.to_version}")
    if stopped is not None:
        return Outcome(command, status="failed", data=data, errors=[stopped],
                       exit_code=EXIT_INTERRUPTED)
    errors = [] if ok else [result.error or f"transaction ended {result.state}"]
    msg = (f"{plan.action} of {plan.driver} to {plan.to_version}: {result.state} "
           f"(transaction #{result.id})")
    if ok and plan.reboot_required:
        msg += "; reboot to load it, then 'hwmgr verify'"
    return Outcome(command, status="ok" if ok else result.state, data=data, errors=errors,
                   exit_code=0 if ok else EXIT_FAILED,
                   render=lambda c: c.print(printable(msg), markup=False))


@dataclass
class _Download:
    """One download's display state: whether its start and end were told, its bar."""

    started: bool = False
    ended: bool = False
    bar: Progress | None = None
    task: TaskID | None = None


class ProgressUI:
    """Step progress for a transaction: rich bars on a terminal, one log line per event
    otherwise (cron, Ansible, CI logs). Writes to stderr so --json stdout stays clean."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._console: Console | None = None
        self._t0 = time.monotonic()
        self._bars: list[_Download] = []  # the terminal bars still running

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console  # rich: only drawing needs it

            self._console = Console(file=self.stream, highlight=False)
        return self._console

    def _line(self, msg: str) -> None:
        # retries quote a server's reason phrase and a tool's words: escaped, like errors
        msg = printable(msg)
        if self.tty:
            self.console.print(msg, markup=False)
        else:
            print(f"hwmgr: [{time.monotonic() - self._t0:6.1f}s] {msg}", file=self.stream,
                  flush=True)

    def step(self, name: str, phase: str) -> None:
        self._line(f"step {name}: {phase}")

    def download(self, name: str, total: int) -> Callable[[int, int], None]:
        """A fetch progress callback (done, total): a rich bar on a terminal, a line when the
        transfer starts and one when it ends otherwise. Nothing shows until bytes move (a
        cache or mirror hit never calls it)."""
        t0 = time.monotonic()
        state = _Download()

        def piped(done: int, tot: int) -> None:
            size = tot or total
            if not state.started:
                state.started = True
                how = f"resuming at {done} of {size}" if done else f"{size}"
                self._line(f"downloading {name} ({how} bytes)")
            if done >= size and not state.ended:
                state.ended = True
                self._line(f"downloaded {name}: {size} bytes in "
                           f"{time.monotonic() - t0:.1f} s")

        if not self.tty:
            return piped
        self._bars.append(state)

        def update(done: int, tot: int) -> None:
            if state.bar is None or state.task is None:
                state.bar, state.task = self._bar(name, tot or total)
            bar = state.bar
            bar.update(state.task, completed=done, total=tot or total)
            if done >= (tot or total):
                bar.stop()
                self._bars.remove(state)

        return update

    def _bar(self, name: str, total: int) -> tuple[Progress, TaskID]:
        from rich.progress import (  # rich: only a progress bar on a terminal needs it
            BarColumn,
            DownloadColumn,
            Progress,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        bar = Progress("[progress.description]{task.description}", BarColumn(),
                       DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                       console=self.console, transient=True)
        task = bar.add_task(name, total=total)
        bar.start()
        return bar, task

    def retry(self, text: str) -> None:
        """A download failed and will be retried: say why and when (above a running bar)."""
        self._line(text)

    def close(self) -> None:
        """Stop any bar a failed download left running (the error line then stands alone)."""
        for state in self._bars:
            if state.bar is not None:
                state.bar.stop()
        self._bars.clear()

    def build_log(self, log: str, tail: list[str]) -> None:
        """A failed build's last make.log lines, before the undo starts (the log is kept)."""
        self._line(f"dkms build failed; last {len(tail)} lines of {log}:")
        for line in tail:
            print(printable(f"  | {line}"), file=self.stream, flush=True)

    @contextmanager
    def activity(self, what: str) -> Iterator[None]:
        """A spinner with elapsed time on a terminal (builds give no byte counts)."""
        t0 = time.monotonic()
        if self.tty:
            with self.console.status(what):
                yield
        else:
            self._line(f"{what} ...")
            yield
        self._line(f"{what}: {time.monotonic() - t0:.1f}s")
