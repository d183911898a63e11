"""Undo an apply exactly: recorded values back, persistence files restored byte for byte."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hwmgr.compliance import apply as ap
from hwmgr.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_NOT_FOUND,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_PERMISSION,
)
from hwmgr.output import Outcome, printable
from hwmgr.transaction.state import StateDir
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "revert"
EXAMPLES = (
    Example("hwmgr revert --yes", "undo the newest apply not yet reverted"),
    Example("hwmgr revert --txn 17 --yes"),
)
EXIT_CODES = {
    EXIT_OK: "reverted",
    EXIT_FAILED: "failed (undone)",
    EXIT_NOT_FOUND: "no such apply",
    EXIT_NOTHING_TO_DO: "nothing to revert",
    EXIT_LOCKED: "another hwmgr holds the lock",
    EXIT_PERMISSION: "not root",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--txn", type=int, metavar="ID", help="the apply to undo (default: newest)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    host, config = ctx.host, ctx.config
    ui.require_root(host, "restores NIC settings, sysctls and their persistence files")
    state = StateDir(host, config.state_dir)
    try:
        params = ap.revert_params(state, args.txn)
    finally:
        state.close()
    ui.confirm(args, f"revert apply #{params['of']} ({len(params['items'])} setting(s), "
               f"{len(params['files'])} file(s))")
    res = ap.run_revert(host, params, config, command=f"hwmgr revert --txn {params['of']}",
                        wait=args.wait)
    data = {"of": params["of"], "items": params["items"],
            "files": [f["path"] for f in params["files"]], "transaction": res.as_dict()}
    stopped = ui.interrupted_line(res, f"revert of #{params['of']}")
    if stopped is not None:
        return Outcome(NAME, status="failed", data=data, errors=[stopped],
                       exit_code=EXIT_INTERRUPTED)

    def render(c: Console) -> None:
        c.print(printable(f"transaction #{res.id} revert of #{params['of']}: {res.state}"
                          + (f" ({res.error})" if res.error else "")), markup=False)
        for it in params["items"]:
            c.print(printable(f"  {it['interface'] or 'host'} {it['item']} → {_v(it['value'])}"),
                    markup=False)
        for f in params["files"]:
            c.print(printable(f"  {'restored' if f.get('existed') else 'removed'} {f['path']}"),
                    markup=False)

    return Outcome(NAME, status="ok" if res.ok else "failed", data=data,
                   errors=[] if res.ok else [res.error or "revert failed"],
                   exit_code=0 if res.ok else EXIT_FAILED, render=render)


def _v(value: object) -> object:
    """A recorded value as ethtool spells it (booleans are on/off)."""
    return ("on" if value else "off") if isinstance(value, bool) else value
