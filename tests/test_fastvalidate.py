"""The compiled schema gate (fastjsonschema) and jsonschema accept and reject the same catalogs:
the fixture catalogs, the hostile catalog corpus and targeted mutations of the shipped one."""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest
from hostile import Sandbox, sandbox_dir
from hostile_cat import cat_kinds

from hwmgr.catalog import load
from hwmgr.catalog.fastvalidate import compile_gate, gate_for, to_draft7
from hwmgr.catalog.validate import parse, read_catalog

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads(load.SCHEMA_PATH.read_text())
FULL = jsonschema.Draft202012Validator(SCHEMA)
GATE = gate_for(load.SCHEMA_PATH.read_bytes())


def _newline_tail(data: Any) -> bool:
    """A string ending in a newline somewhere: Python's `$` (jsonschema) accepts it before a
    final newline, fastjsonschema's does not, so only there may the gate be stricter."""
    if isinstance(data, dict):
        return any(_newline_tail(k) or _newline_tail(v) for k, v in data.items())
    if isinstance(data, list):
        return any(_newline_tail(v) for v in data)
    return isinstance(data, str) and data.endswith("\n")


def agree(data: Any) -> str | None:
    """None when the gate and jsonschema give the same accept/reject answer, and hwmgr's
    schema check (gate, then jsonschema on a rejection) the same errors; else what differs."""
    errors = list(FULL.iter_errors(data))
    assert GATE is not None
    gate_ok = GATE(data)
    if gate_ok and errors:
        return f"the gate accepts what jsonschema rejects: {errors[0].message}"
    if not gate_ok and not errors and not _newline_tail(data):
        return "the gate rejects what jsonschema accepts"
    if bool(load._schema_errors(data)) != bool(errors):
        return "hwmgr's schema check and jsonschema disagree"
    return None


def test_gate_is_compiled_for_the_shipped_schema() -> None:
    assert GATE is not None  # fastjsonschema is installed (setup.cfg) and the schema translates


def test_translation_keeps_2020_12_meaning() -> None:
    d7 = to_draft7({"$defs": {"x": {"type": "string"}},
                    "properties": {"a": {"$ref": "#/$defs/x", "maxLength": 2}},
                    "dependentRequired": {"b": ["c"]}})
    assert d7["properties"]["a"] == {"maxLength": 2, "allOf": [{"$ref": "#/$defs/x"}]}
    assert d7["dependencies"] == {"b": ["c"]}
    gate = compile_gate({"$defs": {"x": {"type": "string"}},
                         "properties": {"a": {"$ref": "#/$defs/x", "maxLength": 2}},
                         "dependentRequired": {"b": ["c"]}})
    assert gate is not None
    assert gate({"a": "ok"}) and not gate({"a": "long"}) and not gate({"a": 1})
    assert not gate({"b": 1}) and gate({"b": 1, "c": 2})
    assert compile_gate({"prefixItems": [{"type": "string"}]}) is None  # no draft-7 twin


def test_fixture_catalogs_agree() -> None:
    files = sorted((REPO / "tests/fixtures/catalogs").glob("*/*.json"))
    files.append(REPO / "catalogs/hwmgr-catalog.json")
    checked = 0
    for f in files:
        raw, _ = read_catalog(f)
        data, errs = parse(raw) if raw is not None else (None, ["unreadable"])
        if data is None or errs:
            continue
        assert agree(data) is None, f
        checked += 1
    assert checked >= 15


def _mutations(doc: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every member removed, and every value replaced by values of other types, one at a time."""
    def walk(node: Any, parts: list[Any]) -> Iterator[list[Any]]:
        yield parts
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, parts + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, parts + [i])

    for parts in list(walk(doc, []))[1:]:
        for repl in ("__drop__", 7, -1, 1.5, "", "x y", [], {}, None, True, "0x1AB"):
            new = copy.deepcopy(doc)
            cur = new
            for p in parts[:-1]:
                cur = cur[p]
            if repl == "__drop__":
                if isinstance(cur, dict):
                    del cur[parts[-1]]
                else:
                    continue
            else:
                cur[parts[-1]] = repl
            yield f"{parts} -> {repl!r}", new


def test_mutations_of_the_fixture_catalog_agree() -> None:
    doc = json.loads((REPO / "tests/fixtures/catalogs/good/mini.json").read_text())
    bad = [f"{what}: {why}" for what, data in _mutations(doc) if (why := agree(data))]
    assert not bad, "\n".join(bad[:20])


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    with sandbox_dir(tmp_path_factory.mktemp("fastvalidate")) as base:
        yield Sandbox(base)


def test_hostile_catalog_corpus_agrees(sandbox: Sandbox) -> None:
    checked, bad = 0, []
    for cases in cat_kinds().values():
        for case in cases:
            work = Path(tempfile.mkdtemp(dir=sandbox.scratch))
            for arg in case.build(work, sandbox):
                p = Path(arg)
                if not (p.is_absolute() and str(p).startswith(str(work)) and p.is_file()
                        and not p.is_symlink() and os.path.getsize(p) < (1 << 24)):
                    continue
                raw, _ = read_catalog(p)
                data, errs = parse(raw) if raw is not None else (None, ["unreadable"])
                if data is None or errs:
                    continue
                checked += 1
                why = agree(data)
                if why:
                    bad.append(f"{case.name}: {why}")
    assert checked >= 200, checked
    assert not bad, "\n".join(bad[:20])
