"""hwmgr.catalog_check: what makes a catalog file untrustworthy before its schema is asked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hwmgr.catalog.validate import glob_problem, parse, read_catalog


@pytest.mark.parametrize("glob, problem", [
    ("2.6.32-*.el6.x86_64", None), ("6.1.0-[0-9]*-amd64", None), ("[]]x", None),
    ("[!]]", None), ("[", "unclosed '[' at position 0"), ("2.6.[", "unclosed '[' at position 4"),
    ("[]", "unclosed '[' at position 0"), ("x[9-0]y", "empty range 9-0"),
])
def test_glob_problem(glob: str, problem: str | None) -> None:
    assert glob_problem(glob) == problem


@pytest.mark.parametrize("text, path, needle", [
    ('{"a": [1, NaN]}', "$.a[1]", "NaN is not a usable number"),
    ('{"a": {"b": 1e999}}', "$.a.b", "1e999 is not a usable number"),
    ('{"a": ' + "9" * 50_000 + "}", "$.a", "a number with 50000 digits"),
    ('{"a": "x\\u001b[31m"}', "$.a", "a control character ('\\x1b')"),
    ('{"a": "\\ud800"}', "$.a", "a lone surrogate"),
    ('{"a\\n": 1}', "$", "key 'a\\n' holds a control character"),
    ('{"a": 1, "a": 2}', "$", "duplicate key 'a'"),
    ('{"a": ' + "[" * 40 + "]" * 40 + "}", "$.a" + "[0]" * 31, "nested more than 32 levels"),
])
def test_parse_names_the_path(text: str, path: str, needle: str) -> None:
    data, findings = parse(text.encode())
    assert any(p == path and needle in m for p, m in findings), findings


def test_parse_errors_without_a_document() -> None:
    assert parse(b"[" * 100_000)[1][0][1].startswith("invalid JSON: nested more than")
    assert parse(b'{"a": "\xff"}')[1] == [("$", "not UTF-8 text (byte 7)")]


def test_read_catalog_never_opens_what_is_not_a_file(tmp_path: Path) -> None:
    fifo = tmp_path / "c.json"
    os.mkfifo(fifo)  # nobody writes: a plain open() would block for ever
    assert read_catalog(fifo) == (None, "is a FIFO, not a catalog file")
    assert read_catalog(tmp_path) == (None, "is a directory, not a catalog file")
    assert read_catalog(Path("/dev/zero")) == (None, "is a character device, not a catalog file")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * ((16 << 20) + 100))
    data, why = read_catalog(big)
    assert why is None and data is not None and len(data) == (16 << 20) + 1  # bounded read
