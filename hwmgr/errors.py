"""One error hierarchy for hwmgr; each error carries the exit code the CLI returns.

Only `cli.py` prints errors or exits; everything else raises these.
"""

from __future__ import annotations

# Exit codes (documented in README.md). Keep in sync with the README table.
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
EXIT_PERMISSION = 13
EXIT_INTERNAL = 70


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
