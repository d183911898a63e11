"""JSON from untrusted files (snapshots, catalogs, journals): bounded depth and integer size.

`json.loads` on hostile text can raise RecursionError (deep nesting) or a bare ValueError
(an integer past Python's digit limit); both would surface as internal errors. Here every
such failure is one `JSONError` with a short reason, or a `BadInputError` naming the file.
`read_file` is the door for a JSON file the user names (regular files only, bounded size),
and `typed` the one shape check the small per-format loaders share.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Callable, Tuple, Type, TypeVar, Union, cast, overload

from hwmgr.errors import BadInputError
from hwmgr.output import printable

MAX_DEPTH = 64  # hwmgr's own formats nest at most ~8 levels
MAX_INT_DIGITS = 40  # every integer hwmgr reads fits in 128 bits
MAX_FILE_BYTES = 64 << 20  # a named JSON file larger than this is refused unread
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))
_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer",
               float: "a number", bool: "true or false", type(None): "null"}


PairsHook = Callable[[list[tuple[str, object]]], object]  # json's object_pairs_hook
_T = TypeVar("_T")
_D = TypeVar("_D")


class JSONError(ValueError):
    """Untrusted JSON could not be used; the message is one short line."""


def _parse_int(text: str) -> int:
    """json's integer hook: refuse more than MAX_INT_DIGITS digits before converting."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONError(f"integer with {len(text.lstrip('-'))} digits is too long")
    return int(text)


def _depth_ok(data: object, limit: int) -> bool:
    """True when containers nest at most `limit` deep: one level of containers at a time
    (no recursion to exhaust; twice as fast as a stack of (node, depth) pairs on a 46 MB
    fleet result)."""
    level: list[dict[object, object] | list[object]] = (
        [data] if isinstance(data, (dict, list)) else [])
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return False
        below: list[dict[object, object] | list[object]] = []
        for node in level:
            for child in node.values() if isinstance(node, dict) else node:
                if isinstance(child, (dict, list)):
                    below.append(child)
        level = below
    return True


