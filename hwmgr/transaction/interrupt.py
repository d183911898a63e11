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


@contextlib.contextmanager
def deferring_signals(note: Callable[[str], None]) -> Iterator[None]:
    """Within the block, each deferred signal calls `note("SIGINT")` etc. instead of its
    handler; the previous handlers are back afterwards."""
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
            signal.signal(sig, previous)
