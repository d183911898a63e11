"""Print the POSIX sh collector that snapshots a host without Python (for old hosts)."""

from __future__ import annotations

import argparse
from importlib import resources
from typing import Any

from hwmgr.errors import (
    EXIT_OK,
)
from hwmgr.output import Outcome
from hwmgr.ui.verbhelp import Example

NAME = "collect-script"
HELP = "print the POSIX sh snapshot collector"
NOTES = """\
The script needs only sh, coreutils (or busybox), tar and gzip on the old host; it records
ethtool, modinfo, ip and lspci output when those exist, and writes a hwmgr snapshot
(.tar.gz) to its stdout. It reads only; nothing on the host is changed."""
EXAMPLES = (
    Example("hwmgr collect-script > hwmgr-collect.sh"),
    Example("hwmgr collect-script | ssh old-host sh -s > old-host.tar.gz"),
    Example("hwmgr inventory --root old-host.tar.gz"),
)
EXIT_CODES = {EXIT_OK: "printed"}


def option_parents() -> list[argparse.ArgumentParser]:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true",
                   help="one JSON object with the script as data.script")
    p.add_argument("--debug", action="store_true", help="show tracebacks on internal errors")
    return [p]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """No options besides --json: the script is the same for every host."""


def script_text() -> str:
    """The collector as shipped in the package (hwmgr/fleet/collect.sh)."""
    return resources.files("hwmgr.fleet").joinpath("collect.sh").read_text(encoding="utf-8")


def run(args: argparse.Namespace, ctx: Any) -> Outcome:
    text = script_text()
    return Outcome(command=NAME, data={"name": "hwmgr-collect.sh", "script": text},
                   render=lambda console: console.file.write(text))
