"""The tests' crash hook: a process killed (or sent a signal) at a transaction step's
boundary, so crash recovery and Ctrl-C handling are proven on real processes. Inert unless
$HWMGR_TEST_CRASH_AT names a boundary; the engine's docstring gives its syntax. The kernel
gate's steps take the same hook, and $HWMGR_TEST_BOOT_ROOT points its boot loader at a test
root (`boot_host`)."""

from __future__ import annotations

import os
import signal

from hwmgr.host.seam import Host

TEST_CRASH_ENV = "HWMGR_TEST_CRASH_AT"


def crash_point(step_name: str, seq: int, phase: str) -> None:
    """SIGKILL this process (or send it the named signal) when $HWMGR_TEST_CRASH_AT names
    step `step_name` (or its number `seq`) at `phase`."""
    spec = os.environ.get(TEST_CRASH_ENV)
    if not spec:
        return
    for item in spec.split(","):
        where, _, when = item.strip().rpartition(":")
        sig = signal.SIGKILL
        if when in ("INT", "TERM", "HUP"):
            sig = getattr(signal, f"SIG{when}")
            where, _, when = where.rpartition(":")
        if when == phase and where in (step_name, str(seq)):
            os.kill(os.getpid(), sig)


TEST_BOOT_ROOT_ENV = "HWMGR_TEST_BOOT_ROOT"


def boot_host(host: Host) -> Host:
    """The host whose boot loader `kernel-gate` holds: `host`, or, when
    $HWMGR_TEST_BOOT_ROOT names a directory, a test root holding a boot loader's files (a
    grubenv the test reads back), so a real gate process is tested without touching this
    machine's boot configuration."""
    root = os.environ.get(TEST_BOOT_ROOT_ENV)
    return Host(root, host.runner) if root else host
