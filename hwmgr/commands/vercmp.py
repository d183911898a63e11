"""Compare two versions under a version scheme and print <, = or >."""

from __future__ import annotations

import argparse

from hwmgr.catalog.versions import SCHEMES, compare
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
)
from hwmgr.output import Outcome
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

NAME = "vercmp"
NOTES = """\
schemes:
  rpm       [epoch:]version[-release], like rpmdev-vercmp (default)
  driver    what ethtool -i / modinfo report: 5.1.0-k-rh7.6, 4.1.307r, 6.1.0-56-amd64
  firmware  ethtool firmware-version: 'bc 5.2.3 NCSI 2.0.12', '6.00 0x800036cb 1.1747.0'

Versions from different schemes (a kernel release vs a vendor driver version, firmware
strings of different shapes) are refused with exit code 8, never guessed."""
EXAMPLES = (
    Example("hwmgr vercmp 1.0~rc1 1.0", "prints <"),
    Example("hwmgr vercmp 1:1.0-1 2.0-1", "prints > (epoch wins)"),
    Example("hwmgr vercmp --scheme driver 4.1.307r 10.2.470.14", "prints <"),
    Example("hwmgr vercmp --scheme driver 5.1.0-k-rh7.6 5.1.0-k", "prints = (same base)"),
    Example("hwmgr vercmp --json --scheme firmware 2.1-0 2.1-1"),
    Example("hwmgr vercmp --scheme driver 6.1.0-56-amd64 10.2.470.14",
            "a kernel release vs a driver version", EXIT_BAD_INPUT),
)
EXIT_CODES = {
    EXIT_OK: "compared (the result is printed, not the exit code)",
    EXIT_BAD_INPUT: "versions that cannot be compared (unparseable, different schemes)",
}

SYMBOLS = {-1: "<", 0: "=", 1: ">"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Two version strings, the scheme and (for drivers) the running kernel release."""
    p.add_argument("a", metavar="A", help="first version")
    p.add_argument("b", metavar="B", help="second version")
    p.add_argument(
        "--scheme",
        default="rpm",
        choices=sorted(SCHEMES),  # an unknown scheme is a usage error (exit 2)
        metavar="SCHEME",
        help="version scheme: rpm (default), driver or firmware",
    )
    p.add_argument(
        "--kernel",
        metavar="RELEASE",
        help="driver scheme: the running kernel release, to recognise drivers reporting it",
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    """Compare A with B; a `VersionError` (exit 8) propagates to the CLI as one line."""
    rc = compare(args.a, args.b, args.scheme, kernel=args.kernel)
    symbol = SYMBOLS[rc]
    data = {"a": args.a, "b": args.b, "scheme": args.scheme, "result": symbol, "cmp": rc}
    return Outcome(
        command=NAME,
        data=data,
        render=lambda console: console.print(symbol, markup=False, highlight=False),
    )
