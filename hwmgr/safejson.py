"""JSON from untrusted files (snapshots, catalogs, journals): bounded depth and integer size.

`json.loads` on hostile text can raise RecursionError (deep nesting) or a bare ValueError
(an integer past Python's digit limit); both would surface as internal errors. Here every
such failure is one `JSONError` with a short reason, or a `BadInputError` naming the file.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from hwmgr.errors import BadInputError

MAX_DEPTH = 64  # hwmgr's own formats nest at most ~8 levels
MAX_INT_DIGITS = 40  # every integer hwmgr reads fits in 128 bits


class JSONError(ValueError):
    """Untrusted JSON could not be used; the message is one short line."""


def _parse_int(text: str) -> int:
    """json's integer hook: refuse more than MAX_INT_DIGITS digits before converting."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONError(f"integer with {len(text.lstrip('-'))} digits is too long")
    return int(text)


def _depth_ok(data: Any, limit: int) -> bool:
    """True when containers nest at most `limit` deep (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in node if isinstance(child, (dict, list)))
    return True


def parse(
    raw: bytes | str,
    *,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Decode UTF-8 JSON text; `JSONError` (one line) for anything unusable."""
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
    return data


def load(raw: bytes | str, where: str, **kwargs: Any) -> Any:
    """`parse`, but a `BadInputError` (exit 8) naming `where` on failure."""
    try:
        return parse(raw, **kwargs)
    except JSONError as exc:
        raise BadInputError(f"{where}: not valid JSON ({exc})") from None
