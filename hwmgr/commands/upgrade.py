"""Upgrade a driver to a catalog version: fetch, unpack, DKMS build, back up, install, arm."""

from __future__ import annotations

import argparse
from typing import Any

from hwmgr.commands import lifeview
from hwmgr.output import Outcome

NAME = "upgrade"
HELP = "upgrade a driver (DKMS build, keeps the old .ko)"
EXAMPLES = """\
examples:
  hwmgr plan upgrade be2net --to 10.2.470.14      look first
  hwmgr upgrade be2net --to 10.2.470.14 --yes
  hwmgr upgrade be2net --to 10.2.470.14 --kernel 2.6.32-279.el6.x86_64 --offline \\
        --mirror /srv/hwmgr-mirror --yes
exit codes: 0 installed (reboot to load), 1 failed and rolled back, 4 already there,
            9 refused (nothing changed), 10 another hwmgr holds the lock, 13 not root
"""


def PARENTS() -> list[argparse.ArgumentParser]:
    return lifeview.parents(mutating=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("driver")
    p.add_argument("--to", metavar="VERSION", required=True, help="catalog version to install")
    p.add_argument("--kernel", action="append", metavar="KVER",
                   help="target kernel (repeatable; default: running + all with headers)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true",
                   help="proceed although the driver carries the default route/SSH session")
    p.add_argument("--offline", action="store_true", help="use only the cache or --mirror")
    p.add_argument("--mirror", metavar="DIR", help="directory holding vendor packages by name")


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    from hwmgr.catalog import load_catalog
    from hwmgr.lifecycle import plan_upgrade, run_plan, settings_from

    host = ctx.host
    lifeview.require_root(host)
    settings = settings_from(args)
    plan = plan_upgrade(host, load_catalog(args.catalog), args.driver, args.to,
                        settings=settings, kernels=args.kernel, force=args.force)
    if plan.refusals:
        return lifeview.plan_outcome(NAME, plan)
    lifeview.confirm(args, f"upgrade {args.driver} to {args.to}")
    result = run_plan(host, plan, settings, command=f"hwmgr upgrade {args.driver} {args.to}",
                      wait=args.wait, ui=lifeview.ProgressUI())
    return lifeview.txn_outcome(NAME, plan, result)
