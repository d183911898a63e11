"""Restore a driver exactly as an earlier upgrade found it (previous vendor version or inbox)."""

from __future__ import annotations

import argparse

from hwmgr.config import with_site
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_LOCKED,
    EXIT_NOT_FOUND,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_PERMISSION,
    EXIT_REFUSED,
)
from hwmgr.lifecycle.plan import plan_rollback, run_plan
from hwmgr.output import Outcome
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

NAME = "rollback"
EXAMPLES = (
    Example("hwmgr rollback be2net --yes", "undo the last upgrade"),
    Example("hwmgr rollback be2net --to 4.1.307r --yes", "back to a version an upgrade replaced"),
    Example("hwmgr rollback be2net --to inbox --yes", "back to the distribution's driver"),
)
EXIT_CODES = {
    EXIT_OK: "restored (reboot to load)",
    EXIT_FAILED: "failed (undone)",
    EXIT_NOT_FOUND: "no such recorded version",
    EXIT_NOTHING_TO_DO: "nothing to roll back",
    EXIT_BAD_INPUT: "a bad journal (named)",
    EXIT_REFUSED: "refused (nothing changed)",
    EXIT_LOCKED: "another hwmgr holds the lock",
    EXIT_PERMISSION: "not root",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("driver")
    p.add_argument("--to", metavar="VERSION|inbox", help="default: what the last upgrade replaced")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true",
                   help="proceed although files changed since the upgrade, or the driver "
                   "carries the default route/SSH session")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    host = ctx.host
    ui.require_root(host)
    settings = with_site(ctx.config, ctx.site)  # a reinstall may build
    plan = plan_rollback(host, args.driver, settings=settings, to=args.to, force=args.force)
    if plan.refusals:
        return ui.plan_outcome(NAME, plan)
    ui.confirm(args, f"roll {args.driver} back to {plan.to_version}")
    result = run_plan(host, plan, settings.state_dir,
                      command=f"hwmgr rollback {args.driver}", wait=args.wait,
                      ui=ui.ProgressUI())
    return ui.txn_outcome(NAME, plan, result)
