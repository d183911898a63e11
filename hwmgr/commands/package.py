"""Wrap a driver version as a noarch <driver>-dkms RPM (DKMS builds it on each target host)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from hwmgr.catalog.load import load_catalog
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
)
from hwmgr.lifecycle.package import DEFAULT_PACKAGER, build_dkms_rpm
from hwmgr.output import Outcome, printable
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "package"
NOTES = """\
The vendor SRPM is fetched and checked exactly as for 'hwmgr upgrade'; this host's DKMS state
is not touched. Installing the RPM runs dkms add/build/install for the running kernel."""
EXAMPLES = (
    Example("hwmgr package be2net --to 10.2.470.14",
            "writes ./be2net-dkms-10.2.470.14-1.noarch.rpm"),
    Example("hwmgr package be2net --to 10.2.470.14 --out /srv/repo --json"),
    Example("hwmgr package be2net --to 10.2.470.14 --offline --mirror /srv/hwmgr-mirror "
            "--keep-spec"),
)
EXIT_CODES = {
    EXIT_OK: "written",
    EXIT_FAILED: "build failed",
    EXIT_NOT_FOUND: "not found (driver, version, offline miss)",
    EXIT_BAD_INPUT: "bad input",
    EXIT_REFUSED: "refused (known-bad version, unverified source, checksum mismatch)",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("driver")
    p.add_argument("--to", metavar="VERSION", required=True, help="catalog version to wrap")
    p.add_argument("--out", metavar="DIR", default=".",
                   help="where to write the RPM (default: current directory)")
    p.add_argument("--offline", action="store_true", help="use only the cache or --mirror")
    p.add_argument("--mirror", metavar="DIR|URL",
                   help="a mirror of vendor packages: a directory, or an http(s) base URL "
                   "(default: the site config's mirror)")
    p.add_argument("--keep-spec", action="store_true",
                   help="also write the generated <driver>-dkms-<version>.spec to --out")
    p.add_argument("--packager", metavar="'NAME <EMAIL>'", default=None,
                   help="Packager tag and changelog author (default: hwmgr <root@localhost>)")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    # --mirror, else the site config's mirror: the one place the two meet
    settings = replace(ctx.config, mirror=ctx.config.mirror or ctx.site.mirror)
    progress = ui.ProgressUI()  # stderr: bars and spinners on a terminal, lines otherwise
    try:
        res = build_dkms_rpm(
            ctx.host, load_catalog(args.catalog, config=settings), args.driver, args.to,
            settings=settings, out_dir=args.out, keep_spec=args.keep_spec,
            packager=args.packager or DEFAULT_PACKAGER, ui=progress,
        )
    finally:
        progress.close()
    data = res.as_dict()

    def render(console: Console) -> None:
        from rich.markup import escape  # rich: only drawing needs it

        console.print(f"{res.path} ({res.size} bytes, sha256 {res.sha256})", markup=False,
                      soft_wrap=True)
        if res.spec_path:
            console.print(f"spec: {res.spec_path}", markup=False)
        for w in res.warnings:
            console.print(f"[yellow]warning:[/] {escape(printable(w))}")

    return Outcome(NAME, data=data, render=render)
