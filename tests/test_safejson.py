"""hwmgr.safejson: hostile JSON is a one-line error, never RecursionError or a bare ValueError."""

from __future__ import annotations

import pytest

from hwmgr import safejson
from hwmgr.errors import BadInputError


@pytest.mark.parametrize("text, fragment", [
    ("[" * 100_000 + "]" * 100_000, "nested more than 64"),
    ("[" * 100_000, "nested more than 64"),
    ('{"a":' * 100_000 + "1" + "}" * 100_000, "nested more than 64"),
    ("[" * 65 + "]" * 65, "nested more than 64"),
    ("9" * 50_000, "50000 digits"),
    ('{"rc": -' + "1" * 41 + "}", "41 digits"),
    ("{bad", "line 1 column 2"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_hostile_text_is_one_short_error(text, fragment: str) -> None:
    with pytest.raises(safejson.JSONError, match=fragment) as err:
        safejson.parse(text)
    assert "\n" not in str(err.value) and len(str(err.value)) < 120


def test_ordinary_documents_and_the_hook_still_work() -> None:
    assert safejson.parse(b'{"a": [1, 2.5, -3, null, "x"]}') == {"a": [1, 2.5, -3, None, "x"]}
    assert safejson.parse("[" * 64 + "]" * 64) is not None
    pairs = safejson.parse('{"a": 1, "a": 2}', object_pairs_hook=list)
    assert pairs == [("a", 1), ("a", 2)]


def test_load_names_the_file() -> None:
    with pytest.raises(BadInputError, match=r"^snap/x\.json: not valid JSON \(nested"):
        safejson.load("[" * 1000 + "]" * 1000, "snap/x.json")


def test_digit_limit_is_exact_and_only_for_integers() -> None:
    big = "9" * 40
    assert safejson.parse(f'{{"n": -{big}}}') == {"n": -int(big)}
    # long digit runs that are not integers: a string and a float's fraction
    doc = f'{{"s": "{"7" * 50}", "f": 0.{"1" * 45}, "n": 5}}'
    assert safejson.parse(doc) == {"s": "7" * 50, "f": float("0." + "1" * 45), "n": 5}
    with pytest.raises(safejson.JSONError, match="41 digits"):
        safejson.parse(f'[1, "{"7" * 50}", 1{big}]')
