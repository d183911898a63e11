"""What every persistence backend plans for one interface: the shared types and helpers of
`backends` (systemd .link, NetworkManager, sysctl.d) and `distro` (network-scripts,
ifupdown, udev rule), kept here so neither imports the other's backends."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, TypedDict

HEADER = "# written by hwmgr apply; `hwmgr revert` restores the previous state\n"


def under(root: str, logical: str) -> str:
    """`logical` inside the persist root (`/` → unchanged)."""
    return logical if root.rstrip("/") == "" else root.rstrip("/") + logical


class Conflict(TypedDict):
    """Another owner that sets an item differently (shown in the plan; refused unless
    `--override`)."""

    item: str
    interface: str | None  # None for a host sysctl
    file: str  # the file, or "NetworkManager connection CONN"
    key: str  # the key or property there
    value: object  # what it sets


@dataclass
class PersistPlan:
    """What one backend will do for one interface (or for the sysctls)."""

    backend: str  # systemd-link, networkmanager, network-scripts, ifupdown, udev-rule, sysctl.d
    target: str  # the file written, or "nmcli connection CONN"
    reason: str = ""  # why this backend was chosen for the interface
    # why the backend does not re-apply on device add (driver reload), if it does not: apply
    # then adds the udev rule for these items too
    not_on_add: str | None = None
    content: bytes | None = None  # the new file's bytes (file backends)
    properties: dict[str, str] = field(default_factory=dict)  # NM property -> value
    keys: dict[str, str] = field(default_factory=dict)  # item -> key written
    unpersisted: dict[str, str] = field(default_factory=dict)  # item -> why not
    conflicts: list[Conflict] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    connection: str | None = None


class Backend(Protocol):
    """A backend that persists an interface's items (`backends.choose_backend` picks one)."""

    @property
    def name(self) -> str: ...

    def plan(self, ifname: str, wanted: Mapping[str, object], override: bool
             ) -> PersistPlan: ...
