"""Command-line entry point: the only place that prints results or exits.

Each verb lives in `hwmgr/commands/<verb>.py` with `NAME`, `HELP`, `EXAMPLES`,
`add_arguments(parser)` and `run(args, ctx) -> Outcome`. Verb modules are imported only
when used, so `hwmgr --help` and everyday commands stay fast.
"""

from __future__ import annotations

import os
import sys

from hwmgr import __version__
from hwmgr.errors import EXIT_INTERNAL, EXIT_USAGE, HwmgrError, UsageError

TYPE_CHECKING = False  # typing itself costs ~3 ms of start-up; annotations only need it here
if TYPE_CHECKING:
    import argparse
    from typing import Any, Sequence

# Start-up time: `hwmgr --help` imports nothing more than the above; argparse (with re, enum,
# gettext), json, the host seam and the verb's own modules are imported once a verb runs.
DESCRIPTION = "Vendor-aware hardware inventory and driver lifecycle manager."
EPILOG = ("Run 'hwmgr VERB --help' for a verb's options and examples. "
          "Exit codes are listed in README.md.")

# verb -> (module, one-line help). Order is the order shown in --help.
VERBS: dict[str, tuple[str, str]] = {
    "inventory": ("hwmgr.commands.inventory", "list PCI functions, NICs and RAID controllers"),
    "check": ("hwmgr.commands.check", "compare drivers, firmware and NIC/sysctl settings with "
              "the catalog"),
    "snapshot": ("hwmgr.commands.snapshot", "capture this host for offline analysis"),
    "catalog": ("hwmgr.commands.catalog", "validate or show the driver catalog"),
    "vercmp": ("hwmgr.commands.vercmp", "compare two versions (prints <, = or >)"),
    "plan": ("hwmgr.commands.plan", "dry run of an upgrade or rollback"),
    "fetch": ("hwmgr.commands.fetch", "download and verify a driver's vendor package"),
    "upgrade": ("hwmgr.commands.upgrade", "upgrade a driver (DKMS build, keeps the old .ko)"),
    "rollback": ("hwmgr.commands.rollback", "restore a driver exactly as it was before"),
    "apply": ("hwmgr.commands.apply", "set drifted NIC settings and sysctls (undo with revert)"),
    "revert": ("hwmgr.commands.revert", "undo an apply exactly (values and persistence files)"),
    "recover": ("hwmgr.commands.recover", "finish or undo an interrupted transaction"),
    "history": ("hwmgr.commands.history", "show upgrades, rollbacks and their results"),
    "verify": ("hwmgr.commands.verify", "after a reboot: prove the armed driver state is live"),
    "throughput": ("hwmgr.commands.throughput", "quick iperf3 check against a peer"),
    "mirror": ("hwmgr.commands.mirror", "fill an internal mirror directory of vendor packages"),
    "package": ("hwmgr.commands.package", "wrap a driver as a noarch <driver>-dkms RPM"),
    "fleet-report": ("hwmgr.commands.fleet_report", "build the fleet report from hosts' checks"),
    "collect-script": ("hwmgr.commands.collect_script", "print the POSIX sh snapshot collector"),
}

class Context:
    """Per-invocation settings shared by the verbs; builds the Host once, lazily."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._host: Any = None
        self._config: Any = None
        self._cleanup: list[Any] = []

    def __repr__(self) -> str:
        return f"Context(args={self.args!r})"

    @property
    def host(self) -> Any:
        if self._host is None:
            from hwmgr.host.snapshot import open_host

            root = getattr(self.args, "root", None)
            self._host, cleanup = open_host(root)
            if cleanup is not None:
                self._cleanup.append(cleanup)
            # the run's own dirs are the live host's writable roots besides hwmgr's host paths
            self._host.allow_writes(self.config.state_dir, self.config.cache_dir)
        return self._host

    @property
    def config(self) -> Any:
        """Paths and switches for this run, from flags and HWMGR_* variables (read once)."""
        if self._config is None:
            from hwmgr.config import config_from

            self._config = config_from(self.args)
        return self._config

    def close(self) -> None:
        for fn in reversed(self._cleanup):
            fn()
        self._cleanup.clear()


def _parser_class() -> type[argparse.ArgumentParser]:
    """argparse that raises UsageError instead of exiting, so errors stay one line (built on
    first use: argparse is not imported for `hwmgr --help`)."""
    global _Parser
    if _Parser is None:
        import argparse

        class Parser(argparse.ArgumentParser):
            def error(self, message: str) -> None:  # type: ignore[override]
                raise UsageError(message)

            def _get_formatter(self) -> argparse.HelpFormatter:
                # argparse's own width, without its `import shutil` (bz2, lzma: ~4 ms)
                return self.formatter_class(prog=self.prog, width=_columns() - 2)

        _Parser = Parser
    return _Parser


_Parser: type[argparse.ArgumentParser] | None = None


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: only for `hwmgr` without a verb (usage, --version, errors)."""
    import argparse

    parser = _parser_class()(prog="hwmgr", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"hwmgr {__version__}")
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_parser_class())
    for verb, (_modname, helptext) in VERBS.items():
        sub.add_parser(verb, help=helptext, add_help=False)
    return parser


