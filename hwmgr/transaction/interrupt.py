"""Ctrl-C, SIGTERM and SIGHUP while a transaction runs: noted, not raised, so the engine
finishes or undoes the running step and rolls back in order instead of dying half-way.

Only the main thread can take signals; elsewhere this does nothing. A signal the caller
ignores (SIGHUP under `nohup`) stays ignored. Each signal is answered at once on stderr
(`answer`): the first says which step is being undone, every later one that it still is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import Callable, Iterator, Optional, Union

DEFERRED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
# what signal.signal takes and gives back: a function, SIG_DFL / SIG_IGN, or None (not set
# from Python)
Handler = Union[Callable[[int, Optional[FrameType]], object], int, signal.Handlers, None]


# After a transaction ends, its command still releases the lock and builds its result: a
# signal there must not turn a committed transaction into "interrupted" (exit 130). So within
# a command (`command`, opened by cli.main) the handlers a transaction installs stay, noting
# into LATE, until `release`; _HELD keeps the handlers from before the first transaction.
# Outside a command (a library caller, a test) a transaction puts its handlers back at once.
LATE: list[str] = []
_HELD: dict[signal.Signals, Handler] = {}
_COMMANDS: list[int] = []  # open commands (cli.main calls; one, unless nested in-process)


_OUTER: dict[signal.Signals, Handler] = {}  # SIGTERM and SIGHUP's handlers before the command


def command() -> None:
    """A command starts: a transaction's deferred signals are held until its `release`, and
    SIGTERM and SIGHUP end it like Ctrl-C (exit 130, its commands stopped) instead of
    killing it outright."""
    _COMMANDS.append(1)
    if len(_COMMANDS) == 1 and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                _OUTER[sig] = signal.signal(sig, _like_ctrl_c)


def _like_ctrl_c(signum: int, _frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _late(signum: int, _frame: Optional[FrameType]) -> None:
    LATE.append(signal.Signals(signum).name)


@contextlib.contextmanager
def deferring_signals(note: Callable[[str], None], *, hold: bool = False) -> Iterator[None]:
    """Within the block, each deferred signal calls `note("SIGINT")` etc. instead of its
    handler; the previous handlers are back afterwards, or with `hold` (a transaction) only
    at `release`: until then a signal is noted in LATE."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Optional[FrameType]) -> None:
        note(signal.Signals(signum).name)

    old: dict[signal.Signals, Handler] = {}
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
        for sig, previous in [*_HELD.items(), *_OUTER.items()]:
            signal.signal(sig, previous)
    _HELD.clear()
    _OUTER.clear()
    late, LATE[:] = list(LATE), []
    return late


def answer(name: str, first: bool, number: int, step: str, phase: str) -> None:
    """Say on stderr, at once, what a deferred signal does: the transaction is at step
    `number` (1-based) named `step`, in `phase` ("before" | "running" | "done" | "undo" |
    "finishing": past the point of no return | "ended")."""
    who = "interrupted" if name == "SIGINT" else f"interrupted by {name}"
    if phase == "ended":
        line = f"{who}: the transaction has ended; its result stands"
    elif phase == "before":
        line = f"{who}: stopping before step {number} ({step}); nothing was changed"
    elif phase == "finishing":
        line = (f"{who}: past the point of no return: finishing step {number} ({step}) and "
                "the rest so the host ends in the new state; Ctrl-C again is ignored" if first
                else f"{name} again: still finishing step {number} ({step}); ignored until "
                "the host is consistent")
    elif not first:
        line = (f"{name} again: still undoing step {number} ({step}); ignored until the host "
                "is consistent")
    else:
        what = "already undoing" if phase == "undo" else "undoing"
        line = (f"{who}: {what} step {number} ({step}); Ctrl-C again is ignored until the "
                "host is consistent")
    say(line)


def say(line: str) -> None:
    """One line on stderr now, from a signal handler too: straight to the descriptor when
    stderr has one (the buffered writer may be in the middle of a write), else written."""
    text = f"hwmgr: {line}\n"
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # captured (a test's StringIO, Ansible's)
        sys.stderr.write(text)
        return
    with contextlib.suppress(RuntimeError, OSError):  # reentrant flush: the line goes anyway
        sys.stderr.flush()
    with contextlib.suppress(OSError):
        os.write(fd, text.encode("utf-8", "backslashreplace"))
