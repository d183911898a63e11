"""Command runners: the only place hwmgr spawns processes.

`SubprocessRunner` runs real commands (argv only, `LC_ALL=C`, a timeout, rc 127 for a missing
binary), and never answers for a tool itself, so what a snapshot records is what the tool
printed. `ReplayRunner` serves a snapshot's
recorded outputs (docs/formats.md) and answers anything unrecorded as "not available" (rc 127)
with `unrecorded` set, so callers can tell "the snapshot lacks it" from "the binary is
missing". `RecordingRunner` wraps another runner and keeps every call, so `hwmgr snapshot` can
store exactly what the tool ran.
"""

from __future__ import annotations

import os
import select
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence

from hwmgr import safejson
from hwmgr.errors import BadInputError
from hwmgr.output import printable

RC_NOT_AVAILABLE = 127
RC_TIMEOUT = 124
DEFAULT_TIMEOUT = 30.0
MAX_OUTPUT_BYTES = 16 << 20  # of each of stdout and stderr kept; the rest is read and dropped
EXIT_GRACE = 2.0  # seconds the pipes may stay open after the command exited (a child it left)
POLL = 0.2  # seconds between looks at whether the command exited while its pipes are open
RC_STOPPED = 130  # a command stopped (or never started) because hwmgr was interrupted

# Set by a transaction when Ctrl-C or SIGTERM arrives while it goes forward: the command in
# flight is stopped (its whole session) within POLL, and none starts until the transaction
# clears it to undo (`stop_commands`, `allow_commands`). Signals are process-wide, so is this.
_STOP = threading.Event()


def stop_commands() -> None:
    """Stop the command in flight and refuse new ones, until `allow_commands` (an interrupted
    transaction going forward: the step fails at once instead of waiting for a build)."""
    _STOP.set()


def allow_commands() -> None:
    """Commands run again (the interrupted transaction undoes what it did)."""
    _STOP.clear()


@dataclass(frozen=True)
class Result:
    """What one command did: argv, exit code and decoded output."""

    argv: tuple[str, ...]
    rc: int
    stdout: str = ""
    stderr: str = ""
    unrecorded: bool = False  # a snapshot has no recorded output for this argv
    stopped: bool = False  # stopped, or never started, because hwmgr was interrupted

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def available(self) -> bool:
        """False when the binary is missing (or was not recorded in a snapshot)."""
        return self.rc != RC_NOT_AVAILABLE

    def describe(self) -> str:
        """One line naming the command and why it failed, for error messages."""
        msg = (self.stderr or self.stdout).strip().splitlines()
        tail = msg[-1] if msg else ""
        return f"`{' '.join(self.argv)}` exited {self.rc}" + (f": {tail}" if tail else "")


