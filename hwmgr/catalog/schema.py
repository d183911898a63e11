"""The catalog's JSON Schema check, and its verdict remembered by the layers' content hash.

jsonschema costs ~170 ms to import and ~0.8 s to walk a catalog of 3,000 device rules, while
everyday commands load the same catalog again and again. So a passed check is remembered in
the analysing user's cache (`catalog-valid.json`, the KEEP most recent keys), keyed by the
SHA-256 of the schema, CHECKS_VERSION and every layer's bytes in order: any change to any of
them is a new key, checked in full. A remembered verdict also covers the per-value checks of
the strict parse and the semantic rules (functions of the same bytes, under the same
CHECKS_VERSION): two thirds of a catalog load, 30 ms of each `check` on every fleet host.
Each file's own checks are remembered too (`file_key`: its bytes, and whether it is the base
or a layer over one): a new site layer, or a changed one, costs its own check and the merged
one, not the 35 shipped files' again.
The JSON syntax, the merge and the device index are redone on every load
(`hwmgr.catalog.load`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence, overload

from hwmgr.catalog import layers
from hwmgr.catalog.refs import JsonPath, json_path
from hwmgr.errors import BadInputError, HwmgrError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "catalog.schema.json"
# Bump when the validation rules change (schema handling here, or catalog/validate.py):
# invalidates every remembered verdict.
CHECKS_VERSION = "9"
VERDICTS_FILE = "catalog-valid.json"
KEEP = 256  # remembered keys: a few catalogs' files and layer sets, never an unbounded file

Finding = tuple[JsonPath, str]  # (JSON path parts, message)


def one_line(msg: str, limit: int = 240) -> str:
    """`msg` on one line, cut to `limit` characters."""
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def schema_bytes() -> bytes:
    """The shipped schema's text; BadInputError naming it when unreadable."""
    try:
        return SCHEMA_PATH.read_bytes()
    except OSError as exc:
        raise BadInputError(f"catalog schema {SCHEMA_PATH} is unreadable: {exc}") from None


_VALIDATORS: dict[tuple[bytes, bool], Validator] = {}


def inline_refs(schema: Mapping[str, object]) -> dict[str, object]:
    """The schema with each `#/$defs/NAME` reference replaced by that definition (a
    recursive one stays a reference): the same rules, but jsonschema no longer resolves
    some 30,000 references per catalog walk, about 40 % of a cold check's time."""
    found = schema.get("$defs")
    defs: Mapping[str, object] = found if isinstance(found, dict) else {}

    def walk(node: object, stack: tuple[str, ...]) -> object:
        if isinstance(node, list):
            return [walk(v, stack) for v in node]
        return walk_obj(node, stack) if isinstance(node, dict) else node

    def walk_obj(node: Mapping[str, object], stack: tuple[str, ...]) -> dict[str, object]:
        ref = node.get("$ref")
        name = ref[len("#/$defs/"):] if isinstance(ref, str) and ref.startswith(
            "#/$defs/") else None
        target = defs.get(name) if name is not None and name not in stack else None
        if name is not None and isinstance(target, dict):
            inlined = walk_obj(target, (*stack, name))
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {"allOf": [inlined, walk_obj(rest, stack)]} if rest else inlined
        return {k: walk(v, stack) for k, v in node.items()}

    return walk_obj(schema, ())


NAME_MAPS = ("properties", "patternProperties", "$defs")  # keys below these are names


@overload
def as_draft7(schema: Mapping[str, object], names: bool = False) -> dict[str, object]: ...
@overload
def as_draft7(schema: object, names: bool = False) -> object: ...
def as_draft7(schema: object, names: bool = False) -> object:
    """The 2020-12 schema in draft 7's words, for jsonschema 3.2 (RHEL 9's, which has no
    2020-12 validator): `dependentRequired` is draft 7's array-valued `dependencies`, the
    only 2020-12 keyword the schema uses; `$defs` stays, as its references are pointers."""
    if isinstance(schema, list):
        return [as_draft7(v) for v in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, object] = {}
    for key, value in schema.items():
        if names:
            out[key] = as_draft7(value)
        else:
            out["dependencies" if key == "dependentRequired" else key] = as_draft7(
                value, names=key in NAME_MAPS)
    return out


