"""Wrap a driver version as a noarch <driver>-dkms RPM (DKMS builds it on each target host),
or with --binary build it once for one kernel and ship the signed modules as a .deb or kmod
RPM plus a catalog layer pinning the package (docs/rollout.md, "Build once, ship binaries")."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hwmgr.catalog.load import load_catalog
from hwmgr.config import Config
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
    BadInputError,
)
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.binpkg import FORMATS, Packager, Staged, build_binary
from hwmgr.lifecycle.builds.debpkg import make_deb
from hwmgr.lifecycle.builds.kmodrpm import make_kmod_rpm
from hwmgr.lifecycle.builds.package import DEFAULT_PACKAGER, build_dkms_rpm
from hwmgr.output import Outcome, printable
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "package"
NOTES = """\
The vendor SRPM is fetched and checked exactly as for 'hwmgr upgrade'; this host's DKMS state
is not touched. Installing the RPM runs dkms add/build/install for the running kernel.
With --binary deb|rpm --kernel K the build runs here, in private DKMS trees against K's
headers, modules signed with --sign-key/--sign-cert (default HWMGR_SIGN_KEY/HWMGR_SIGN_CERT);
beside the package goes <package>.catalog.json, the layer 'hwmgr upgrade --package' trusts."""
EXAMPLES = (
    Example("hwmgr package be2net --to 10.2.470.14",
            "writes ./be2net-dkms-10.2.470.14-1.noarch.rpm"),
    Example("hwmgr package be2net --to 10.2.470.14 --out /srv/repo --json"),
    Example("hwmgr package be2net --to 10.2.470.14 --offline --mirror /srv/hwmgr-mirror "
            "--keep-spec"),
    Example("hwmgr package igb --version 5.18.7 --binary deb --kernel 6.1.0-56-amd64 "
            "--out /srv/debs --sign-key /etc/hwmgr/mok.key --sign-cert /etc/hwmgr/mok.der",
            "writes igb-modules-6.1.0-56-amd64_5.18.7-1_amd64.deb and its .catalog.json"),
)
EXIT_CODES = {
    EXIT_OK: "written",
    EXIT_FAILED: "build failed",
    EXIT_NOT_FOUND: "not found (driver, version, offline miss, --kernel headers)",
    EXIT_BAD_INPUT: "bad input",
    EXIT_REFUSED: "refused (known-bad version, unverified source, checksum mismatch)",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("driver")
    p.add_argument("--to", "--version", dest="to", metavar="VERSION", required=True,
                   help="catalog version to wrap")
    p.add_argument("--binary", choices=FORMATS, default=None,
                   help="build here for --kernel and ship the modules as a binary package")
    p.add_argument("--kernel", metavar="KVER",
                   help="with --binary: the kernel to build for (its headers must be installed)")
    p.add_argument("--sign-key", metavar="FILE",
                   help="with --binary: site module-signing key (default: HWMGR_SIGN_KEY)")
    p.add_argument("--sign-cert", metavar="FILE",
                   help="with --binary: its certificate, DER (default: HWMGR_SIGN_CERT)")
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
    if args.binary or args.kernel:
        return _binary(args, ctx.host, settings)
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


def _binary(args: argparse.Namespace, host: Host, settings: Config) -> Outcome:
    """--binary FMT --kernel K: build here, package the signed modules, write the layer."""
    if not (args.binary and args.kernel):
        raise BadInputError("--binary and --kernel go together (--binary deb|rpm --kernel KVER)")
    if args.keep_spec and args.binary != "rpm":
        raise BadInputError("--keep-spec applies to RPMs only")
    make: Packager
    if args.binary == "deb":
        make = make_deb
    else:
        def make(h: Host, staged: Staged, work: str, out: Path, packager: str) -> Path:
            return make_kmod_rpm(h, staged, work, out, packager, settings.specs_dir)
    progress = ui.ProgressUI()
    try:
        res = build_binary(
            host, load_catalog(args.catalog, config=settings), args.driver, args.to,
            fmt=args.binary, kernel=args.kernel, make=make, settings=settings,
            out_dir=args.out,
            sign_key=args.sign_key or settings.sign_key,
            sign_cert=args.sign_cert or settings.sign_cert,
            packager=args.packager or DEFAULT_PACKAGER, ui=progress)
    finally:
        progress.close()

    def render(console: Console) -> None:
        console.print(f"{res.path} ({res.size} bytes, sha256 {res.sha256}, "
                      f"{'signed' if res.signed else 'unsigned'})", markup=False,
                      soft_wrap=True)
        console.print(f"catalog layer: {res.layer}", markup=False, soft_wrap=True)

    return Outcome(NAME, data=res.as_dict(), render=render)