def _verb_parser(verb: str) -> tuple[argparse.ArgumentParser, Any]:
    import argparse
    import importlib

    from hwmgr.ui.options import common_options

    modname, helptext = VERBS[verb]
    mod = importlib.import_module(modname)
    parents = list(getattr(mod, "option_parents", lambda: [common_options()])())
    p = _parser_class()(
        prog=f"hwmgr {verb}",
        description=mod.__doc__.strip().splitlines()[0] if mod.__doc__ else helptext,
        epilog=getattr(mod, "EXAMPLES", None),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=parents,
    )
    mod.add_arguments(p)
    return p, mod


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run one verb, print its outcome; return the documented exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("HWMGR_DEBUG") == "1"
    want_json = "--json" in argv
    verb = "hwmgr"
    ctx: Context | None = None
    try:
        # split off the verb so each verb module is imported only when used
        idx = next((i for i, a in enumerate(argv) if a in VERBS), None)
        if idx is None:
            return _no_verb(argv)
        verb = argv[idx]
        # `hwmgr --json inventory` means `hwmgr inventory --json`: the verbs share these options
        head = [a for a in argv[:idx] if a != "--debug"]
        parser, mod = _verb_parser(verb)
        args = parser.parse_args(head + argv[idx + 1 :])
        ctx = Context(args)
        outcome = mod.run(args, ctx)
        from hwmgr.output import make_console, printable, write_json

        if getattr(args, "json", False):
            write_json(outcome.envelope(), sys.stdout)
        elif outcome.render is not None:
            outcome.render(make_console(sys.stdout))
        for err in outcome.errors if not getattr(args, "json", False) else []:
            print(f"hwmgr {verb}: {printable(err)}", file=sys.stderr)
        return outcome.exit_code
    except SystemExit as exc:  # argparse --help / --version
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    except HwmgrError as exc:
        return _fail(verb, exc.message, exc.exit_code, want_json, debug)
    except KeyboardInterrupt:
        return _fail(verb, "interrupted", 130, want_json, debug)
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - last line of defence: never a traceback
        if debug:
            import traceback

            traceback.print_exc()
        msg = f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)"
        return _fail(verb, msg, EXIT_INTERNAL, want_json, debug)
    finally:
        if ctx is not None:
            ctx.close()


def _no_verb(argv: list[str]) -> int:
    """`hwmgr`, `hwmgr --help`, `hwmgr --version`, or an unknown verb; the common three
    without argparse (the same text, see `top_help`), anything else through it."""
    if argv == ["--version"]:
        print(f"hwmgr {__version__}")
        return 0
    if argv in ([], ["-h"], ["--help"]):
        text = top_help(_columns())
        if text is not None:
            (sys.stdout if argv else sys.stderr).write(text)
            return 0 if argv else EXIT_USAGE
    top = build_parser()
    top.parse_args(argv)  # handles --version / --help / unknown verbs
    top.print_help(sys.stderr)
    return EXIT_USAGE


def _columns() -> int:
    """The terminal width exactly as argparse gets it (shutil.get_terminal_size)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns


def top_help(columns: int) -> str | None:
    """`hwmgr --help` as argparse prints it for a terminal `columns` wide, without importing
    argparse (~10 ms of a 40 ms start); None below 40 columns, where argparse lays it out
    differently (tests/test_cli.py compares both at every width from 40 to 300)."""
    width = columns - 2  # argparse's HelpFormatter width
    if width < 38:
        return None
    col = 18  # help column: the longest verb ("collect-script", 14) + indents, capped at 24
    out = ["usage: hwmgr [-h] [--version] VERB ...", "", *_wrap(DESCRIPTION, width), "",
           "positional arguments:", "  VERB"]
    rows = [(f"    {v}", h) for v, (_m, h) in VERBS.items()]
    rows += [("  -h, --help", "show this help message and exit"),
             ("  --version", "show program's version number and exit")]
    for i, (head, text) in enumerate(rows):
        if i == len(VERBS):
            out += ["", "options:"]
        lines = _wrap(text, width - col)
        if len(head) + 2 <= col:
            out.append(head.ljust(col) + lines[0])
        else:
            out += [head, " " * col + lines[0]]
        out += [" " * col + line for line in lines[1:]]
    out += ["", *_wrap(EPILOG, width)]
    return "\n".join(out) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    """textwrap.wrap for the fixed help texts: greedy, breaking at spaces and after a hyphen
    between letters ("Vendor-aware"), as textwrap does; no word here is longer than `width`."""
    chunks: list[str] = []
    for n, word in enumerate(text.split()):
        if n:
            chunks.append(" ")
        start = 0
        for i in range(2, len(word) - 2):
            if (word[i] == "-" and word[i - 2:i].isalpha() and word[i + 1:i + 3].isalpha()):
                chunks.append(word[start:i + 1])
                start = i + 1
        chunks.append(word[start:])
    lines: list[str] = []
    line = ""
    for chunk in chunks:
        if len(line) + len(chunk) > width:
            lines.append(line.rstrip(" "))
            line = "" if chunk == " " else chunk
        else:
            line += chunk
    lines.append(line.rstrip(" "))
    return lines


def _fail(verb: str, message: str, code: int, want_json: bool, debug: bool) -> int:
    from hwmgr.output import Outcome, printable, write_json

    message = " ".join(message.split()) if "\n" in message else message
    message = printable(message)  # errors quote member, file and device names from snapshots
    if want_json:
        env = Outcome(command=verb, status="error", errors=[message]).envelope()
        write_json(env, sys.stdout)
    prefix = "hwmgr" if verb == "hwmgr" else f"hwmgr {verb}"
    print(f"{prefix}: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
