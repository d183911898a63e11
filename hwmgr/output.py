"""Command outcomes and how they are shown: the §5 JSON envelope or a human rendering."""

from __future__ import annotations

import contextlib
import functools
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, TextIO

if TYPE_CHECKING:  # rich is imported where a table is drawn (make_console says why)
    from rich.console import Console
    from rich.table import Table

JSON_FORMAT_VERSION = 1


@dataclass
class Outcome:
    """What a command produced: status, data, errors, exit code and a human renderer."""

    command: str
    status: str = "ok"
    data: object = None  # JSON-shaped: the envelope's `data`
    errors: list[str] = field(default_factory=list)
    exit_code: int = 0
    render: Callable[[Console], object] | None = None  # its return value is ignored
    # the rendering already states `errors` (a plan's refusals): on a terminal, where stdout
    # and stderr meet, they are then not repeated on stderr
    render_shows_errors: bool = False

    def envelope(self) -> dict[str, object]:
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


def printable_lines(text: str) -> str:
    """`printable` line by line: the newlines a rendering means stay, every other control
    character (a peer's ESC, a file name's CR) is escaped."""
    return "\n".join(printable(line) for line in text.split("\n"))


# DEL and the C1 controls (U+0080-U+009F, CSI among them), which json.dumps leaves raw
# without ensure_ascii: written as \u escapes, the same JSON value and no terminal action
_JSON_RAW = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}


def write_json(obj: object, stream: TextIO) -> None:
    """Indented for a terminal; compact (C encoder, one write) for pipes and files. No raw
    control character is written: json.dumps escapes C0, `_JSON_RAW` the rest."""
    pretty = hasattr(stream, "isatty") and stream.isatty()
    text = json.dumps(obj, indent=2 if pretty else None, ensure_ascii=False)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a file name that was not UTF-8 (surrogateescape)
            text = json.dumps(obj, indent=2 if pretty else None)  # \udcff: still valid JSON
        else:
            text = text.translate(_JSON_RAW)
    stream.write(text + "\n")


def cell_len(text: str) -> int:
    """How many terminal cells `text` takes (wide characters count two), by rich's rule."""
    from rich.cells import cell_len as cells  # rich only where a table is laid out or drawn

    return cells(text)


MIN_COLUMNS, MAX_COLUMNS = 20, 1000  # a COLUMNS outside this is clamped into it
PIPE_COLUMNS = 150  # pipes and logs: wide enough that tables do not fold every cell


def env_columns(environ: Mapping[str, str] | None = None) -> int | None:
    """`COLUMNS` as a width, or None when unset or not a plain ASCII number (`abc`, `1e3`, an
    escape sequence, `²`); clamped to MIN_COLUMNS..MAX_COLUMNS. The one reader of COLUMNS:
    rich is always handed a width from here, so it never parses the variable itself."""
    raw = (os.environ if environ is None else environ).get("COLUMNS", "")
    if not (0 < len(raw) <= 6 and raw.isascii() and raw.isdigit()):
        return None
    return min(max(int(raw), MIN_COLUMNS), MAX_COLUMNS)


def make_safe(stream: TextIO) -> None:
    """Let `stream` write any text whatever its encoding (PYTHONIOENCODING=ascii, a C locale):
    a character it cannot encode is written as a backslash escape instead of raising. Called
    once on stdout by cli; stderr already does this in Python."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
        with contextlib.suppress(ValueError, OSError):  # a closed or detached stream
            reconfigure(errors="backslashreplace")


def fit(text: str, cells: int) -> int:
    """How many leading characters of `text` fit in `cells` terminal cells (at least one, so
    a cut always advances). Linear: one pass of per-character widths, where shortening the
    string one character at a time and measuring it again took minutes on a 100,000-character
    hostname."""
    from rich.cells import get_character_cell_size  # rich only where a table is laid out

    used = 0
    for i, ch in enumerate(text):
        used += get_character_cell_size(ch)
        if used > cells:
            return max(i, 1)
    return len(text)


def make_console(stream: TextIO, *, stderr: bool = False) -> Console:
    """A rich Console for a human rendering."""
    # rich is imported by _safe_console_class on purpose: it is the largest import hwmgr has
    # (tens of ms, more than hwmgr's own modules), and only tables need it; --json runs,
    # scripts reading the JSON and hwmgr-verify at boot never render one.
    width = env_columns()
    if width is None and not (hasattr(stream, "isatty") and stream.isatty()):
        width = PIPE_COLUMNS
    # rich reads COLUMNS and LINES again for its size (int() on '²'): it sees them only as
    # plain numbers, or not at all
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if width is not None:
        environ["COLUMNS"] = str(width)
    lines = os.environ.get("LINES", "")
    if 0 < len(lines) <= 6 and lines.isascii() and lines.isdigit():
        environ["LINES"] = lines
    # piped, a printed line is never broken (a path or command stays whole for scripts);
    # tables still lay out to `width`
    piped = not (hasattr(stream, "isatty") and stream.isatty())
    console = _safe_console_class()(file=stream, stderr=stderr, highlight=False,
                                    soft_wrap=piped, width=width, _environ=environ)
    console.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]
    return console


@functools.lru_cache(maxsize=1)
def _safe_console_class() -> type[Console]:
    """rich's Console whose `print` escapes every plain string it is handed (printable, line
    by line): a verb's rendering that puts a user- or host-supplied name in an f-string
    cannot reach the terminal with its control characters, whichever verb forgets."""
    from rich.console import Console  # rich: only drawing needs it

    class SafeConsole(Console):
        def print(self, *objects: object, **kwargs: Any) -> None:  # (rich's own options)
            super().print(*(printable_lines(o) if isinstance(o, str) else o for o in objects),
                          **kwargs)

    return SafeConsole


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
