"""Upgrade a driver to a catalog version: fetch, unpack, DKMS build, back up, install, arm."""

from __future__ import annotations

import argparse
from typing import Any

from hwmgr.catalog.load import Catalog, load_catalog
from hwmgr.config import SiteConfig, with_site
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_LOCKED,
    EXIT_NOT_FOUND,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_PERMISSION,
    EXIT_REFUSED,
    HwmgrError,
)
from hwmgr.host.seam import Host
from hwmgr.lifecycle.plan import Plan, plan_upgrade, run_plan
from hwmgr.output import Outcome
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example
from hwmgr.verify import throughput as tp

NAME = "upgrade"
EXAMPLES = (
    Example("hwmgr plan upgrade be2net --to 10.2.470.14", "look first"),
    Example("hwmgr upgrade be2net --to 10.2.470.14 --yes"),
    Example("hwmgr upgrade be2net --to 10.2.470.14 --kernel 2.6.32-279.el6.x86_64 --offline "
            "--mirror /srv/hwmgr-mirror --yes"),
    Example("hwmgr upgrade igb --to 5.18.7 --package "
            "igb-modules-6.1.0-56-amd64_5.18.7-1_amd64.deb --kernel 6.1.0-56-amd64 --yes",
            "no compiler: install the site's signed build"),
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
                   help="target kernel (repeatable; default: every kernel with headers, else the "
                   "running one)")
    p.add_argument("--package", metavar="FILE",
                   help="install this site-built binary package (hwmgr package --binary deb) "
                   "instead of building: its sha256 must be in the catalog's packages")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true",
                   help="proceed although the driver carries the default route/SSH session")
    p.add_argument("--offline", action="store_true", help="use only the cache or --mirror")
    p.add_argument("--mirror", metavar="DIR|URL",
                   help="internal mirror (directory or http(s) URL) tried before the vendor URL")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    host = ctx.host
    ui.require_root(host)
    site = ctx.site
    settings = with_site(ctx.config, site)  # the plan journals the result
    catalog = load_catalog(args.catalog, config=settings)
    plan = plan_upgrade(host, catalog, args.driver, args.to,
                        settings=settings, kernels=args.kernel, force=args.force,
                        package=args.package)
    if plan.refusals:
        return ui.plan_outcome(NAME, plan)
    ui.confirm(args, f"upgrade {args.driver} to {args.to}")
    before = measure_before(host, plan, settings.state_dir, site, catalog)
    result = run_plan(host, plan, settings.state_dir,
                      command=f"hwmgr upgrade {args.driver} {args.to}", wait=args.wait,
                      ui=ui.ProgressUI(),
                      results={"throughput_before": before} if before is not None else None)
    return ui.txn_outcome(NAME, plan, result)


def measure_before(host: Host, plan: Plan, state_dir: str, site: SiteConfig,
                   catalog: Catalog) -> dict[str, Any] | None:
    """With a throughput peer in the site config, measure the driver's link before anything
    changes, so `hwmgr history` shows before → after. Best effort: never blocks an upgrade."""
    ifaces = [i for d in plan.devices for i in d["interfaces"]]
    if not site.throughput_peer or not ifaces:
        return None
    opts = tp.Options(peer=site.throughput_peer, port=site.throughput_port,
                      duration=site.throughput_duration, bind_dev=site.bind_dev or ifaces[0],
                      floor_mbps=site.throughput_floor_mbps,
                      connect_timeout_ms=site.connect_timeout_ms)
    try:
        report = tp.check(host, opts, catalog=catalog, driver=plan.driver)
    except HwmgrError:
        return None  # e.g. the interface carries the SSH session: no measurement, no block
    return tp.record(host, state_dir, report)
