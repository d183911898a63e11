"""Ctrl-C, SIGTERM and SIGHUP while a transaction runs: noted, not raised, so the engine
finishes or undoes the running step and rolls back in order instead of dying half-way.

Only the main thread can take signals; elsewhere this does nothing. A signal the caller
ignores (SIGHUP under `nohup`) stays ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator

DEFERRED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


# After a transaction ends, its command still releases the lock and builds its result: a
# signal there must not turn a committed transaction into "interrupted" (exit 130). So within
# a command (`command`, opened by cli.main) the handlers a transaction installs stay, noting
# into LATE, until `release`; _HELD keeps the handlers from before the first transaction.
# Outside a command (a library caller, a test) a transaction puts its handlers back at once.
LATE: list[str] = []
_HELD: dict[signal.Signals, Any] = {}
_COMMANDS: list[int] = []  # open commands (cli.main calls; one, unless nested in-process)


def command() -> None:
    """A command starts: a transaction's deferred signals are held until its `release`."""
    _COMMANDS.append(1)


def _late(signum: int, _frame: Any) -> None:
    LATE.append(signal.Signals(signum).name)


@contextlib.contextmanager
def deferring_signals(note: Callable[[str], None], *, hold: bool = False) -> Iterator[None]:
    """Within the block, each deferred signal calls `note("SIGINT")` etc. instead of its
    handler; the previous handlers are back afterwards, or with `hold` (a transaction) only
    at `release`: until then a signal is noted in LATE."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        note(signal.Signals(signum).name)

    old: dict[signal.Signals, Any] = {}
    for name in DEFERRED_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            old[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, previous in old.items():
            if hold and _COMMANDS:  # one step, never the default handler in between
                if sig not in _HELD and previous is not _late:
                    _HELD[sig] = previous
                signal.signal(sig, _late)
            else:
                signal.signal(sig, previous)


def release() -> list[str]:
    """The command has ended: the handlers from before its transactions are back; the
    signals that came after a transaction ended, in order (LATE emptied)."""
    if _COMMANDS:
        _COMMANDS.pop()
    if _COMMANDS:  # an outer command is still running: it releases them
        return []
    if threading.current_thread() is threading.main_thread():
        for sig, previous in _HELD.items():
            signal.signal(sig, previous)
    _HELD.clear()
    late, LATE[:] = list(LATE), []
    return late
