"""A compiled accept/reject gate for the catalog schema (fastjsonschema), before jsonschema.

jsonschema walks a 50,000-rule catalog in 10-20 s; a validator compiled to Python code by
fastjsonschema does it in well under a second. fastjsonschema knows drafts 4/6/7 only, so the
2020-12 schema is first rewritten to the draft-7 meaning of the same rules: `$ref` with
siblings becomes `allOf: [{$ref}]` (2020-12 applies both; draft 7 would ignore the
siblings), and `dependentRequired` becomes `dependencies` (same meaning for lists). A
keyword it cannot translate makes `compile_gate` return None, and the caller validates with
jsonschema alone. The gate only says "valid"; any rejection (or error) is re-checked by
jsonschema, whose messages the user sees, so a gate bug can cost time but never hide an error.
(The gate is stricter in one known place: its `$` does not match before a final newline, as
Python's does; such text takes the jsonschema path.)
tests/test_fastvalidate.py holds both validators to the same answer on the test corpus.
"""

from __future__ import annotations

from typing import Any, Callable

# 2020-12 keywords with no draft-7 twin: a schema using one is not given to the gate
_UNTRANSLATABLE = {"prefixItems", "unevaluatedProperties", "unevaluatedItems",
                   "dependentSchemas", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
                   "$anchor", "contentSchema", "minContains", "maxContains"}


class _Untranslatable(Exception):
    """The schema uses a keyword the draft-7 gate cannot express."""


def to_draft7(node: Any) -> Any:
    """The same constraints in draft-7 spelling (see the module docstring)."""
    if isinstance(node, list):
        return [to_draft7(n) for n in node]
    if not isinstance(node, dict):
        return node
    bad = _UNTRANSLATABLE & node.keys()
    if bad:
        raise _Untranslatable(sorted(bad)[0])
    out = {k: to_draft7(v) for k, v in node.items()
           if k not in ("$schema", "$id", "dependentRequired")}
    if "dependentRequired" in node:
        out["dependencies"] = {k: list(v) for k, v in node["dependentRequired"].items()}
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out["allOf"] = [{"$ref": ref}, *out.get("allOf", [])]
    return out


def compile_gate(schema: dict[str, Any]) -> Callable[[Any], bool] | None:
    """A function data -> True when the schema surely accepts it; None when unavailable."""
    try:
        import fastjsonschema
    except ImportError:
        return None
    try:
        d7 = to_draft7(schema)
        d7["$schema"] = "http://json-schema.org/draft-07/schema#"
        check = fastjsonschema.compile(d7)
    except (_Untranslatable, fastjsonschema.JsonSchemaDefinitionException):
        return None

    def gate(data: Any) -> bool:
        try:
            check(data)
        except Exception:  # noqa: BLE001 - a rejection or a gate failure: jsonschema decides
            return False
        return True

    return gate


_GATES: dict[bytes, Callable[[Any], bool] | None] = {}


def gate_for(schema_bytes: bytes) -> Callable[[Any], bool] | None:
    """The gate for this schema text, compiled once per process (None: use jsonschema)."""
    if schema_bytes not in _GATES:
        import json

        try:
            schema = json.loads(schema_bytes)
        except ValueError:
            schema = None
        _GATES[schema_bytes] = compile_gate(schema) if isinstance(schema, dict) else None
    return _GATES[schema_bytes]