def _schema(text: bytes, partial: bool) -> dict[str, object]:
    """The shipped schema as jsonschema is given it: relaxed for a partial layer, inlined."""
    doc = json.loads(text)
    if partial:
        doc = layers.relaxed_schema(doc)
    if not isinstance(doc, dict):
        raise BadInputError(f"catalog schema {SCHEMA_PATH} is not a JSON object")
    return inline_refs(doc)


def findings(data: object, partial: bool = False) -> list[Finding]:
    """(path parts, message) of `data` against the shipped schema, or its relaxed form for a
    partial layer (see `layers.relaxed_schema`), sorted by path."""
    # jsonschema is imported here, not at the top: only a catalog whose verdict is not
    # remembered pays its ~170 ms (the design notes' rule for everyday commands)
    import jsonschema
    from jsonschema.exceptions import best_match

    text = schema_bytes()
    if (text, partial) not in _VALIDATORS:
        schema = _schema(text, partial)
        if hasattr(jsonschema, "Draft202012Validator"):  # jsonschema >= 4
            _VALIDATORS[text, partial] = jsonschema.Draft202012Validator(schema)
        else:  # 3.2, RHEL 9's (specs/el9-constraints.txt): the same rules as draft 7
            _VALIDATORS[text, partial] = jsonschema.Draft7Validator(as_draft7(schema))
    out: list[Finding] = []
    try:
        for err in _VALIDATORS[text, partial].iter_errors(data):
            if err.validator in ("anyOf", "oneOf") and err.context and isinstance(
                    err.instance, (dict, list)):
                err = best_match(err.context)  # a short, specific message for containers
            out.append((tuple(err.absolute_path), one_line(err.message)))
    except RecursionError:
        out.append(((), "structure is nested too deeply"))
    return sorted(set(out), key=lambda f: (json_path(f[0]), f[1]))


class VerdictCache:
    """The remembered passed checks in one cache directory; a missing, damaged or unwritable
    file only means checking again, never an error."""

    def __init__(self, cache_dir: str | Path) -> None:
        self.dir = Path(cache_dir)
        self.path = self.dir / VERDICTS_FILE
        self._host = Host("/", SubprocessRunner(), writable=[str(self.dir)])

    @staticmethod
    def key(digests: Sequence[str]) -> str:
        """The key for layers with these SHA-256 digests, in order, under today's checks."""
        h = hashlib.sha256(hashlib.sha256(schema_bytes()).digest())
        h.update(f"\0{CHECKS_VERSION}".encode())
        for digest in digests:
            h.update(f"\0{digest}".encode())
        return h.hexdigest()

    @staticmethod
    def file_keys(digests: Sequence[str]) -> list[str]:
        """Each file's own key under today's checks: its digest, and whether it is the base
        (the first, checked as a whole catalog) or a layer over it (checked as partial)."""
        base = hashlib.sha256(hashlib.sha256(schema_bytes()).digest())
        base.update(f"\0{CHECKS_VERSION}\0file".encode())
        out = []
        for i, digest in enumerate(digests):
            h = base.copy()
            h.update(f"\0{'layer' if i else 'base'}\0{digest}".encode())
            out.append(h.hexdigest())
        return out

    def remembered(self) -> set[str]:
        """Every remembered key (one read of the cache file)."""
        return set(self._keys())

    def _keys(self) -> list[str]:
        raw = self._host.read_bytes(str(self.path))
        try:
            keys = json.loads(raw) if raw else []
        except ValueError:
            return []
        return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []

    def passed(self, key: str) -> bool:
        """Whether layers with this key passed the schema check before."""
        return key in self._keys()

    def remember(self, *new: str) -> None:
        """Record passed checks (most recent last, KEEP kept)."""
        keys = [k for k in self._keys() if k not in new] + list(new)
        with contextlib.suppress(OSError, HwmgrError):
            self._host.write_bytes(str(self.path), json.dumps(keys[-KEEP:]).encode() + b"\n")
