"""Capture this host (only what hwmgr reads, plus the command outputs it ran) as a snapshot."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hwmgr.errors import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    NotFoundError,
    UsageError,
)
from hwmgr.host.snapshot import recording_host, write_snapshot
from hwmgr.inventory.scan import collect, host_identity
from hwmgr.lifecycle.bundle import record_all
from hwmgr.output import Outcome, printable
from hwmgr.ui.verbhelp import Example

NAME = "snapshot"
HELP = "capture this host for offline analysis"
EXAMPLES = (
    Example("hwmgr snapshot /tmp/web01.tar.gz", "a support bundle to attach to a ticket"),
    Example("hwmgr snapshot /tmp/web01", "the same as a directory"),
    Example("hwmgr inventory --root /tmp/web01.tar.gz", "analyse it anywhere"),
    Example("hwmgr snapshot nosuch/web01.tar.gz", "the parent directory is not created",
            EXIT_NOT_FOUND),
)
EXIT_CODES = {
    EXIT_OK: "written",
    EXIT_USAGE: "OUT already exists, its parent is not a directory, or its name promises "
                "another archive format (.zip, .tar.xz ...)",
    EXIT_NOT_FOUND: "OUT's parent directory does not exist (it is not created)",
}

# names that promise an archive hwmgr does not write (it would be a directory of that name)
OTHER_ARCHIVES = (".zip", ".tar", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst", ".7z",
                  ".gz", ".xz", ".bz2", ".zst", ".rar")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", metavar="OUT",
                   help="new directory, or a path ending in .tar.gz or .tgz (other archive "
                        "names are refused)")


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    check_out(Path(args.out))
    host, rec, runner = recording_host()
    hostname, kernel = host_identity(host)
    scan = collect(host, args.catalog, use_catalog=False)
    records = record_all(host, scan.devices)  # what plan/verify/check read beyond the inventory
    out = write_snapshot(Path(args.out), rec, runner, hostname=hostname, kernel=kernel,
                         records=records)
    data = {
        "path": str(out),
        "hostname": hostname,
        "kernel": kernel,
        "devices": len(scan.devices),
        "files": len(rec.files),
        "commands": len({c.argv for c in runner.calls if c.rc != 127}),
    }
    return Outcome(
        command=NAME,
        data=data,
        render=lambda c: c.print(
            f"snapshot of {printable(hostname)} ({len(scan.devices)} PCI functions, "
            f"{data['files']} files, {data['commands']} commands) written to {printable(out)}",
            markup=False,
        ),
    )


def check_out(out: Path) -> None:
    """Refuse a bad OUT before capturing anything: its parent must be an existing directory
    (never created silently) and OUT itself new (a directory OUT may exist empty)."""
    parent = out.absolute().parent
    if not parent.is_dir():
        if parent.exists() or parent.is_symlink():
            raise UsageError(f"{printable(out)}: {printable(parent)} is not a directory")
        raise NotFoundError(f"{printable(out)}: directory {printable(parent)} does not exist "
                            "(create it first)")
    is_tar = out.name.endswith((".tar.gz", ".tgz"))
    if not is_tar and out.name.lower().endswith(OTHER_ARCHIVES):
        raise UsageError(f"{printable(out)}: hwmgr writes a directory or a .tar.gz (.tgz) "
                         "snapshot, not this archive format; name OUT accordingly")
    if out.is_symlink() or (out.exists() and (is_tar or not out.is_dir())):
        raise UsageError(f"{printable(out)}: already exists; choose a new path")
    try:
        used = out.is_dir() and any(out.iterdir())
    except OSError as exc:
        raise UsageError(f"{printable(out)}: cannot use ({exc.strerror})") from None
    if used:
        raise UsageError(f"{printable(out)}: already exists; choose a new path")
