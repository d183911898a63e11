"""Helpers shared by the test modules (import from here, not from conftest: tests/lab has
its own conftest.py and both would be imported as the module `conftest`)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
HOSTS = FIXTURES / "hosts"
HWMGR = [sys.executable, "-m", "hwmgr"]


def python_runs_as_nobody() -> bool:
    """Whether this interpreter starts as `nobody` (the non-root tests drop to it): a pyenv
    Python under root's private home (the 3.9 and 3.13 legs of make test) cannot."""
    if os.geteuid() != 0:
        return False
    res = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                          sys.executable, "-c", "pass"], capture_output=True, check=False,
                         timeout=60)
    return res.returncode == 0


# Module globals hwmgr rebinds at run time (`global X`), put back after each in-process run so
# nothing one run set is seen by the next; the value is the import-time one. Pure memos keyed
# by their input (compiled schemas, control-character tables) may stay. test_inprocess.py
# fails when a `global` statement appears in hwmgr without an entry here or in PURE_GLOBALS.
RESET_GLOBALS = {"hwmgr.catalog.pciids": {"_default": None}}
PURE_GLOBALS: dict[str, set[str]] = {}  # module -> names whose value is a pure memo
# variables the hwmgr process reads only once (at start) or that make it act on itself
PROCESS_ONLY_ENV = ("HWMGR_TEST_CRASH_AT",)  # transaction/engine.py SIGKILLs its own process


class _Timeout(BaseException):
    """Raised by the alarm inside an in-process run (BaseException: cli.main's last line of
    defence catches Exception and must not swallow it)."""


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float | None = 120,
            cwd: Path = REPO):
    """Run the real CLI, `hwmgr.cli.main(args)`, in this process, as `python -m hwmgr` would
    run it from the checkout: stdout/stderr captured, stdin empty, `env` applied to
    os.environ and restored, cwd the checkout (or `cwd`: where a user would run a documented
    example with relative paths); returns a CompletedProcess (text). `timeout`
    raises subprocess.TimeoutExpired as the subprocess variant does. A run that needs its own
    process (env in PROCESS_ONLY_ENV) goes through `run_cli_process`."""
    if env and any(k in env for k in PROCESS_ONLY_ENV):
        return run_cli_process(*args, env=env, timeout=timeout, cwd=cwd)
    from hwmgr import cli

    saved_env = dict(os.environ)
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_cwd = os.getcwd()
    saved_tempdir = tempfile.tempdir
    saved_signals = {s: signal.getsignal(s) for s in _SIGNALS}
    out, err = io.StringIO(), io.StringIO()
    alarm = _arm(timeout)
    try:
        os.environ.update(env or {})
        tempfile.tempdir = None  # re-read TMPDIR as a fresh process would
        os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(""), out, err
        try:
            rc = cli.main(list(args))
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except _Timeout:
            raise subprocess.TimeoutExpired([*HWMGR, *args], timeout, out.getvalue(),
                                            err.getvalue()) from None
    finally:
        stopped = _disarm(alarm)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tempdir
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        if stopped:  # an outer alarm (pytest-timeout's) was running: give back what is left
            signal.setitimer(signal.ITIMER_REAL, stopped)
        _reset_globals()
    return subprocess.CompletedProcess(["hwmgr.cli.main", *args], rc, out.getvalue(),
                                       err.getvalue())


def run_cli_process(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
                    cwd: Path = REPO):
    """Run the real CLI in a subprocess (`python -m hwmgr`): for tests that need a process of
    its own (signals, a tty, a crash, environment read at start, its own timing)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [*HWMGR, *args], capture_output=True, text=True, timeout=timeout, env=full_env,
        cwd=cwd, check=False,
    )


_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGALRM)


def _arm(timeout: float | None) -> tuple[float, float] | None:
    """Start the run's alarm; returns the previous timer (pytest-timeout's) and when."""
    if not timeout or threading.current_thread() is not threading.main_thread():
        return None  # signals reach the main thread only: no timeout off it

    def _expired(signum: int, frame: object) -> None:
        raise _Timeout()

    signal.signal(signal.SIGALRM, _expired)
    previous = signal.setitimer(signal.ITIMER_REAL, timeout)
    return previous[0], time.monotonic()


def _disarm(alarm: tuple[float, float] | None) -> float:
    """Stop the run's alarm; returns what is left of the outer one (0: there was none)."""
    if alarm is None:
        return 0.0
    signal.setitimer(signal.ITIMER_REAL, 0)
    left, started = alarm
    return max(left - (time.monotonic() - started), 0.001) if left > 0 else 0.0


def _reset_globals() -> None:
    for name, values in RESET_GLOBALS.items():
        mod = sys.modules.get(name)
        for attr, value in values.items() if mod is not None else ():
            setattr(mod, attr, value)


def run_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    """Run the CLI with --json and parse its one JSON object."""
    res = run_cli(*args, "--json", env=env)
    try:
        doc = json.loads(res.stdout)
    except json.JSONDecodeError as exc:  # pragma: no cover - shows the output on failure
        raise AssertionError(f"not JSON: {res.stdout!r} {res.stderr!r}") from exc
    return res.returncode, doc
