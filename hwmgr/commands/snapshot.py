"""Capture this host (only what hwmgr reads, plus the command outputs it ran) as a snapshot."""

from __future__ import annotations

import argparse
from pathlib import Path

from hwmgr.catalog.load import load_catalog
from hwmgr.compliance.history import CHECKS_FILE
from hwmgr.compliance.rules import needed_sysctls
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    HwmgrError,
    LockedError,
    NotFoundError,
    NotPermittedError,
    UsageError,
)
from hwmgr.host.capture import STATE, sysctls_to_record
from hwmgr.host.seam import Host
from hwmgr.host.snapshot import recording_host, write_snapshot
from hwmgr.inventory.guard import other_netns
from hwmgr.inventory.scan import collect, host_identity, kernel_facts
from hwmgr.lifecycle.bundle import record_all
from hwmgr.output import Outcome, printable
from hwmgr.transaction.state import StateDir
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

NAME = "snapshot"
EXAMPLES = (
    Example("hwmgr snapshot /tmp/web01.tar.gz", "a support bundle to attach to a ticket"),
    Example("hwmgr snapshot /tmp/web01", "the same as a directory"),
    Example("hwmgr inventory --root /tmp/web01.tar.gz", "analyse it anywhere"),
    Example("hwmgr snapshot --site-catalog site.json /tmp/web01.tar.gz",
            "also record every sysctl the site layer judges"),
    Example("hwmgr snapshot nosuch/web01.tar.gz", "the parent directory is not created",
            EXIT_NOT_FOUND),
)
EXIT_CODES = {
    EXIT_OK: "written",
    EXIT_USAGE: "OUT already exists, its parent is not a directory, or its name promises "
                "another archive format (.zip, .tar.xz ...)",
    EXIT_NOT_FOUND: "OUT's parent directory, or a --catalog/--site-catalog file, does not exist "
                    "(the directory is not created)",
    EXIT_BAD_INPUT: "a bad --catalog/--site-catalog file (named)",
}

# names that promise an archive hwmgr does not write (it would be a directory of that name)
OTHER_ARCHIVES = (".zip", ".tar", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst", ".7z",
                  ".gz", ".xz", ".bz2", ".zst", ".rar")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", metavar="OUT",
                   help="new directory, or a path ending in .tar.gz or .tgz (other archive "
                        "names are refused)")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    check_out(Path(args.out))
    sysctls, notes = catalog_sysctls(args, ctx)
    host, rec, runner = recording_host()
    hostname, kernel = host_identity(host)
    scan = collect(host, args.catalog, use_catalog=False)
    kernel_facts(host)  # which kernel build: a verdict on the snapshot reads these (recorded)
    # what plan/verify/check read beyond the inventory, with the catalog's sysctls
    records = record_all(host, [d.to_json() for d in scan.devices], ctx.config.drivers_dir,
                         sysctls)
    why_not = copy_state(host, ctx.host, ctx.config.state_dir)
    if why_not is None:
        records.append(STATE)
    else:
        notes.append(f"{why_not}; history and verify --root will refuse this snapshot")
    out = write_snapshot(Path(args.out), rec, runner, hostname=hostname, kernel=kernel,
                         records=records, sysctls=sysctls, netns=other_netns(host))
    data: dict[str, object] = {
        "path": str(out),
        "hostname": hostname,
        "kernel": kernel,
        "devices": len(scan.devices),
        "files": len(rec.files),
        "commands": len({c.argv for c in runner.calls if c.rc != 127}),
        "sysctls": len(sysctls),
    }
    if notes:
        data["notes"] = notes
    return Outcome(
        command=NAME,
        data=data,
        render=lambda c: c.print(
            f"snapshot of {printable(hostname)} ({len(scan.devices)} PCI functions, "
            f"{data['files']} files, {data['commands']} commands) written to {printable(out)}"
            + "".join(f"\nnote: {printable(n)}" for n in notes),
            markup=False,
        ),
    )


# a state file bigger than this is not copied (a truncated SQLite file would be garbage)
STATE_LIMIT = 256 << 20


def copy_state(host: Host, live: Host, state_dir: str) -> str | None:
    """Copy the state dir (`record_state`) under the host lock, taken without waiting on the
    `live` host, so no transaction writes the journal while its bytes are read (a copy taken
    mid-commit would be a torn SQLite file). None when copied whole; else why not (a lock
    held by another hwmgr, named; no right to take it; a file too big)."""
    if not live.exists(state_dir):
        return None  # no state dir: nothing to copy, and a snapshot creates none
    try:
        with StateDir(live, state_dir).lock("snapshot"):
            whole = record_state(host, state_dir)
    except LockedError as exc:  # a transaction is running: its journal is being written
        return (f"{exc.message}: its journal, check history and expectations were not copied "
                "(take the snapshot again when it is done)")
    except NotPermittedError as exc:
        return f"{exc.message}: the state dir was not copied"
    if not whole:
        return f"state dir {state_dir}: a file over {STATE_LIMIT >> 20} MiB not copied"
    return None


def record_state(host: Host, state_dir: str) -> bool:
    """Copy what `history --root` and `verify --root` read, through the recording `host`: the
    journal, the check history and the armed expectations (none of them is an error: an
    empty history). False when a file was too big to copy whole."""
    state = StateDir(host, state_dir)
    whole = True
    for name in (state.journal_file.name, CHECKS_FILE):
        logical = f"{state.path}/{name}"
        data = host.read_bytes(logical, limit=STATE_LIMIT + 1)
        if data is not None and len(data) > STATE_LIMIT and host.recorder is not None:
            del host.recorder.files[logical]
            whole = False
    for name in host.listdir(state.expectations, lambda n: n.endswith(".json")):
        host.read_bytes(f"{state.expectations}/{name}")
    return whole


def catalog_sysctls(args: argparse.Namespace, ctx: Context) -> tuple[list[str], list[str]]:
    """The sysctls to copy: the fixed list and every one the catalog in force reads (rules
    and conditions, site layers included), so `check --root` judges what `check` does. A
    catalog named on the command line must load; the machine's own one may be missing or
    broken without stopping a support snapshot (a note says so)."""
    try:
        cat = load_catalog(args.catalog, config=ctx.config)
    except HwmgrError as exc:
        if args.catalog or ctx.config.extra_layers:
            raise
        return sysctls_to_record(), [f"only the fixed sysctl list recorded: {exc.message}"]
    return sysctls_to_record(needed_sysctls(cat.sysctl_rules(),
                                            cat.conditional_settings())), []


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
