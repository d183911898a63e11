"""Restore a driver exactly as an earlier upgrade found it (previous vendor version or inbox)."""

from __future__ import annotations

import argparse
from typing import Any

from hwmgr.output import Outcome
from hwmgr.ui import lifecycle as ui

NAME = "rollback"
HELP = "restore a driver exactly as it was before"
EXAMPLES = """\
examples:
  hwmgr rollback be2net --yes                  undo the last upgrade
  hwmgr rollback be2net --to 4.1.307r --yes    back to a version an upgrade replaced
  hwmgr rollback be2net --to inbox --yes       back to the distribution's driver
exit codes: 0 restored (reboot to load), 1 failed (undone), 3 no such recorded version,
            4 nothing to roll back, 9 refused, 10 locked, 13 not root
"""


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("driver")
    p.add_argument("--to", metavar="VERSION|inbox", help="default: what the last upgrade replaced")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true",
                   help="proceed although files changed since the upgrade, or the driver "
                   "carries the default route/SSH session")


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    from hwmgr.lifecycle.plan import plan_rollback, run_plan

    host = ctx.host
    ui.require_root(host)
    settings = ctx.config
    plan = plan_rollback(host, args.driver, settings=settings, to=args.to, force=args.force)
    if plan.refusals:
        return ui.plan_outcome(NAME, plan)
    ui.confirm(args, f"roll {args.driver} back to {plan.to_version}")
    result = run_plan(host, plan, settings, command=f"hwmgr rollback {args.driver}",
                      wait=args.wait, ui=ui.ProgressUI())
    return ui.txn_outcome(NAME, plan, result)
