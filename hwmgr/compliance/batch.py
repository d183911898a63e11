"""Many snapshots checked in one process: `hwmgr check --root A --root B …` / `--roots-from`.

A fleet run checks every snapshot host on the control node; one process loads the catalog
once and keeps each host's own outcome (status, exit code, error, duration), so a snapshot
that cannot be opened is that host's failure, never the batch's. The entries are the
fleet-report input format (`{status, check, error}`), keyed by host name.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping, TypedDict

from hwmgr import safejson
from hwmgr.errors import (
    EXIT_DRIFT,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_REBOOT_PENDING,
    EXIT_UNKNOWN,
    BadInputError,
    HwmgrError,
    UsageError,
)
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.host.snapshot import open_host
from hwmgr.output import printable

MAX_MANIFEST_BYTES = 64 << 20
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
# a check's exit code -> the host status of the fleet-report input format
HOST_STATUS = {EXIT_OK: "compliant", EXIT_DRIFT: "drift", EXIT_REBOOT_PENDING: "reboot-pending",
               EXIT_UNKNOWN: "unknown"}

# a snapshot's Host -> (check data, exit code): the verb's one-host check, handed in
CheckOne = Callable[[Host], "tuple[dict[str, Any], int]"]


class _HostResult(TypedDict):
    status: str  # one of HOST_STATUS' values, or failed (not checked: `error` says why)
    rc: int | None
    check: dict[str, Any] | None  # the host's `check --json` data
    error: str | None
    root: str


class HostResult(_HostResult, total=False):
    """One snapshot of the batch: its status, exit code, check data or error, and time."""

    duration_seconds: float


def name_of(root: str) -> str:
    """A host name for a bare `--root`: the snapshot's file or directory name, no suffix."""
    base = os.path.basename(os.path.normpath(root))
    for suffix in ARCHIVE_SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base


def read_manifest(path: str) -> dict[str, str]:
    """`--roots-from FILE`: a JSON object {host: snapshot} or lines `HOST SNAPSHOT` (# comments).

    Relative snapshot paths are relative to the manifest's directory."""
    shown = printable(path)
    raw = Host("/", SubprocessRunner()).read_bytes(os.path.abspath(path),
                                                   limit=MAX_MANIFEST_BYTES + 1)
    if raw is None:
        raise UsageError(f"{shown}: cannot read the --roots-from manifest")
    if len(raw) > MAX_MANIFEST_BYTES:
        raise BadInputError(f"{shown}: larger than {MAX_MANIFEST_BYTES >> 20} MiB")
    pairs: list[tuple[str, object]] = []
    if raw.lstrip()[:1] == b"{":
        doc = safejson.load(raw, shown)
        pairs = list(doc.items())
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInputError(f"{shown}: not UTF-8 text") from None
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            if len(parts) != 2:
                raise BadInputError(f"{shown}:{n}: expected 'HOST SNAPSHOT'")
            pairs.append((parts[0], parts[1].strip()))
    base = os.path.dirname(os.path.abspath(path))
    out: dict[str, str] = {}
    for name, root in pairs:
        if not isinstance(root, str) or not root or not name:
            raise BadInputError(f"{shown}: {printable(str(name))}: expected a snapshot path")
        if name in out:
            raise BadInputError(f"{shown}: host {printable(name)} is listed twice")
        out[name] = os.path.join(base, root)
    if not out:
        raise BadInputError(f"{shown}: lists no host")
    return out


def roots_named(roots: list[str], manifest: str | None) -> dict[str, str]:
    """Host name -> snapshot for the whole batch; a name given twice is a usage error."""
    named = read_manifest(manifest) if manifest else {}
    for root in roots:
        name = name_of(root)
        if name in named:
            raise UsageError(f"{printable(root)}: host {printable(name)} is named twice in "
                             "the batch (rename the snapshot or use --roots-from)")
        named[name] = root
    return named


def check_roots(named: dict[str, str], check_one: CheckOne) -> dict[str, HostResult]:
    """Every snapshot checked in turn: {host: {status, rc, check, error, root, duration}}."""
    out: dict[str, HostResult] = {}
    for name, root in named.items():
        t0 = time.monotonic()
        entry: HostResult = {"status": "failed", "rc": None, "check": None, "error": None,
                             "root": root}
        cleanup = None
        try:
            host, cleanup = open_host(root)
            data, code = check_one(host)
            entry["status"], entry["rc"], entry["check"] = HOST_STATUS[code], code, data
        except HwmgrError as exc:
            entry["rc"], entry["error"] = exc.exit_code, exc.message
        finally:
            if cleanup is not None:
                cleanup()
        entry["duration_seconds"] = round(time.monotonic() - t0, 3)
        out[name] = entry
    return out


def batch_exit_code(hosts: Mapping[str, HostResult]) -> int:
    """The fleet's order: drift 5, then a host not checked 6, reboot pending 7, unknown 11."""
    statuses = {h["status"] for h in hosts.values()}
    for status, code in (("drift", EXIT_DRIFT), ("failed", EXIT_PARTIAL),
                         ("reboot-pending", EXIT_REBOOT_PENDING), ("unknown", EXIT_UNKNOWN)):
        if status in statuses:
            return code
    return EXIT_OK
