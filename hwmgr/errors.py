"""One error hierarchy for hwmgr; each error carries the exit code the CLI returns.

Only `cli.py` prints errors or exits; everything else raises these.
"""

from __future__ import annotations

import re

from hwmgr import urls

# Exit codes. Their meanings (EXIT_MEANINGS) and each verb's EXIT_CODES generate the README
# table, docs/exit-codes.md and the Ansible modules' table (scripts/gen-exit-codes).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_NOTHING_TO_DO = 4
EXIT_DRIFT = 5
EXIT_PARTIAL = 6
EXIT_REBOOT_PENDING = 7
EXIT_BAD_INPUT = 8
EXIT_REFUSED = 9
EXIT_LOCKED = 10
EXIT_UNKNOWN = 11
EXIT_NOT_READY = 12
EXIT_PERMISSION = 13
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

# code -> a short name (error messages, the Ansible modules' table)
EXIT_NAMES: dict[int, str] = {
    EXIT_OK: "ok", EXIT_FAILED: "failed", EXIT_USAGE: "usage error", EXIT_NOT_FOUND: "not found",
    EXIT_NOTHING_TO_DO: "nothing to do", EXIT_DRIFT: "drift", EXIT_PARTIAL: "partial",
    EXIT_REBOOT_PENDING: "reboot pending", EXIT_BAD_INPUT: "bad input data",
    EXIT_REFUSED: "refused", EXIT_LOCKED: "locked by another hwmgr", EXIT_UNKNOWN: "unknown",
    EXIT_NOT_READY: "not ready",
    EXIT_PERMISSION: "permission denied", EXIT_INTERNAL: "internal error",
    EXIT_INTERRUPTED: "interrupted",
}
# code -> what it means for any verb (short; a verb's own table says what it means there)
EXIT_MEANINGS: dict[int, str] = {
    EXIT_OK: "success / compliant",
    EXIT_FAILED: "the operation failed (e.g. a build or a verification failed)",
    EXIT_USAGE: "usage error (bad command line)",
    EXIT_NOT_FOUND: "not found (device, driver, version, file, snapshot)",
    EXIT_NOTHING_TO_DO: "nothing to do (already in the requested state)",
    EXIT_DRIFT: "drift: the host does not comply with the catalog",
    EXIT_PARTIAL: "partial success (fleet runs)",
    EXIT_REBOOT_PENDING: "reboot pending",
    EXIT_BAD_INPUT: "bad input data (malformed snapshot, catalog, recipe, version string, "
                    "journal; an unsafe archive member; a directory, device or FIFO where a "
                    "file belongs)",
    EXIT_REFUSED: "refused by a safety check (nothing was changed)",
    EXIT_LOCKED: "another hwmgr holds the host lock",
    EXIT_UNKNOWN: "unknown: something could not be read (e.g. a snapshot lacks a recorded "
                  "output: retake it)",
    EXIT_NOT_READY: "not ready: a managed driver is not ready for a new kernel (the boot "
                    "default is held on the running one)",
    EXIT_PERMISSION: "permission denied (needs root)",
    EXIT_INTERNAL: "internal error (a bug: rerun with --debug for the traceback)",
    EXIT_INTERRUPTED: "interrupted by Ctrl-C (SIGINT), SIGTERM or SIGHUP, all three alike: a "
                      "transaction that was running was undone first",
}


class HwmgrError(Exception):
    """Base error: a one-line message for the user and an exit code."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(HwmgrError):
    """The command line itself is wrong."""

    exit_code = EXIT_USAGE


class NotFoundError(HwmgrError):
    """A named device, driver, version, file or transaction does not exist."""

    exit_code = EXIT_NOT_FOUND


class NothingToDo(HwmgrError):
    """The request is already satisfied (e.g. driver already at that version)."""

    exit_code = EXIT_NOTHING_TO_DO


class BadInputError(HwmgrError):
    """A snapshot, catalog, recipe or other input file is malformed."""

    exit_code = EXIT_BAD_INPUT


class RefusedError(HwmgrError):
    """A safety check refused a mutating operation; nothing was changed."""

    exit_code = EXIT_REFUSED


class UnknownError(HwmgrError):
    """Something could not be read (e.g. a snapshot lacks a recorded output): no verdict."""

    exit_code = EXIT_UNKNOWN


class LockedError(HwmgrError):
    """Another hwmgr process holds the host lock."""

    exit_code = EXIT_LOCKED


class NotPermittedError(HwmgrError):
    """The operation needs privileges the caller does not have."""

    exit_code = EXIT_PERMISSION


class VersionError(HwmgrError):
    """Versions that cannot be compared (unparseable, or different schemes)."""

    exit_code = EXIT_BAD_INPUT


_ERRNO_TEXT = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")
# what the C library / urllib3 say → how a sysadmin says it ({where} = host:port, {host})
_NET_WORDS = (
    ("refused", "connection refused by {where}"),
    ("reset by peer", "connection reset by {where}"),
    ("name or service not known", "cannot resolve the host name {host}"),
    ("temporary failure in name resolution", "cannot resolve the host name {host} (DNS)"),
    ("nodename nor servname", "cannot resolve the host name {host}"),
    ("no address associated", "cannot resolve the host name {host}"),
    ("no route to host", "no route to {host}"),
    ("network is unreachable", "network unreachable for {host}"),
    ("certificate verify failed", "TLS certificate of {where} not trusted"),
)


def network_reason(exc: BaseException, url: str, timeout: float | None = None) -> str:
    """A network failure in words naming the peer ("connection refused by 127.0.0.1:8080",
    "timed out after 30 s waiting for mirror:443"), never a Python class name."""
    parts = urls.split(url)
    host = (parts.host if parts else "") or url
    where = f"{host}:{parts.port or 80}" if parts else host
    text = str(exc)
    found = _ERRNO_TEXT.search(text)
    cause = found.group(1).strip() if found else ""
    low = text.lower()
    if "timed out" in low or "timeout" in low:
        return (f"timed out after {timeout:g} s waiting for {where}" if timeout
                else f"timed out waiting for {where}")
    for needle, words in _NET_WORDS:
        if needle in low:
            return words.format(where=where, host=host)
    return f"cannot connect to {where}" + (f": {cause}" if cause else "")
