"""A failed DKMS build, told so a user can fix it: the make line, the first error, the log's end.

DKMS 3 writes the build's output to `<dkms tree>/<name>/<version>/build/make.log` and, on a
failure, leaves it there; the undo of a failed upgrade deletes that tree. So the failure
carries the log's logical path, and the caller copies the whole log somewhere it stays
(`keep_log`) before anything is undone.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Optional, Protocol, runtime_checkable

from hwmgr.errors import HwmgrError
from hwmgr.host.seam import Host

TAIL_LINES = 20
MAX_LOG_BYTES = 16 << 20  # a make.log larger than this is kept whole, but read only so far
# DKMS prints each command it runs, dots while it runs, then "(bad exit status: N)" when it
# fails: "make -j2 KERNELRELEASE=6.1.0-56-amd64 -C ... modules.....(bad exit status: 2)"
# (split with str methods: the single regex this was, `\S.*?\.*\(`, backtracked
# quadratically on a long run of dots)
_BAD_EXIT = "(bad exit status: "
_EXIT_TAIL = re.compile(r"\d+\)\s*")  # what follows _BAD_EXIT, to the end of the line
# what make, the compiler and kbuild print when they stop, most telling first: a vendor
# Makefile's own "*** note" banners (signing disabled, ...) come last
_ERROR_RES = tuple(re.compile(p) for p in (
    r"\berror:", r"No rule to make target|No targets|missing separator",
    r"\*\*\*.*\bError \d+", r"(?i)\berror\b"))


@runtime_checkable
class BuildUI(Protocol):
    """What a build or an upgrade shows as it runs (ui.lifecycle.ProgressUI): the download,
    its retries, each long activity, a failed build's log."""

    def download(self, name: str, total: int) -> Callable[[int, int], None]: ...

    def retry(self, text: str) -> None: ...

    def activity(self, what: str) -> ContextManager[None]: ...

    def build_log(self, log: str, tail: list[str]) -> None: ...


def activity(ui: Optional[BuildUI], what: str) -> ContextManager[None]:
    """`ui.activity(what)` (a spinner on a terminal, start and end lines otherwise), or
    nothing without a ui."""
    return ui.activity(what) if ui is not None else contextlib.nullcontext()


@dataclass(frozen=True)
class LogFacts:
    """What a make.log says about a failed build."""

    first_error: str  # the first line make, gcc or kbuild flagged ('' when none)
    tail: tuple[str, ...] = field(default_factory=tuple)  # its last TAIL_LINES lines


def make_command(dkms_output: str) -> str:
    """The build command DKMS ran and saw fail (it rewrites a leading `make` into
    `make -jN KERNELRELEASE=...`); '' when its output names none."""
    for line in dkms_output.splitlines():
        head, sep, tail = line.rpartition(_BAD_EXIT)
        command = head.rstrip(".").strip()
        if (sep and command and _EXIT_TAIL.fullmatch(tail)
                and not command.startswith("Cleaning build area")):
            return command
    return ""


def read_facts(text: str, tail_lines: int = TAIL_LINES) -> LogFacts:
    """The first error line (by how telling it is) and the last `tail_lines` lines of a
    make.log's text."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    first = ""
    for pattern in _ERROR_RES:
        first = next((ln.strip() for ln in lines if pattern.search(ln)), "")
        if first:
            break
    while lines and not lines[-1]:
        lines.pop()
    return LogFacts(first, tuple(lines[-tail_lines:]))


def log_facts(host: Host, log: str) -> LogFacts:
    """`read_facts` of a host's make.log (empty facts when it is missing)."""
    data = host.read_bytes(log, limit=MAX_LOG_BYTES) or b""
    return read_facts(data.decode("utf-8", "replace"))


class BuildFailed(HwmgrError):
    """`dkms build` failed: the one-line message (`summary`: the make line and the first
    error) names the log; `facts` holds the log's last lines for the caller to show."""

    def __init__(self, summary: str, *, log: str, kernel: str, make_line: str,
                 facts: LogFacts, kept: bool = False) -> None:
        where = f"whole log kept in {log}" if kept else f"see {log}"
        super().__init__(f"{summary}; {where}")
        self.summary = summary
        self.log = log
        self.kernel = kernel
        self.make_line = make_line
        self.facts = facts

    def kept_at(self, path: str) -> BuildFailed:
        """The same failure, naming the copy of the log that outlives the DKMS tree."""
        return BuildFailed(self.summary, log=path, kernel=self.kernel,
                           make_line=self.make_line, facts=self.facts, kept=True)

    def as_dict(self) -> dict[str, object]:
        return {"kernel": self.kernel, "make_line": self.make_line,
                "first_error": self.facts.first_error, "log_tail": list(self.facts.tail)}


def keep_log(host: Host, failure: BuildFailed, dest: str) -> str | None:
    """Copy the failed build's whole make.log to host path `dest`; None when there is none."""
    if not host.exists(failure.log):
        return None
    host.copy_file(failure.log, dest)
    return dest
