"""Print the POSIX sh collector that snapshots a host without Python (for old hosts)."""

from __future__ import annotations

import argparse
import re
import textwrap
from importlib import resources
from typing import Sequence

from hwmgr.catalog.load import load_catalog
from hwmgr.compliance.rules import needed_sysctls
from hwmgr.errors import EXIT_BAD_INPUT, EXIT_NOT_FOUND, EXIT_OK, HwmgrError
from hwmgr.host.capture import sysctls_to_record
from hwmgr.output import Outcome
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

NAME = "collect-script"
NOTES = """\
The script needs only sh, coreutils (or busybox), tar and gzip on the old host; it records
ethtool, modinfo, ip and lspci output when those exist, and writes a hwmgr snapshot
(.tar.gz) to its stdout. It reads only; nothing on the host is changed. It copies the sysctls
`hwmgr snapshot` copies plus every one the catalog in force names (site layers included:
give the ones you will check with, --catalog/--site-catalog); an archive checked later
against a catalog naming others says which ones it lacks."""
EXAMPLES = (
    Example("hwmgr collect-script > hwmgr-collect.sh"),
    Example("hwmgr collect-script | ssh old-host sh -s > old-host.tar.gz"),
    Example("hwmgr collect-script --site-catalog site.json > hwmgr-collect.sh",
            "also copy the sysctls a site layer judges"),
    Example("hwmgr inventory --root old-host.tar.gz"),
    Example("hwmgr collect-script --site-catalog nosuch.json", "a missing layer",
            EXIT_NOT_FOUND),
)
EXIT_CODES = {
    EXIT_OK: "printed",
    EXIT_NOT_FOUND: "a --catalog/--site-catalog file does not exist",
    EXIT_BAD_INPUT: "a bad --catalog/--site-catalog file (named)",
}
# the script's list of sysctl names, rewritten for the catalog in force
_BLOCK = re.compile(r'(?ms)^SYSCTLS="\n.*?^"\n')


def option_parents() -> list[argparse.ArgumentParser]:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true",
                   help="one JSON object with the script as data.script")
    p.add_argument("--catalog", action="append", metavar="FILE",
                   help="catalog file(s) to use instead of the bundled/installed ones")
    p.add_argument("--site-catalog", action="append", metavar="FILE",
                   help="a site layer over the catalog in force (repeatable)")
    p.add_argument("--debug", action="store_true", help="show tracebacks on internal errors")
    return [p]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The catalog options only: the script is the same for every host."""


def script_text(sysctls: Sequence[str] | None = None) -> str:
    """The collector as shipped in the package (hwmgr/fleet/collect.sh), copying `sysctls`
    (default: the fixed list the shipped file holds)."""
    text = resources.files("hwmgr.fleet").joinpath("collect.sh").read_text(encoding="utf-8")
    names = " ".join(sysctls_to_record(sysctls or ()))
    block = 'SYSCTLS="\n' + "\n".join(textwrap.wrap(names, 92, break_on_hyphens=False,
                                                  break_long_words=False)) + '\n"\n'
    return _BLOCK.sub(lambda _m: block, text, count=1)


def catalog_sysctls(args: argparse.Namespace, ctx: Context) -> list[str]:
    """Every sysctl the catalog in force reads. A catalog named on the command line must
    load; without one, a machine with no usable catalog gets the fixed list."""
    try:
        cat = load_catalog(args.catalog, config=ctx.config)
    except HwmgrError:
        if args.catalog or ctx.config.extra_layers:
            raise
        return []
    return needed_sysctls(cat.sysctl_rules(), cat.conditional_settings())


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    text = script_text(catalog_sysctls(args, ctx))
    return Outcome(command=NAME, data={"name": "hwmgr-collect.sh", "script": text},
                   render=lambda console: console.file.write(text))
