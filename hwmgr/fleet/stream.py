"""A big JSON object read a member at a time, for results files too big to hold whole.

10,000 hosts' real `hwmgr check` results are 100-300 MB of JSON, several times that as
Python objects; the report keeps a small part of each host. `JSONStream` walks the outer
objects token by token over a window of the file and decodes each member's value whole with
the standard library's C decoder (`raw_decode`), so only one host's result is held at a
time. The guards are `safejson`'s (regular files only, bounded size, integer length, nesting
depth, lone surrogates escaped, UTF-8), and an error is one `BadInputError` naming the file,
in `json`'s words with the line and column in the whole file.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from typing import Iterator

from hwmgr import safejson
from hwmgr.errors import BadInputError

CHUNK = 4 << 20  # bytes read at a time
_WS = re.compile(r"[ \t\n\r]*")
# a decoder error that may only mean the window ends inside the value: read on and retry
_NEAR_END = 16


class JSONStream:
    """The file at `path`, read forwards: `members()` walks an object, `value()` decodes
    one whole value. Refuses a file over `max_bytes` and a single value over `max_value`
    characters (each host's result is bounded as a per-host file is)."""

    def __init__(self, path: str | os.PathLike[str], where: str, max_bytes: int,
                 max_value: int) -> None:
        self.where, self.max_bytes, self.max_value = where, max_bytes, max_value
        self.fd = safejson.open_regular(path, where, max_bytes)
        self.buf, self.i, self.eof = "", 0, False
        self.newlines = 0  # newlines read so far (the window's included)
        self.col = 0  # characters since the last newline before buf[0], before buf[0]
        self.fed = 0  # bytes read so far
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.decoder = json.JSONDecoder(parse_int=safejson._parse_int)  # noqa: SLF001

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> JSONStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- the window on the file
    def _more(self) -> bool:
        """Drop what was consumed, append the next chunk; False at the end of the file."""
        if self.eof:
            return False
        nl = self.buf.rfind("\n", 0, self.i)
        self.col = self.i - nl - 1 if nl >= 0 else self.col + self.i
        self.buf, self.i = self.buf[self.i:], 0
        try:
            raw = os.read(self.fd, CHUNK)
        except OSError as exc:
            raise BadInputError(f"{self.where}: cannot read ({exc.strerror or exc})") from None
        pending = len(self.utf8.getstate()[0])
        try:
            text = self.utf8.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise BadInputError(f"{self.where}: not valid JSON (not UTF-8 text (byte "
                                f"{self.fed - pending + exc.start}))") from None
        self.fed += len(raw)
        self.newlines += raw.count(b"\n")  # a byte 0x0a is always a newline in UTF-8
        if self.fed > self.max_bytes:
            raise BadInputError(f"{self.where}: larger than {self.max_bytes} bytes; refusing "
                                "to read it")
        self.eof = not raw
        self.buf += text
        return bool(raw) or bool(text)

    def _fail(self, msg: str, pos: int | None = None) -> BadInputError:
        """`json`'s message at `pos` of the window, with the line and column in the file."""
        pos = self.i if pos is None else pos
        nls = self.buf.count("\n", 0, pos)
        line = self.newlines - self.buf.count("\n", pos) + 1
        col = pos - self.buf.rfind("\n", 0, pos) if nls else self.col + pos + 1
        return BadInputError(f"{self.where}: not valid JSON ({msg} (line {line} column {col}))")

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the file)."""
        while True:
            self.i = _WS.match(self.buf, self.i).end()  # type: ignore[union-attr]
            if self.i < len(self.buf):
                return self.buf[self.i]
            if not self._more():
                return ""

    def _expect(self, char: str, msg: str) -> None:
        if self.peek() != char:
            raise self._fail(msg)
        self.i += 1

    # -------------------------------------------------------------- values and objects
    def value(self, depth: int, what: str = "a value", surrogates: bool = True) -> object:
        """The next value, decoded whole; `depth` levels of nesting allowed in it, `what`
        names it when it is too large. With `surrogates` false the caller escapes lone
        surrogates itself, in the little it keeps of the value, sparing a pass over the
        whole text."""
        self.peek()
        val: object = None
        end = 0
        while True:
            try:
                val, end = self.decoder.raw_decode(self.buf, self.i)
            except json.JSONDecodeError as exc:
                truncated = exc.msg.startswith("Unterminated string") or \
                    exc.pos >= len(self.buf) - _NEAR_END
                if truncated and not self.eof:  # the window may end inside the value
                    self._read_on(what)
                    continue
                raise self._fail(exc.msg, exc.pos) from None
            except safejson.JSONError as exc:  # an integer too long, or one cut by the window
                if not self.eof and self.buf[-1:].isdigit():
                    self._read_on(what)
                    continue
                raise BadInputError(f"{self.where}: not valid JSON ({exc})") from None
            except RecursionError:
                raise self._deep() from None
            except ValueError as exc:
                raise BadInputError(f"{self.where}: not valid JSON (unusable value "
                                    f"({type(exc).__name__}))") from None
            if end >= len(self.buf) and not self.eof:
                self._read_on(what)  # a number or literal may go on in the next chunk
                continue
            break
        # fewer brackets than `depth` cannot nest deeper: the walk only for the few that could
        brackets = self.buf.count("{", self.i, end) + self.buf.count("[", self.i, end)
        if brackets > depth and not safejson._depth_ok(val, depth):  # noqa: SLF001
            raise self._deep()
        # a lone surrogate can only be written as an escape: the pattern only where one is
        if surrogates and safejson._SURROGATE_ESCAPE.search(self.buf, self.i, end):  # noqa: SLF001
            val = safejson._escape_surrogates(val)  # noqa: SLF001
        self.i = end
        return val

    def _read_on(self, what: str) -> None:
        """One more chunk for the value at `i`, unless it is already over `max_value`."""
        if len(self.buf) - self.i > self.max_value:
            raise BadInputError(f"{self.where}: {what}: larger than {self.max_value} bytes; "
                                "refusing to read it")
        self._more()

    def _deep(self) -> BadInputError:
        return BadInputError(f"{self.where}: not valid JSON (nested more than "
                             f"{safejson.MAX_DEPTH} levels deep)")

    def members(self) -> Iterator[str]:
        """An object's keys in file order; after each, the caller reads its value (`value`,
        or `members` again for an object)."""
        self._expect("{", "Expecting value")
        if self.peek() == "}":
            self.i += 1
            return
        while True:
            if self.peek() != '"':
                raise self._fail("Expecting property name enclosed in double quotes")
            key = self.value(1, "a key")
            if not isinstance(key, str):  # a '"' starts a string: never
                raise self._fail("Expecting property name enclosed in double quotes")
            self._expect(":", "Expecting ':' delimiter")
            self.peek()
            yield key
            nxt = self.peek()
            self.i += 1
            if nxt == "}":
                return
            if nxt != ",":
                self.i -= 1
                raise self._fail("Expecting ',' delimiter")

    def end(self) -> None:
        """Nothing but whitespace may follow the document."""
        if self.peek():
            raise self._fail("Extra data")