class Runner(Protocol):
    """Anything that runs an argv list and returns a Result (never raises for rc != 0)."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Result: ...


def _decode(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")


class SubprocessRunner:
    """Runs real processes with a C locale and a timeout; a missing binary is rc 127."""

    def __init__(self, extra_env: Mapping[str, str] | None = None) -> None:
        self.extra_env = dict(extra_env or {})

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Result:
        args = tuple(str(a) for a in argv)
        if not args:
            raise ValueError("empty argv")
        if _STOP.is_set():
            return Result(args, RC_STOPPED, "", f"{args[0]}: not started: hwmgr was interrupted",
                          stopped=True)
        full_env = dict(os.environ)
        full_env.update(self.extra_env)
        full_env.update(env or {})
        full_env["LC_ALL"] = "C"
        full_env.pop("LANGUAGE", None)
        try:
            # its own session, so a timeout or Ctrl-C stops the whole tree it started (dkms's
            # make and gcc), not just the first process while the build runs on orphaned
            proc = subprocess.Popen(  # noqa: S603 - argv list, never a shell
                args,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError:
            return Result(args, RC_NOT_AVAILABLE, "", f"{args[0]}: command not found")
        except PermissionError as exc:
            return Result(args, 126, "", f"{args[0]}: {exc.strerror}")
        with proc:
            try:
                out, err, timed_out = _drain(proc, input.encode() if input is not None
                                             else None, timeout)
            except BaseException:  # Ctrl-C, SIGTERM: nothing hwmgr started outlives it
                _kill_tree(proc)
                raise
            if timed_out:
                _kill_tree(proc)
                return Result(args, RC_TIMEOUT, _decode(bytes(out.data)),
                              f"{args[0]}: timed out after {timeout:g}s")
            if _STOP.is_set():
                _kill_tree(proc)
                return Result(args, RC_STOPPED, _decode(out.text()), _decode(err.text())
                              + f"\n{args[0]}: stopped: hwmgr was interrupted", stopped=True)
            if proc.poll() is None or out.open or err.open:  # pipes held past EXIT_GRACE
                _kill_tree(proc)
        return Result(args, proc.returncode, _decode(out.text()), _decode(err.text()))


@dataclass
class _Stream:
    """One output pipe as it is drained: the first MAX_OUTPUT_BYTES kept, the rest counted."""

    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0
    open: bool = True

    def take(self, chunk: bytes) -> None:
        room = max(0, MAX_OUTPUT_BYTES - len(self.data))
        self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - room)

    def text(self) -> bytes:
        if not self.dropped:
            return bytes(self.data)
        return bytes(self.data) + f"\n[hwmgr: {self.dropped} more bytes dropped]\n".encode()


def _drain(proc: subprocess.Popen[bytes], data: bytes | None,
           timeout: float) -> tuple[_Stream, _Stream, bool]:
    """Feed stdin and read stdout and stderr at once (a tool that fills one pipe while
    hwmgr waits on the other never blocks), keeping at most MAX_OUTPUT_BYTES of each. Ends
    when both pipes close, at `timeout` (True), EXIT_GRACE after the command exited while
    something it left behind still holds a pipe, or when `stop_commands` was called."""
    streams = {proc.stdout: _Stream(), proc.stderr: _Stream()}
    deadline = time.monotonic() + timeout
    exited: float | None = None
    with selectors.DefaultSelector() as sel:
        for pipe in streams:
            sel.register(pipe, selectors.EVENT_READ)  # type: ignore[arg-type]
        pending = memoryview(data or b"")
        if proc.stdin is not None:
            if data:
                sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        while any(s.open for s in streams.values()):
            now = time.monotonic()
            if _STOP.is_set():
                return streams[proc.stdout], streams[proc.stderr], False
            if now >= deadline:
                return streams[proc.stdout], streams[proc.stderr], True
            if exited is None and proc.poll() is not None:
                exited = now
            if exited is not None and now - exited >= EXIT_GRACE:
                break
            for key, _ in sel.select(min(deadline - now, POLL)):
                if key.fileobj is proc.stdin:
                    try:
                        sent = os.write(key.fd, pending[:select.PIPE_BUF])
                    except BrokenPipeError:
                        sent = len(pending)
                    pending = pending[sent:]
                    if not pending:
                        sel.unregister(key.fileobj)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fd, 1 << 16)
                stream = streams[key.fileobj]  # type: ignore[index]
                if chunk:
                    stream.take(chunk)
                else:
                    stream.open = False
                    sel.unregister(key.fileobj)
    while exited is None and not _STOP.is_set():  # pipes closed, the command still runs
        try:
            proc.wait(timeout=max(0.0, min(deadline - time.monotonic(), POLL)))
            break
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                return streams[proc.stdout], streams[proc.stderr], True
    return streams[proc.stdout], streams[proc.stderr], False


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the session `proc` leads (it and everything it started), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


@dataclass
class RecordingRunner:
    """Wraps a runner and remembers every call and its result (for snapshots)."""

    inner: Runner
    calls: list[Result] = field(default_factory=list)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Result:
        res = self.inner.run(argv, timeout=timeout, input=input, env=env, cwd=cwd)
        self.calls.append(res)
        return res


MAX_RECORDED_BYTES = 16 << 20  # a recorded output (or the index) larger than this is refused


class ReplayRunner:
    """Serves a snapshot's `commands/index.json` by exact argv match.

    `read_file` reads a snapshot file (up to MAX_RECORDED_BYTES + 1 bytes, so one that is
    larger, such as a huge sparse file, shows as such and is refused instead of cut).

    argv[0] is matched as a bare command name, so `/usr/sbin/ethtool -i eth0` and
    `ethtool -i eth0` are the same call. Unrecorded calls answer rc 127 ("not available")
    with `unrecorded=True`.
    """

    def __init__(self, root: Path, read_file: Callable[[str], bytes | None]) -> None:
        self.root = root
        self._table: dict[tuple[str, ...], Result] = {}
        raw = read_file("commands/index.json")
        if raw is None:
            return
        index = f"{printable(root)}/commands/index.json"
        if len(raw) > MAX_RECORDED_BYTES:
            raise BadInputError(f"{index}: larger than {MAX_RECORDED_BYTES >> 20} MiB")
        entries = safejson.load(raw, index)
        if not isinstance(entries, list):
            raise BadInputError(f"{index}: expected a list of entries")
        for i, entry in enumerate(entries):
            where = f"{index}[{i}]"
            if not isinstance(entry, dict):
                raise BadInputError(f"{where}: expected an object")
            argv = entry.get("argv")
            if (
                not isinstance(argv, list)
                or not argv
                or not all(isinstance(a, str) for a in argv)
            ):
                raise BadInputError(f"{where}.argv: expected a non-empty list of strings")
            rc = entry.get("rc", 0)
            if not isinstance(rc, int) or isinstance(rc, bool):
                raise BadInputError(f"{where}.rc: expected an integer")
            out = self._load(entry.get("stdout"), f"{where}.stdout", read_file)
            err = self._load(entry.get("stderr"), f"{where}.stderr", read_file)
            key = self._key(argv)
            self._table[key] = Result(key, rc, out, err)

    @staticmethod
    def _key(argv: Sequence[str]) -> tuple[str, ...]:
        args = [str(a) for a in argv]
        return (os.path.basename(args[0]), *args[1:])

    @staticmethod
    def _load(ref: object, where: str, read_file: Callable[[str], bytes | None]) -> str:
        if ref is None:
            return ""
        if not isinstance(ref, str) or ref.startswith("/") or ".." in ref.split("/"):
            raise BadInputError(f"{where}: expected a relative path inside the snapshot")
        data = read_file(ref)
        if data is None:
            raise BadInputError(f"{where}: recorded output file '{printable(ref)}' is missing "
                                "or not a regular file")
        if len(data) > MAX_RECORDED_BYTES:
            raise BadInputError(f"{where}: recorded output file '{printable(ref)}' is larger "
                                f"than {MAX_RECORDED_BYTES >> 20} MiB")
        return data.decode("utf-8", errors="replace")

    @property
    def recorded(self) -> list[tuple[str, ...]]:
        return list(self._table)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Result:
        key = self._key(argv)
        hit = self._table.get(key)
        if hit is not None:
            return hit
        return Result(key, RC_NOT_AVAILABLE, "", f"{key[0]}: not recorded in snapshot",
                      unrecorded=True)
