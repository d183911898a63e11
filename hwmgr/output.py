"""Command outcomes and how they are shown: the §5 JSON envelope or a human rendering."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TextIO

if TYPE_CHECKING:  # rich is imported where a table is drawn (make_console says why)
    from rich.console import Console
    from rich.table import Table

JSON_FORMAT_VERSION = 1


@dataclass
class Outcome:
    """What a command produced: status, data, errors, exit code and a human renderer."""

    command: str
    status: str = "ok"
    data: Any = None
    errors: list[str] = field(default_factory=list)
    exit_code: int = 0
    render: Callable[[Console], object] | None = None  # its return value is ignored
    # the rendering already states `errors` (a plan's refusals): on a terminal, where stdout
    # and stderr meet, they are then not repeated on stderr
    render_shows_errors: bool = False

    def envelope(self) -> dict[str, Any]:
        return {
            "format_version": JSON_FORMAT_VERSION,
            "command": self.command,
            "status": self.status,
            "data": self.data,
            "errors": list(self.errors),
        }


_CONTROL: dict[int, str] = {}  # filled on first use: 2,200 entries, ~0.5 ms of every start


def _control() -> dict[int, str]:
    """The escape table for printable(): C0/C1 controls, DEL, and lone surrogates (those from
    undecodable file names, U+DC80-U+DCFF, show as the byte they stand for)."""
    if not _CONTROL:
        table = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}
        table.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"})
        table.update({c: f"\\u{c:04x}" for c in range(0x80, 0xA0)})
        # lone surrogates cannot be written to a UTF-8 terminal at all
        table.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})
        table.update({c: f"\\x{c - 0xDC00:02x}" for c in range(0xDC80, 0xDD00)})
        _CONTROL.update(table)
    return _CONTROL


def printable(text: object) -> str:
    """`text` with control characters (and lone surrogates) escaped: host- and snapshot-
    supplied strings reach a terminal only through this, so a hostile hostname cannot move
    the cursor or recolour, and an undecodable file name cannot crash the output."""
    return str(text).translate(_CONTROL or _control())


def write_json(obj: Any, stream: TextIO) -> None:
    """Indented for a terminal; compact (C encoder, one write) for pipes and files."""
    pretty = hasattr(stream, "isatty") and stream.isatty()
    text = json.dumps(obj, indent=2 if pretty else None, ensure_ascii=False)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a file name that was not UTF-8 (surrogateescape)
            text = json.dumps(obj, indent=2 if pretty else None)  # \udcff: still valid JSON
    stream.write(text + "\n")


def cell_len(text: str) -> int:
    """How many terminal cells `text` takes (wide characters count two), by rich's rule."""
    from rich.cells import cell_len as cells  # rich only where a table is laid out or drawn

    return cells(text)


def make_console(stream: TextIO, *, stderr: bool = False) -> Console:
    """A rich Console for a human rendering."""
    # Imported here on purpose: rich is the largest import hwmgr has (tens of ms, more than
    # hwmgr's own modules), and only tables need it; --json runs, scripts reading the JSON
    # and hwmgr-verify at boot never render one.
    from rich.console import Console

    width = None
    if not (hasattr(stream, "isatty") and stream.isatty()):
        # pipes and logs: wide enough that tables do not fold every cell
        width = int(os.environ.get("COLUMNS", "0") or 0) or 150
    # piped, a printed line is never broken (a path or command stays whole for scripts);
    # tables still lay out to `width`
    console = Console(file=stream, stderr=stderr, highlight=False, soft_wrap=width is not None,
                      width=width)
    console.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]
    return console


def _broken_pipe() -> None:
    """rich's default exits 1 on a closed pipe; re-raise so `cli` ends quietly with the
    verb's own exit code (`hwmgr check | head -1` under `set -o pipefail` still gives 5)."""
    raise BrokenPipeError


def new_table(console: Console, **options: Any) -> Table:
    """A rich Table for `console`: box-drawn on a terminal; piped, plain ASCII columns (no
    box characters, as the README promises), so `grep` and `awk` read it like `ps`."""
    from rich.table import Table  # rich: only drawing needs it

    if not console.is_terminal:
        options["box"] = None
    return Table(**options)
