"""Dry run: every step of an upgrade or rollback, what is kept, and why it would refuse."""

from __future__ import annotations

import argparse

from hwmgr.catalog.load import load_catalog
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_NOT_FOUND,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNKNOWN,
    UsageError,
)
from hwmgr.lifecycle.plan import plan_rollback, plan_upgrade
from hwmgr.output import Outcome
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

NAME = "plan"
EXAMPLES = (
    Example("hwmgr plan upgrade be2net --to 10.2.470.14",
            "every step, and why it would be refused", EXIT_REFUSED),
    Example("hwmgr plan upgrade e1000e --to 3.8.7-lab --kernel 6.1.0-56-amd64 --json"),
    Example("hwmgr plan upgrade be2net --to 9.9", "a version the catalog lacks",
            EXIT_NOT_FOUND),
    Example("hwmgr plan rollback be2net", "back to what the last upgrade replaced"),
    Example("hwmgr plan rollback be2net --to inbox"),
)
EXIT_CODES = {
    EXIT_OK: "the plan would run",
    EXIT_NOT_FOUND: "no such driver, version, kernel, recorded version or --root/--catalog "
                    "file",
    EXIT_NOTHING_TO_DO: "nothing to do (already there, nothing to roll back)",
    EXIT_BAD_INPUT: "a bad snapshot, catalog, recipe or journal (named)",
    EXIT_REFUSED: "it would be refused (reasons listed)",
    EXIT_UNKNOWN: "a snapshot lacks an output the plan needs",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=False, root=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["upgrade", "rollback"])
    p.add_argument("driver")
    p.add_argument("--to", metavar="VERSION", help="target version (rollback: VERSION|inbox)")
    p.add_argument("--kernel", action="append", metavar="KVER",
                   help="target kernel (repeatable; default: every kernel with headers, else the "
                   "running one)")
    p.add_argument("--package", metavar="FILE",
                   help="upgrade: install this site-built binary package instead of building "
                   "(its sha256 must be in the catalog's packages)")
    p.add_argument("--force", action="store_true", help="downgrade refusals to warnings "
                   "where that is safe (route/SSH interface, deprecated version)")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    settings = ctx.config
    if args.action == "upgrade":
        if not args.to:
            raise UsageError("plan upgrade needs --to VERSION")
        catalog = load_catalog(args.catalog, config=ctx.config)
        plan = plan_upgrade(ctx.host, catalog, args.driver, args.to,
                            settings=settings, kernels=args.kernel, force=args.force,
                            package=args.package)
    else:
        if args.package:
            raise UsageError("--package applies to plan upgrade only")
        plan = plan_rollback(ctx.host, args.driver, settings=settings, to=args.to,
                             force=args.force)
    return ui.plan_outcome(NAME, plan)