def parse(
    raw: bytes | str,
    *,
    object_pairs_hook: PairsHook | None = None,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Decode UTF-8 JSON text; `JSONError` (one line) for anything unusable. `Any`: this is
    the JSON edge, each format's loader narrows the value once (see `typed`)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise JSONError(f"not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text, parse_int=_parse_int, object_pairs_hook=object_pairs_hook)
    except JSONError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONError(f"{exc.msg} (line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise JSONError(f"nested more than {max_depth} levels deep") from None
    except ValueError as exc:  # e.g. a float/int the decoder cannot convert
        raise JSONError(f"unusable value ({type(exc).__name__})") from None
    if not _depth_ok(data, max_depth):
        raise JSONError(f"nested more than {max_depth} levels deep")
    if _SURROGATE_ESCAPE.search(text):
        data = _escape_surrogates(data)
    return data


# a \uD800-\uDFFF escape in the text: the only way JSON can hold a lone surrogate
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATES = {c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)}


def _escape_surrogates(data: _T) -> _T:
    """`data` with every lone surrogate (`"\\ud800"` in the file) written as the six
    characters `\\ud800`: such a string can be neither encoded as UTF-8 nor printed, so it is
    made safe here, once, for every later report, table and file. Containers are fixed in
    place (their types kept), iteratively like _depth_ok."""
    if isinstance(data, str):
        return cast(_T, data.translate(_SURROGATES))  # a str subclass comes back a str
    stack: list[object] = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            pairs = [(k.translate(_SURROGATES) if isinstance(k, str) else k,
                      v.translate(_SURROGATES) if isinstance(v, str) else v)
                     for k, v in node.items()]
            node.clear()
            node.update(pairs)
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            for i, child in enumerate(node):
                if isinstance(child, str):
                    node[i] = child.translate(_SURROGATES)
                elif isinstance(child, (dict, list)):
                    stack.append(child)
    return data


def load(raw: bytes | str, where: str, *, object_pairs_hook: PairsHook | None = None,
         max_depth: int = MAX_DEPTH) -> Any:
    """`parse`, but a `BadInputError` (exit 8) naming `where` on failure."""
    try:
        return parse(raw, object_pairs_hook=object_pairs_hook, max_depth=max_depth)
    except JSONError as exc:
        raise BadInputError(f"{where}: not valid JSON ({exc})") from None


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def not_regular(path: str | os.PathLike[str]) -> str | None:
    """What `path` is when it is no regular file ("a FIFO", "a character device", ...),
    found without opening it (a FIFO would block the opener, hwmgr or a tool it runs); None
    for a regular file or a path that cannot be stat'ed (the reader then says so)."""
    try:
        return _not_regular(os.stat(path).st_mode)
    except (OSError, ValueError):
        return None


def open_regular(path: str | os.PathLike[str], where: str,
                 max_bytes: int = MAX_FILE_BYTES) -> int:
    """A read fd on a file the user named: a FIFO, device, socket or directory is refused
    before it is opened (a FIFO would block), and a file over `max_bytes`; each refusal a
    `BadInputError` naming `where`. The caller closes the fd."""
    try:
        kind = _not_regular(os.stat(path).st_mode)
        if kind:
            raise BadInputError(f"{where}: is {kind}, not a file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInputError(f"{where}: cannot read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        kind = _not_regular(st.st_mode)  # replaced between the stat and the open
        if kind:
            raise BadInputError(f"{where}: is {kind}, not a file")
        if st.st_size > max_bytes:
            raise BadInputError(f"{where}: larger than {max_bytes} bytes; refusing to read it")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(path: str | os.PathLike[str], where: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a file the user named (`open_regular`), read no further than `max_bytes`
    (a file that grows while read is refused too)."""
    fd = open_regular(path, where, max_bytes)
    try:
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise BadInputError(f"{where}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise BadInputError(f"{where}: larger than {max_bytes} bytes; refusing to read it")
    return b"".join(chunks)


def load_file(path: str | os.PathLike[str], where: str | None = None,
              max_bytes: int = MAX_FILE_BYTES, *, object_pairs_hook: PairsHook | None = None,
              max_depth: int = MAX_DEPTH) -> Any:
    """`read_file` then `load`: a named JSON file, every failure one line naming it."""
    where = where or printable_path(path)
    return load(read_file(path, where, max_bytes), where,
                object_pairs_hook=object_pairs_hook, max_depth=max_depth)


def printable_path(path: str | os.PathLike[str]) -> str:
    """A path for an error line: escaped, and shortened when it is very long."""
    text = printable(os.fspath(path) if not isinstance(path, Path) else str(path))
    return text if len(text) <= 200 else f"{text[:120]}...{text[-60:]}"


Types = Union[Type[object], Tuple[Type[object], ...]]
Fail = Callable[[str, str], Exception]


def type_name(value: object) -> str:
    """How an error names a JSON value's type (`an integer`, `a list`)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


@overload
def typed(value: object, types: Type[_T], where: str, fail: Fail | None = None) -> _T: ...
@overload
def typed(value: object, types: Types, where: str, fail: Fail | None = None) -> object: ...
def typed(value: object, types: Types, where: str, fail: Fail | None = None) -> object:
    """`value` when it is one of `types` (a bool is never an int here); else the error
    `fail(where, problem)` makes (default a `BadInputError`: `where: expected a string, got
    an integer`), so each format names its file and field its own way."""
    wanted = types if isinstance(types, tuple) else (types,)
    ok = isinstance(value, wanted) and not (
        isinstance(value, bool) and bool not in wanted)
    if not ok:
        names = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in wanted)
        problem = f"expected {names}, got {type_name(value)}"
        raise (fail or _bad_input)(where, problem)
    return value


@overload
def member(obj: object, key: str, types: Type[_T]) -> _T | None: ...
@overload
def member(obj: object, key: str, types: Type[_T], default: _D) -> _T | _D: ...
@overload
def member(obj: object, key: str, types: Types, default: object = None) -> object: ...
def member(obj: object, key: str, types: Types, default: object = None) -> object:
    """`obj[key]` when `obj` is an object and the member is one of `types` (a bool is never
    an int here); else `default`. For a tool's JSON, where a member of the wrong type means
    "not reported", not an error: iterating an int or a string's characters is never done."""
    if not isinstance(obj, dict):
        return default
    value = obj.get(key, default)
    wanted = types if isinstance(types, tuple) else (types,)
    if isinstance(value, wanted) and not (isinstance(value, bool) and bool not in wanted):
        return value
    return default


def _bad_input(where: str, problem: str) -> Exception:
    return BadInputError(printable(f"{where}: {problem}"))  # keys from the file: escaped
