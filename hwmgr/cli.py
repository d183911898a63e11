"""Command-line entry point: the only place that prints results or exits.

Each verb lives in `hwmgr/commands/<verb>.py` with `NAME`, `HELP`, `EXAMPLES`,
`add_arguments(parser)` and `run(args, ctx) -> Outcome`. Verb modules are imported only
when used, so `hwmgr --help` and everyday commands stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Sequence

from hwmgr import __version__
from hwmgr.errors import EXIT_INTERNAL, EXIT_USAGE, HwmgrError, UsageError

# Start-up time: `hwmgr --help` imports nothing more than the above (json, dataclasses, the
# host seam and the verb's own modules are imported once a verb runs).

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


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so errors stay one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hwmgr",
        description="Vendor-aware hardware inventory and driver lifecycle manager.",
        epilog="Run 'hwmgr VERB --help' for a verb's options and examples. "
        "Exit codes are listed in README.md.",
    )
    parser.add_argument("--version", action="version", version=f"hwmgr {__version__}")
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for verb, (_modname, helptext) in VERBS.items():
        sub.add_parser(verb, help=helptext, add_help=False)
    return parser


def _verb_parser(verb: str) -> tuple[argparse.ArgumentParser, Any]:
    from hwmgr.ui.options import common_options

    modname, helptext = VERBS[verb]
    mod = importlib.import_module(modname)
    parents = list(getattr(mod, "option_parents", lambda: [common_options()])())
    p = _Parser(
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
        top = build_parser()
        # split off the verb so each verb module is imported only when used
        idx = next((i for i, a in enumerate(argv) if a in VERBS), None)
        if idx is None:
            top.parse_args(argv)  # handles --version / --help / unknown verbs
            top.print_help(sys.stderr)
            return EXIT_USAGE
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
