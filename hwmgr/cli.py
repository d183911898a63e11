"""Command-line entry point: the only place that prints results or exits.

Each verb lives in `hwmgr/commands/<verb>.py` and declares `NAME`, `EXAMPLES`, `EXIT_CODES`
(and maybe `NOTES`, `option_parents()`), `add_arguments(parser)` and `run(args, ctx) ->
Outcome`; `VERBS` below is the one list of them, with each one's line of `hwmgr --help`. The
parser is plain argparse: `--help` is whatever the running Python's argparse prints.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Sequence

from hwmgr import __version__
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    HwmgrError,
    UsageError,
)
from hwmgr.output import Outcome, make_console, make_safe, printable, write_json
from hwmgr.transaction import interrupt
from hwmgr.ui.context import Context
from hwmgr.ui.options import common_options
from hwmgr.ui.verbhelp import all_codes, epilog, sub_action_examples

DESCRIPTION = "Vendor-aware hardware inventory and driver lifecycle manager."
EPILOG = ("Run 'hwmgr VERB --help' for a verb's options, examples and exit codes "
          "(all of them: docs/exit-codes.md).")

# the verbs, in the order --help lists them, with the line --help shows for each. A verb's
# module, hwmgr/commands/<name with "_" for "-">.py, is imported only when the verb runs.
VERBS: dict[str, str] = {
    "inventory": "list PCI functions, NICs and RAID controllers",
    "check": "compare drivers, firmware and NIC/sysctl settings with the catalog",
    "snapshot": "capture this host for offline analysis",
    "catalog": "validate or show the driver catalog",
    "vercmp": "compare two versions (prints <, = or >)",
    "plan": "dry run of an upgrade or rollback",
    "fetch": "download and verify a driver's vendor package",
    "upgrade": "upgrade a driver (DKMS build, keeps the old .ko)",
    "rollback": "restore a driver exactly as it was before",
    "apply": "set drifted NIC settings and sysctls now and persistently (undo with revert)",
    "revert": "undo an apply: recorded values and persistence files back exactly",
    "recover": "finish or undo an interrupted transaction",
    "history": "show upgrades, rollbacks and their results, or drift over time (--checks)",
    "verify": "after a reboot: prove the armed driver state is live",
    "throughput": "quick iperf3 check against a peer",
    "mirror": "fill an internal mirror directory of vendor packages",
    "package": "wrap a prepared DKMS tree as a noarch <driver>-dkms RPM",
    "recipe": "test a driver's build recipe on a vendor SRPM (scratch DKMS tree), or list recipes",
    "fleet-report": "build fleet-report.json/.xml/.html from per-host check results",
    "collect-script": "print the POSIX sh snapshot collector",
    "kernel-gate": "build and check every managed driver for a new kernel; hold the boot "
                   "default if not",
    "gate": "a rollout's health gate on this host: baseline before a change, check after",
    "rollout": "a change over many hosts: canaries, batches, failure budget, resume, report",
}


def verb_module(name: str) -> ModuleType:
    """The module of verb `name` (imported here, on first use: a run pays for its verb only)."""
    return importlib.import_module(f"hwmgr.commands.{name.replace('-', '_')}")


def verb_modules() -> dict[str, ModuleType]:
    """Every verb's module, in `VERBS` order (scripts/gen-exit-codes and the tests read all)."""
    return {name: verb_module(name) for name in VERBS}


class Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so errors stay one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """`hwmgr` and its sub-parsers. Given the `verb` a command line names (moved first by
    `_verb_first`, so it is the one argparse dispatches to), only that verb's sub-parser is
    built, with its options, help and epilog from its module (imported now); without one,
    every verb is listed by name and its line in `VERBS` for `hwmgr --help`. A run pays for
    the verb it runs, not for all of them (each sub-parser costs argparse a locale lookup)."""
    parser: argparse.ArgumentParser = Parser(prog="hwmgr", description=DESCRIPTION,
                                             epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"hwmgr {__version__}")
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for name, summary in VERBS.items():
        if verb is None:
            sub.add_parser(name, help=summary)
        if name != verb:
            continue
        mod = verb_module(name)
        parents: list[argparse.ArgumentParser] = (
            mod.option_parents() if hasattr(mod, "option_parents") else [common_options()])
        # the docstring's first paragraph, whole (a first line alone may stop mid-sentence)
        doc = " ".join((mod.__doc__ or summary).strip().split("\n\n")[0].split())
        p = sub.add_parser(
            name, help=summary, description=doc, parents=parents,
            epilog=epilog(getattr(mod, "NOTES", ""), mod.EXAMPLES, all_codes(mod.EXIT_CODES)),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        sub_action_examples(p, name, mod.EXAMPLES)
    return parser


def _verb_first(argv: list[str]) -> list[str]:
    """`hwmgr --json inventory` means `hwmgr inventory --json`: the verbs share these options,
    so what comes before the verb moves after it (`--debug` stays the top level's)."""
    idx = next((i for i, a in enumerate(argv) if a in VERBS), None)
    if idx is None:
        return argv
    head = [a for a in argv[:idx] if a != "--debug"]
    return [argv[idx], *head, *argv[idx + 1:]]


# every option and operand that names a file or directory on this machine: made absolute once,
# here, so that no step's working directory (rpm -i, make, a DKMS build) changes what it names
PATH_DESTS = ("file", "files", "dir", "root", "roots_from", "prom", "changes", "persist_root",
              "from_files", "catalog", "site_catalog", "expectation", "state_dir", "cache_dir",
              "results", "out", "history", "previous", "groups", "mirror")


def absolute_paths(args: argparse.Namespace) -> None:
    """Relative paths in `args` resolved against the working directory, URLs and "-" (stdin)
    left as given; a Path stays a Path."""
    def resolve(value: object) -> object:
        if isinstance(value, (list, tuple)):
            return type(value)(resolve(v) for v in value)
        if isinstance(value, Path):
            return Path(os.path.abspath(value))
        if isinstance(value, str) and value not in ("", "-") and "://" not in value:
            return os.path.abspath(value)
        return value

    for dest in PATH_DESTS:
        if hasattr(args, dest):
            setattr(args, dest, resolve(getattr(args, dest)))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run one verb, print its outcome; return the documented exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("HWMGR_DEBUG") == "1"
    want_json = "--json" in argv
    verb = next((a for a in argv if a in VERBS), "hwmgr")
    ctx: Context | None = None
    make_safe(sys.stdout)  # PYTHONIOENCODING=ascii: escapes, never UnicodeEncodeError
    outcome: Outcome | None = None
    interrupt.command()  # a transaction's signals stay deferred until this call ends
    try:
        parser = build_parser(verb if verb in VERBS else None)
        args = parser.parse_args(_verb_first(argv))
        if args.verb is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        absolute_paths(args)
        ctx = Context(args)
        outcome = verb_module(args.verb).run(args, ctx)
        if getattr(args, "json", False):
            write_json(outcome.envelope(), sys.stdout)
        else:
            if outcome.render is not None:
                outcome.render(make_console(sys.stdout))
            if not (outcome.render_shows_errors and _same_terminal()):
                for err in outcome.errors:
                    print(f"hwmgr {verb}: {printable(err)}", file=sys.stderr)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return outcome.exit_code
    except SystemExit as exc:  # argparse's --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except HwmgrError as exc:
        return _fail(verb, exc.message, exc.exit_code, want_json)
    except KeyboardInterrupt:
        if outcome is not None:  # the verb had finished (a transaction committed or not): it stands
            print(f"hwmgr {verb}: interrupted while reporting; the command had already ended "
                  f"({outcome.status})", file=sys.stderr)
            return outcome.exit_code
        return _fail(verb, "interrupted", EXIT_INTERRUPTED, want_json)
    except BrokenPipeError:
        return _closed_pipe(outcome)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:  # --root, HWMGR_* dirs, a mirror path in the config
            return _internal(verb, exc, debug, want_json)
        name = str(exc.filename)
        name = name if len(name) <= 80 else f"{name[:40]}...{name[-20:]}"
        return _fail(verb, f"{name}: path too long for this system ({len(str(exc.filename))} "
                     "characters)", EXIT_BAD_INPUT, want_json)
    except Exception as exc:  # noqa: BLE001 - last line of defence: never a traceback
        return _internal(verb, exc, debug, want_json)
    finally:
        if ctx is not None:
            ctx.close()
        for name in interrupt.release():  # a transaction ended and its result stood
            print(f"hwmgr {verb}: {name} after the transaction ended: its result stands",
                  file=sys.stderr)


def _same_terminal() -> bool:
    """Whether stdout and stderr both reach a terminal (a person reads them interleaved)."""
    return all(hasattr(s, "isatty") and s.isatty() for s in (sys.stdout, sys.stderr))


def _closed_pipe(outcome: Outcome | None) -> int:
    """The reader went away (`hwmgr check | head -1`): stop quietly with the verb's own exit
    code, so `set -o pipefail` scripts still see the drift. stdout is closed here (its
    unwritable rest dropped), so the interpreter's final flush has nothing to complain of."""
    for _ in range(2):  # a close whose flush fails still closes, then raises once
        try:
            sys.stdout.close()
            break
        except (BrokenPipeError, OSError, ValueError):
            continue
    return outcome.exit_code if outcome is not None else EXIT_FAILED


def _internal(verb: str, exc: Exception, debug: bool, want_json: bool) -> int:
    """A bug: the traceback with --debug, else one line; returns EXIT_INTERNAL."""
    if debug:
        traceback.print_exc()
    msg = f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)"
    return _fail(verb, msg, EXIT_INTERNAL, want_json)


def _fail(verb: str, message: str, code: int, want_json: bool) -> int:
    """One line on stderr (and the envelope with --json); returns `code`."""
    message = " ".join(message.split()) if "\n" in message else message
    message = printable(message)  # errors quote member, file and device names from snapshots
    if want_json:
        env = Outcome(command=verb, status="error", errors=[message]).envelope()
        write_json(env, sys.stdout)
    prefix = "hwmgr" if verb == "hwmgr" else f"hwmgr {verb}"
    print(f"{prefix}: error: {message}", file=sys.stderr)
    return code


def run() -> None:
    """The process entry point (console script, `python -m hwmgr`, the RPM's /usr/bin/hwmgr):
    main(), then exit with its code; a Ctrl-C or SIGTERM that lands after main() returned
    changes nothing, so it no longer kills the interpreter without a word."""
    code = main()
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    raise SystemExit(code)


if __name__ == "__main__":
    run()
