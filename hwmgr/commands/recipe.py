"""Test a driver's build recipe on a vendor SRPM or tarball before installing anything, or list
recipes."""

from __future__ import annotations

import argparse

from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_PERMISSION,
    EXIT_REFUSED,
)
from hwmgr.lifecycle.builds.recipe import list_recipes, load_recipe
from hwmgr.lifecycle.builds.recipecheck import check_recipe
from hwmgr.output import Outcome
from hwmgr.ui import recipe_view
from hwmgr.ui.context import Context
from hwmgr.ui.options import common_options
from hwmgr.ui.verbhelp import Example

NAME = "recipe"
NOTES = """\
check: the SRPM or vendor tarball is unpacked as 'hwmgr upgrade' does (a tarball's name
       gives the version), then built with DKMS for each kernel
       (--kernel, default every kernel with headers) in scratch trees under the state dir:
       /usr/src, /var/lib/dkms and /lib/modules are not touched. A failed build's make.log
       is kept in <state dir>/logs/. Writing a recipe: docs/recipes.md."""
EXAMPLES = (
    Example("hwmgr recipe list", "the recipes found, and the dir each comes from"),
    Example("hwmgr recipe check igb --file igb-5.9.3-1.src.rpm",
            "build for every kernel with headers; modules, vermagic, version"),
    Example("hwmgr recipe check igb --file igb-5.9.3-1.src.rpm --kernel 6.1.0-56-amd64 --json",
            "one kernel, installed but not running"),
    Example("hwmgr recipe check nosuch --file x.src.rpm", "no recipe for that driver",
            EXIT_NOT_FOUND),
)
EXIT_CODES = {
    EXIT_OK: "built for every target kernel, each module at the source's version and kernel",
    EXIT_FAILED: "a build failed (the make line, its first error and the log's end are shown; "
                 "the log is kept) or a module reports another version or kernel",
    EXIT_NOT_FOUND: "no recipe for the driver, no such SRPM or tarball, or no kernel headers",
    EXIT_BAD_INPUT: "invalid recipe, unreadable SRPM or tarball, or bad --version/--kernel",
    EXIT_REFUSED: "the SRPM is not the recipe's package, a tarball is not named like the "
                  "recipe's, or a tarball is unsafe or fails its MANIFEST",
    EXIT_PERMISSION: "the state dir is not writable for the scratch trees (run as root or "
                     "pass --state-dir)",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return [common_options()]


def _sub_options() -> argparse.ArgumentParser:
    """--json/--debug again after the action, without resetting values given before it."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print one JSON object (format 1)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show tracebacks on internal errors")
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Sub-commands: check DRIVER --file SRPM, list."""
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    c = sub.add_parser("check", parents=[_sub_options()],
                       help="build an SRPM or vendor tarball with the driver's recipe in a "
                            "scratch DKMS tree",
                       description="Build a vendor SRPM or tarball with DRIVER's recipe for "
                                   "each target kernel in scratch DKMS trees and report the "
                                   "modules built, "
                                   "or the failing make line and the end of make.log.")
    c.add_argument("driver", metavar="DRIVER")
    c.add_argument("--file", required=True, metavar="FILE",
                   help="the vendor source RPM, or the vendor's tarball (.tar.gz/.tgz/.tar.xz)")
    c.add_argument("--kernel", action="append", metavar="KVER",
                   help="target kernel (repeatable; default: every kernel with headers)")
    c.add_argument("--version", metavar="V",
                   help="the driver version (default: the SRPM's Version, or the version in the "
                        "tarball's name); need not be in any catalog")
    c.add_argument("--state-dir", metavar="DIR",
                   help="scratch trees and kept logs (default $HWMGR_STATE_DIR or the "
                        "configured state dir)")
    sub.add_parser("list", parents=[_sub_options()], help="the recipes found, in search order",
                   description="List the recipes hwmgr finds ($HWMGR_DRIVERS_DIR first, then "
                               "the shipped ones) and the dir each comes from.")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    """Dispatch to check or list."""
    if args.action == "list":
        rows = list_recipes(ctx.config.drivers_dir)
        return Outcome(NAME, data={"recipes": rows},
                       render=lambda c: recipe_view.render_list(c, rows))
    recipe = load_recipe(args.driver, ctx.config.drivers_dir)
    report = check_recipe(ctx.host, recipe, args.file,
                          state_dir=ctx.config.state_dir,
                          kernels=args.kernel, version=args.version,
                          build_timeout=ctx.site.build_timeout_seconds)
    data = report.as_dict()
    errors = [p for k in report.kernels for p in k.problems]
    return Outcome(NAME, status="ok" if report.ok else "failed", data=data, errors=errors,
                   exit_code=EXIT_OK if report.ok else EXIT_FAILED,
                   render=lambda c: recipe_view.render_check(c, data))
