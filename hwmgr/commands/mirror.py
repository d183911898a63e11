"""Fill an internal mirror directory: `hwmgr mirror sync DIR` downloads on a connected machine,
`hwmgr mirror sync DIR --from FILE` places files the admin already has (no network)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from hwmgr.catalog.load import load_catalog
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
    BadInputError,
)
from hwmgr.lifecycle.source.mirror import sync, sync_from
from hwmgr.output import Outcome, printable
from hwmgr.ui.context import Context
from hwmgr.ui.lifecycle import ProgressUI
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "mirror"
NOTES = """\
Then serve DIR with any HTTP server and set "mirror" in /etc/hwmgr/hwmgr.json.
layout: DIR/sha256/<sha256>/<file name> (like hwmgr's cache) and DIR/index.json"""
EXAMPLES = (
    Example("hwmgr mirror sync /srv/hwmgr-mirror", "every verified catalog source"),
    Example("hwmgr mirror sync /srv/hwmgr-mirror --driver be2net --to 10.2.470.14"),
    Example("hwmgr mirror sync /srv/hwmgr-mirror --from be2net-10.2.470.14-1.src.rpm",
            "a file you have: no network"),
    Example("hwmgr mirror sync mirror --driver be2net",
            "no verified source: nothing written", EXIT_NOT_FOUND),
)
EXIT_CODES = {
    EXIT_OK: "synced",
    EXIT_FAILED: "a download failed",
    EXIT_NOT_FOUND: "nothing to sync / 404 / no such --from file",
    EXIT_BAD_INPUT: "DIR is not a directory; a bad catalog",
    EXIT_REFUSED: "refused (checksum mismatch; a --from file whose sha256 no catalog source "
                  "pins: nothing copied)",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = sub.add_parser("sync", help="download verified catalog sources into DIR",
                       description="Download every verified source into DIR (mirror layout); "
                                   "with --from, copy the files given instead (no network).")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("--driver", help="only this driver's sources")
    s.add_argument("--to", metavar="VERSION", help="only this version (with --driver)")
    s.add_argument("--from", dest="from_files", action="append", metavar="FILE", type=Path,
                   help="a vendor file you already have (repeatable): placed under the source "
                        "whose pinned sha256 it has; one that matches none is refused")
    s.add_argument("--catalog", action="append", metavar="FILE", default=argparse.SUPPRESS,
                   help="catalog file(s) to use instead of the bundled/installed ones")
    s.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print one JSON object (format 1)")  # also after DIR


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    dest = Path(args.dir)
    if dest.exists() and not dest.is_dir():
        raise BadInputError(f"{args.dir}: not a directory")
    catalog = load_catalog(getattr(args, "catalog", None), config=ctx.config)
    if args.from_files:
        data = sync_from(catalog, dest.resolve(), args.from_files, driver=args.driver,
                         version=args.to)
    else:
        progress = ProgressUI()  # stderr: a bar per file on a terminal, lines otherwise
        try:
            data = sync(catalog, dest.resolve(), driver=args.driver, version=args.to,
                        ui=progress)
        finally:
            progress.close()

    def render(c: Console) -> None:
        for f in data["files"]:
            c.print(f"{printable(f['driver'])} {printable(f['version'])}: {printable(f['path'])}"
                    f" ({f['size']} bytes, sha256 ok, {f['origin']})", markup=False,
                    soft_wrap=True)
        for s in data["skipped"]:
            c.print(f"skipped {printable(s['driver'])} {printable(s['version'])}: "
                    f"{printable(s['reason'])}", markup=False, soft_wrap=True)

    return Outcome(NAME, data=data, render=render)
