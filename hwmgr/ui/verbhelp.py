"""A verb's help as data: examples (each with the exit code it gives) and the table of exit
codes, rendered here into `--help`'s epilog; scripts/gen-exit-codes renders the same data into
docs/exit-codes.md, the README and the Ansible modules' table."""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from typing import Mapping, Sequence

from hwmgr.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_NAMES, EXIT_USAGE

# every verb can end with these (a bad command line, a bug, Ctrl-C): one line under each table
COMMON_CODES: dict[int, str] = {
    EXIT_USAGE: "usage error", EXIT_INTERNAL: "internal error (a bug)",
    EXIT_INTERRUPTED: "interrupted",
}
NOTE_COLUMN = 44  # where an example's note starts in --help


@dataclass(frozen=True)
class Example:
    """One line of a verb's help: the command as typed, what it shows, and the exit code it
    gives in the situation the note describes (tests/test_verb_codes.py runs it)."""

    command: str
    note: str = ""
    code: int = 0


def all_codes(exit_codes: Mapping[int, str]) -> dict[int, str]:
    """A verb's own table plus the codes every verb may return, in numeric order."""
    merged = {**COMMON_CODES, **exit_codes}
    return {code: merged[code] for code in sorted(merged)}


def example_lines(examples: Sequence[Example]) -> list[str]:
    """`  command   note (exit N)`; a command too long for the column puts its note below."""
    lines: list[str] = []
    for ex in examples:
        note = ex.note + (f" (exit {ex.code})" if ex.code else "")
        head = f"  {ex.command}"
        if not note:
            lines.append(head)
        elif len(head) + 2 <= NOTE_COLUMN:
            lines.append(head.ljust(NOTE_COLUMN) + note)
        else:
            lines += [head, " " * NOTE_COLUMN + note]
    return lines


def epilog(notes: str, examples: Sequence[Example], exit_codes: Mapping[int, str]) -> str:
    """The text under a verb's options: its notes, examples and exit codes (`all_codes`), laid
    out as written (RawDescriptionHelpFormatter)."""
    parts = [notes.strip("\n")] if notes.strip() else []
    if examples:
        parts.append("\n".join(["examples:", *example_lines(examples)]))
    rows = ["exit codes:"]
    for code, meaning in exit_codes.items():
        rows += textwrap.wrap(meaning, 90, initial_indent=f"  {code:<4}",
                              subsequent_indent=" " * 6)
    parts.append("\n".join(rows))
    return "\n\n".join(parts) + "\n"


def short_name(code: int) -> str:
    """The one-word name of a code (for messages and tables)."""
    return EXIT_NAMES.get(code, "undocumented")


def sub_action_examples(parser: argparse.ArgumentParser, verb: str,
                        examples: Sequence[Example]) -> None:
    """Give each sub-action's `--help` (`hwmgr catalog show --help`, `hwmgr mirror sync
    --help`) the verb's examples that use it, laid out as in the verb's own help."""
    for action in parser._actions:  # argparse keeps its sub-parsers only here
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            mine = [ex for ex in examples if ex.command.split()[:3] == ["hwmgr", verb, name]]
            if mine and not sub.epilog:
                sub.epilog = "\n".join(["examples:", *example_lines(mine)]) + "\n"
                sub.formatter_class = argparse.RawDescriptionHelpFormatter
