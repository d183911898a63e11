"""Upgrade a driver to a catalog version: fetch, unpack, DKMS build, back up, install, arm."""

from __future__ import annotations

import argparse
from typing import Any

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
from hwmgr.output import Outcome
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.verbhelp import Example

NAME = "upgrade"
HELP = "upgrade a driver (DKMS build, keeps the old .ko)"
EXAMPLES = (
    Example("hwmgr plan upgrade be2net --to 10.2.470.14", "look first"),
    Example("hwmgr upgrade be2net --to 10.2.470.14 --yes"),
    Example("hwmgr upgrade be2net --to 10.2.470.14 --kernel 2.6.32-279.el6.x86_64 --offline "
            "--mirror /srv/hwmgr-mirror --yes"),
)
EXIT_CODES = {
    EXIT_OK: "installed (reboot to load)",
    EXIT_FAILED: "failed and rolled back",
    EXIT_NOT_FOUND: "no such driver, version or kernel; an offline miss",
    EXIT_NOTHING_TO_DO: "already there",
    EXIT_BAD_INPUT: "a bad catalog, recipe or journal (named)",
    EXIT_REFUSED: "refused (nothing changed)",
    EXIT_LOCKED: "another hwmgr holds the lock",
    EXIT_PERMISSION: "not root",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("driver")
    p.add_argument("--to", metavar="VERSION", required=True, help="catalog version to install")
    p.add_argument("--kernel", action="append", metavar="KVER",
                   help="target kernel (repeatable; default: running + all with headers)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true",
                   help="proceed although the driver carries the default route/SSH session")
    p.add_argument("--offline", action="store_true", help="use only the cache or --mirror")
    p.add_argument("--mirror", metavar="DIR|URL",
                   help="internal mirror (directory or http(s) URL) tried before the vendor URL")


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    from hwmgr.catalog.load import load_catalog
    from hwmgr.lifecycle.plan import plan_upgrade, run_plan

    host = ctx.host
    ui.require_root(host)
    settings = ctx.config
    catalog = load_catalog(args.catalog, config=ctx.config)
    plan = plan_upgrade(host, catalog, args.driver, args.to,
                        settings=settings, kernels=args.kernel, force=args.force)
    if plan.refusals:
        return ui.plan_outcome(NAME, plan)
    ui.confirm(args, f"upgrade {args.driver} to {args.to}")
    before = measure_before(host, plan, settings, catalog)
    result = run_plan(host, plan, settings, command=f"hwmgr upgrade {args.driver} {args.to}",
                      wait=args.wait, ui=ui.ProgressUI())
    if before is not None and result.id is not None:
        from hwmgr.transaction.state import StateDir

        state = StateDir(host, settings.state_dir)
        with state.lock(command="hwmgr upgrade (results)", wait=30):
            state.journal().add_results(result.id, throughput_before=before)
    return ui.txn_outcome(NAME, plan, result)


def measure_before(host: Any, plan: Any, settings: Any, catalog: Any) -> dict | None:
    """With a throughput peer in the site config, measure the driver's link before anything
    changes, so `hwmgr history` shows before → after. Best effort: never blocks an upgrade."""
    from hwmgr.config import load_config
    from hwmgr.errors import HwmgrError
    from hwmgr.verify import throughput as tp

    cfg = load_config(host)
    ifaces = [i for d in plan.devices for i in d["interfaces"]]
    if not cfg.throughput_peer or not ifaces:
        return None
    opts = tp.Options(peer=cfg.throughput_peer, port=cfg.throughput_port,
                      duration=cfg.throughput_duration, bind_dev=cfg.bind_dev or ifaces[0],
                      floor_mbps=cfg.throughput_floor_mbps,
                      connect_timeout_ms=cfg.connect_timeout_ms)
    try:
        report = tp.check(host, opts, catalog=catalog, driver=plan.driver)
    except HwmgrError:
        return None  # e.g. the interface carries the SSH session: no measurement, no block
    return tp.record(host, settings.state_dir, report)
