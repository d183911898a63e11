"""Finish or undo transactions a crash or power cut interrupted."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hwmgr.compliance.steps import REGISTRY as SETTINGS
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_LOCKED,
    EXIT_OK,
)
from hwmgr.lifecycle.plan import recover
from hwmgr.output import Outcome
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "recover"
EXAMPLES = (
    Example("hwmgr recover", "after a crash: leaves exactly the old or the new driver"),
    Example("hwmgr recover --json"),
)
EXIT_CODES = {
    EXIT_OK: "nothing open or all settled",
    EXIT_FAILED: "a transaction could not be settled",
    EXIT_BAD_INPUT: "a damaged journal (named, with how to recover)",
    EXIT_LOCKED: "another hwmgr holds the lock",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    ui.require_root(ctx.host, "completes or undoes an interrupted transaction on this host")
    results = recover(ctx.host, ctx.config.state_dir, wait=args.wait, extra=SETTINGS)
    data = [r.as_dict() for r in results]
    bad = [r for r in results if not r.closed]

    def render(c: Console) -> None:
        if not results:
            c.print("no interrupted transaction", markup=False)
        for r in results:
            c.print(f"transaction #{r.id} {r.kind} {r.target}: {r.state}"
                    + (f" ({r.error})" if r.error else ""), markup=False)

    return Outcome(NAME, status="failed" if bad else "ok", data=data,
                   errors=[f"transaction #{r.id} is still open: {r.error}" for r in bad],
                   exit_code=EXIT_FAILED if bad else 0, render=render)
