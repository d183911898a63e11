"""The kernel gate's steps and the signals that arrive during them (docs/kernel-gate.md,
"Ctrl-C and SIGTERM").

The gate is no journaled transaction, but a Ctrl-C, SIGTERM or SIGHUP during it is handled
the same way: answered at once on stderr, the command in flight stopped (a DKMS build is not
waited for), no further build started, and the gate ended in its safe state: the kernel not
gated, its record saying so, the boot default held on the running kernel. The hold (or
release) itself is the point of no return: a signal during it lets it finish.
"""

from __future__ import annotations

from typing import Callable

from hwmgr.host.runner import allow_commands, stop_commands
from hwmgr.transaction.interrupt import answer
from hwmgr.transaction.testhook import crash_point

FINAL_STEPS = ("hold", "release")  # the point of no return: finished, never stopped


class GateSteps:
    """Numbers the gate's steps as they start, notes the first signal (`signal`) and where it
    came (`where`); `start` says whether the gate may go on."""

    def __init__(self, say: Callable[[str, bool, int, str, str], None] = answer) -> None:
        self.seq = 0
        self.step = ""
        self.signal: str | None = None
        self.where = ""  # "step 2 (dkms-install)": the step the first signal stopped
        self.undoing = False  # the gate is settling after a signal: commands run again
        self._say = say

    def start(self, name: str, *, settling: bool = False) -> bool:
        """Step `name` begins (the tests' crash hook may send a signal here, and at the end
        of the step before: "after"); False when a
        signal has stopped the gate, so the step must not run. A `settling` step (the
        record, the hold) runs either way: it is what leaves the host consistent."""
        if self.step and self.signal is None:
            crash_point(self.step, self.seq, "after")  # the step before is done
        if self.signal is not None and not settling:
            return False
        self.seq += 1
        self.step = name
        crash_point(name, self.seq, "before")
        return settling or self.signal is None

    def note(self, name: str) -> None:
        """A deferred signal (interrupt.deferring_signals calls this from its handler)."""
        first = self.signal is None
        if first:
            self.signal, self.where = name, f"step {max(self.seq, 1)} ({self.step or 'start'})"
        if self.step in FINAL_STEPS:
            self._say(name, first, self.seq, self.step, "finishing")
            return
        if first and not self.undoing:
            stop_commands()  # the build in flight ends now, not in ten minutes
        self._say(name, first, max(self.seq, 1), self.step or "start", "running")

    def settle(self) -> None:
        """After a signal: commands run again so the gate can put the host in its safe state
        (uninstall a half-done install, depmod, hold the default); later signals are only
        answered."""
        self.undoing = True
        allow_commands()

    @property
    def stopped(self) -> bool:
        """A signal stopped the gate before its point of no return."""
        return self.signal is not None and not self.where.endswith(
            tuple(f"({s})" for s in FINAL_STEPS))

    def why(self) -> str:
        return f"interrupted by {self.signal} at {self.where}: not gated"
