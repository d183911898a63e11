"""The value vocabulary shared by every compliance reader: a value, or why there is none."""

from __future__ import annotations

from enum import Enum
from typing import Union


class Status(Enum):
    """Why an item (or a whole ethtool sub-command) has no value, or OK when it has one."""

    OK = "ok"
    UNSUPPORTED = "unsupported"  # the device or kernel said it cannot do this
    UNKNOWN = "unknown"  # nothing usable was read (missing line, tool, file or device)


# Item name prefixes of the findings a verdict's known issues and firmware floors give
# (`known_issue.CVE-2024-26934`, `firmware_min.ice-1.4.0-fw-2.40`)
KNOWN_ISSUE = "known_issue."
FIRMWARE_MIN = "firmware_min."
# ... and of a known-bad kernel log line (`kernel_log.e1000e-hardware-unit-hang`)
KERNEL_LOG = "kernel_log."

# What a canonical item maps to: a setting's value, or the Status saying why there is none.
ItemValue = Union[int, bool, str, list[int], Status]


def jsonable(value: ItemValue) -> int | bool | str | list[int]:
    """An item value as JSON can carry it (a Status becomes its name)."""
    return value.value if isinstance(value, Status) else value
