"""Capture this host (only what hwmgr reads, plus the command outputs it ran) as a snapshot."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hwmgr.output import Outcome

NAME = "snapshot"
HELP = "capture this host for offline analysis"
EXAMPLES = """\
examples:
  hwmgr snapshot /tmp/web01.tar.gz        a support bundle to attach to a ticket
  hwmgr snapshot /tmp/web01               the same as a directory
  hwmgr inventory --root /tmp/web01.tar.gz   analyse it anywhere
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", metavar="OUT", help="new directory, or a path ending in .tar.gz")


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    from hwmgr.host.snapshot import recording_host, write_snapshot
    from hwmgr.inventory.scan import collect, host_identity

    host, rec, runner = recording_host()
    hostname, kernel = host_identity(host)
    scan = collect(host, args.catalog, use_catalog=False)
    out = write_snapshot(Path(args.out), rec, runner, hostname=hostname, kernel=kernel)
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
            f"snapshot of {hostname} ({len(scan.devices)} PCI functions, {data['files']} files, "
            f"{data['commands']} commands) written to {out}",
            markup=False,
        ),
    )
