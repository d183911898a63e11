"""Fuzzing the parsers and loaders that read what hwmgr does not control (issue 25 §4).

Each target feeds generated input to one door and allows exactly its documented failure
(`BadInputError`, `VersionError`, `JSONError`, the iperf3 reason): anything else, a
RecursionError, an OverflowError, a KeyError, is a finding. The values are JSON-shaped on
purpose (nested, huge integers, lone surrogates, control bytes, long runs of spaces), next to
raw text and bytes. The budget is `HWMGR_FUZZ_EXAMPLES` examples per target (make test sets
it; make check a smaller one; 40 when unset); each target's time is printed with -s.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.hostile_state import committed_journal

from hwmgr import numtext, safejson, urls
from hwmgr.catalog import versions
from hwmgr.compliance.apply import changes_from_findings, load_changes
from hwmgr.errors import BadInputError, HwmgrError, VersionError
from hwmgr.fleet.results import load_host
from hwmgr.host.runner import Result
from hwmgr.lifecycle import expect, record
from hwmgr.lifecycle.builds.recipe import parse_recipe
from hwmgr.lifecycle.source.http import _ascii_int
from hwmgr.output import MAX_COLUMNS, MIN_COLUMNS, env_columns, printable
from hwmgr.transaction.journal import STEP_COLUMNS, TXN_COLUMNS, Journal, checked_row
from hwmgr.verify.iperf import IperfOutputError, parse_output

EXAMPLES = int(os.environ.get("HWMGR_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
TIMES: dict[str, tuple[int, float]] = {}  # target -> (examples, seconds), printed at the end

# text the way hostile files hold it: controls, escapes, lone surrogates, long space runs
_NASTY = st.sampled_from(["\x1b[2J", "\x00", "\ud800", "\udcff", "\u202e", "\u00b2", "\u0663",
                          " " * 5000, "9" * 5000, "-nan", "inf", "../" * 50, "\n\r\t"])
TEXT = st.one_of(st.text(max_size=40), _NASTY, st.builds(lambda a, b: a + b, st.text(max_size=8),
                                                        _NASTY))
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-2**70, 2**70),
                   st.floats(allow_nan=False), TEXT)
VALUE = st.recursive(SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(TEXT, inner, max_size=5)), max_leaves=25)


def deep(n: int) -> str:
    return "[" * n + "]" * n


def _timed(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Count the examples a target ran (for the closing report, printed with -s)."""
    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(fn)  # hypothesis reads the target's own signature
        def run(*args: Any, **kwargs: Any) -> None:
            n, t = TIMES.get(name, (0, 0.0))
            TIMES[name] = (n + 1, t)
            fn(*args, **kwargs)
        run.hwmgr_target = name  # type: ignore[attr-defined]
        return run
    return wrap


@pytest.fixture(autouse=True)
def wall_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each target's wall time, generation and shrinking included."""
    start = time.perf_counter()
    yield
    name = getattr(getattr(request.function, "hypothesis", None), "inner_test", None)
    name = getattr(name, "hwmgr_target", None)
    if name is not None:
        n, t = TIMES.get(name, (0, 0.0))
        TIMES[name] = (n, t + time.perf_counter() - start)


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    for name, (n, secs) in sorted(TIMES.items()):
        print(f"fuzz {name}: {n} examples in {secs:.2f} s, no finding")


def json_text(value: Any) -> str:
    """A JSON text of `value`, lone surrogates and all (json.dumps escapes them)."""
    return json.dumps(value)


# ------------------------------------------------------------------ safejson
@FUZZ
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200), VALUE.map(json_text),
                 st.integers(1, 3000).map(deep), st.integers(30, 6000).map(lambda n: "9" * n)))
@_timed("safejson.parse")
def test_safejson_parse(raw: bytes | str) -> None:
    try:
        doc = safejson.parse(raw)
    except safejson.JSONError as exc:
        assert "\n" not in str(exc)
        return
    json.dumps(doc).encode("utf-8")  # whatever it returns can be written out again
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # no lone surrogate survives


# ------------------------------------------------------------------ version strings
@FUZZ
@given(TEXT, TEXT, st.sampled_from(sorted(versions.SCHEMES)))
@_timed("versions.compare")
def test_versions_compare(a: str, b: str, scheme: str) -> None:
    try:
        assert versions.compare(a, b, scheme) in (-1, 0, 1)
    except VersionError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400


def test_versions_long_runs_are_refused_fast() -> None:
    """130,000 inner spaces: refused by length before any pattern runs (no timing assert:
    the test's own timeout is the guard)."""
    for scheme in versions.SCHEMES:
        with pytest.raises(VersionError, match="characters long"):
            versions.compare("1" + " " * 130_000 + "2", "1.2", scheme)


# ------------------------------------------------------------------ per-format loaders
def _bad_input_only(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except BadInputError as exc:
        assert "\n" not in exc.message, exc.message


@FUZZ
@given(VALUE)
@_timed("fleet.load_host")
def test_fleet_host_result(doc: Any) -> None:
    _bad_input_only(lambda: load_host(doc, "results/h.json"))


@FUZZ
@given(st.one_of(VALUE, st.fixed_dictionaries({"findings": st.lists(st.fixed_dictionaries({
    "status": st.sampled_from(["drift", "ok", 5]), "layer": st.sampled_from(["setting", 1]),
    "item": TEXT, "interface": st.one_of(st.none(), TEXT), "actual": VALUE,
    "expected": VALUE}), max_size=4)})))
@_timed("apply.load_changes")
def test_changes_file(doc: Any) -> None:
    def run() -> None:
        changes = load_changes(doc, "drift.json")
        changes_from_findings([{"layer": "setting", "status": "drift", "item": c.item,
                                "interface": c.interface, "actual": c.current,
                                "expected": c.wanted} for c in changes])
    _bad_input_only(run)


def _expectation(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"format": "hwmgr-expectation", "version": 1, "driver": "d",
                           "modules": ["d"], "kernels": {}, "devices": []}
    doc.update(over)
    return doc


@FUZZ
@given(st.one_of(VALUE, st.dictionaries(st.sampled_from(
    ["boot_attempts", "txn", "verified", "kernels", "devices", "modules", "expected_version",
     "kind", "auto_rollback"]), VALUE, max_size=3).map(lambda d: _expectation(**d))))
@_timed("expect.validate")
def test_expectation(doc: Any) -> None:
    _bad_input_only(lambda: expect.validate(doc, "expectations/d.json"))


SQL_VALUE = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False),
                      st.binary(max_size=8), TEXT, VALUE.map(json_text),
                      st.integers(60, 2000).map(deep))


@FUZZ
@given(st.fixed_dictionaries({k: SQL_VALUE for k in TXN_COLUMNS}),
       st.fixed_dictionaries({k: SQL_VALUE for k in STEP_COLUMNS}))
@_timed("journal.checked_row")
def test_journal_rows(txn: dict[str, Any], step: dict[str, Any]) -> None:
    _bad_input_only(lambda: checked_row(dict(txn), TXN_COLUMNS, "journal.sqlite: transaction 1"))
    _bad_input_only(lambda: checked_row(dict(step), STEP_COLUMNS, "journal.sqlite: step 0"))


@FUZZ
@given(st.dictionaries(st.sampled_from(["driver", "version", "modules", "kernels", "from"]),
                       VALUE), st.lists(st.tuples(st.sampled_from(["backup", "install"]),
                                                  st.dictionaries(st.sampled_from(
                                                      ["saved", "uninstalled"]), VALUE)),
                                        max_size=3))
@_timed("record.checked_upgrade")
def test_upgrade_record(params: dict[str, Any], steps: list[tuple[str, dict[str, Any]]]) -> None:
    txn = {"id": 1, "params": params, "steps": [{"name": n, "data": d} for n, d in steps]}

    def run() -> None:
        record.checked_upgrade(txn, "journal.sqlite")
        # what a rollback plan then reads must be there, with its types
        for k in params["kernels"]:
            for m in params["modules"]:
                for s in txn["steps"]:
                    if s["name"] == "backup" and s["data"].get("saved") is not None:
                        assert s["data"]["saved"][k][m].get("version") in (None,) or \
                            isinstance(s["data"]["saved"][k][m]["version"], str)
    _bad_input_only(run)


@FUZZ
@given(VALUE)
@_timed("recipe.parse_recipe")
def test_recipe(tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    path = tmp_path_factory.mktemp("drivers") / "ixgbe" / "recipe.json"
    path.parent.mkdir()
    path.write_text(json_text(doc))
    _bad_input_only(lambda: parse_recipe(path))


# ------------------------------------------------------------------ iperf3 output
def _iperf_doc(bps: Any, nbytes: Any, secs: Any, extra: dict[str, Any]) -> str:
    doc = {"start": {}, "end": {"sum_received": {"bits_per_second": bps, "bytes": nbytes,
                                                 "seconds": secs},
                                "sum_sent": {"bits_per_second": bps, "retransmits": 0},
                                **extra}}
    return json.dumps(doc)


@FUZZ
@given(st.one_of(
    st.text(max_size=300),
    st.builds(_iperf_doc, SCALAR, SCALAR, SCALAR, st.dictionaries(TEXT, VALUE, max_size=2)),
    st.integers(100, 900).map(lambda n: _iperf_doc(int("9" * n), 1, 1.0, {})),
    st.integers(50, 5000).map(lambda n: "{\"end\": " + deep(n) + "}"),
    st.builds(lambda t: _iperf_doc(8e9, 1e9, 1.0, {}) + t, TEXT)),
    st.sampled_from([0, 1, 124]), TEXT)
@_timed("throughput.parse_output")
def test_iperf3_output(stdout: str, rc: int, stderr: str) -> None:
    try:
        nums = parse_output(Result(("iperf3",), rc, stdout, stderr))
    except IperfOutputError as exc:
        assert "\n" not in str(exc) and "\x1b" not in str(exc)
        return
    assert nums["mbps"] >= 0


# ------------------------------------------------------------------ environment, headers
@FUZZ
@given(st.one_of(TEXT, st.integers().map(str), st.floats().map(str)))
@_timed("env/headers")
def test_columns_and_header_numbers(value: str) -> None:
    width = env_columns({"COLUMNS": value})
    assert width is None or MIN_COLUMNS <= width <= MAX_COLUMNS
    n = _ascii_int(value, 19)
    assert n is None or (0 <= n < 10 ** 19 and value.strip().isascii())
    printable(value).encode("utf-8")  # what reaches a terminal always encodes


# ------------------------------------------------------------------ numbers, URLs, terminal text
# number-shaped text as sysfs, /proc and ethtool may hold it: a sign, a base prefix, a run of
# digits (ASCII of each base, or any Unicode decimal digit), up to 10,000 of them, padded
_DIGIT = st.one_of(st.sampled_from("0123456789abcdefABCDEF"),
                   st.characters(whitelist_categories=("Nd",)))
NUMBER_TEXT = st.builds(
    lambda pad, sign, prefix, d, n, tail: f"{pad}{sign}{prefix}{d * n}{tail}{pad}",
    st.sampled_from(["", " ", "\n", "\t "]), st.sampled_from(["", "-", "+", "--"]),
    st.sampled_from(["", "0x", "0X", "0o", "0b", "0"]), _DIGIT,
    st.integers(0, 10_000), st.one_of(st.just(""), TEXT))


@FUZZ
@given(st.one_of(NUMBER_TEXT, TEXT), st.sampled_from(sorted(numtext._PATTERNS)))
@_timed("numtext")
def test_numbers_in_untrusted_text(text: str, base: int) -> None:
    """Either a number small enough to print, or NumberError on one line naming the field."""
    value = numtext.to_int(text, base)
    if value is not None:
        assert len(str(value)) < 80 and len(text.strip()) <= numtext.MAX_NUMBER_CHARS
        assert text.strip().isascii()
        return
    with pytest.raises(numtext.NumberError) as err:
        numtext.parse_int(text, "sys/class/net/x/mtu", base)
    msg = str(err.value)
    assert msg.startswith("sys/class/net/x/mtu: ") and "\n" not in msg and len(msg) < 200
    assert printable(msg) == msg


# URL-shaped text: a scheme, a host (names, IPv4, IPv6 with or without its bracket closed,
# Unicode), a port (past 65535, signed, not a number) and a rest, any part hostile
URL_TEXT = st.builds(
    lambda scheme, host, port, rest: f"{scheme}{host}{port}{rest}",
    st.sampled_from(["http://", "https://", "HTTP://", "file://", "ftp://", "", "http:/",
                     "javascript:"]),
    st.one_of(st.sampled_from(["127.0.0.1", "[::1]", "[::1", "::1]", "[", "]", "[v1.x]",
                               "例え.jp", "a" * 300, "", "user:pw@host", "%zz"]), TEXT),
    st.one_of(st.just(""), st.integers(-10, 10 ** 30).map(lambda n: f":{n}"),
              TEXT.map(lambda t: ":" + t)),
    st.one_of(st.just("/x.src.rpm"), TEXT, st.just("/" + "a" * 9000)))


@FUZZ
@given(URL_TEXT, URL_TEXT)
@_timed("urls")
def test_urls(url: str, location: str) -> None:
    """split, problem, join and path_of never raise; a URL problem() accepts splits to a host."""
    why = urls.problem(url)
    parts = urls.split(url)
    if why is None:
        assert parts is not None and parts.host and parts.scheme in ("http", "https")
        assert parts.port is not None and 0 <= parts.port <= 65535
    else:
        assert isinstance(why, str) and "\n" not in why and printable(why) == why
    urls.problem(urls.join(url, location))
    assert isinstance(urls.path_of(url), str)


@FUZZ
@given(st.one_of(TEXT, st.text(alphabet=st.characters(max_codepoint=0x9f), max_size=200)))
@_timed("printable")
def test_terminal_text_has_no_raw_control(text: str) -> None:
    """What any rendering prints: no C0 (but newline), DEL or C1 character survives."""
    out = printable(text)
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", out), out
    out.encode("utf-8")


# ------------------------------------------------------------------ the corpus
CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "hostile"


def _corpus() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name != "README.md")


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_file_through_its_loader(path: Path, tmp_path: Path) -> None:
    """Each saved hostile input (tests/fixtures/hostile/<format>/) through its format's
    loader: refused in one line, or read; never anything else."""
    fmt = path.parent.name
    if fmt == "json":
        try:
            safejson.load_file(path)
        except BadInputError as exc:
            assert "\n" not in exc.message and path.name in exc.message
    elif fmt == "changes":
        _bad_input_only(lambda: load_changes(safejson.load_file(path), str(path)))
    elif fmt == "results":
        _bad_input_only(lambda: load_host(safejson.load_file(path), str(path)))
    elif fmt == "expectation":
        _bad_input_only(lambda: expect.parse_expectation(path.read_bytes(), str(path)))
    elif fmt == "versions":
        for line in path.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
            for scheme in versions.SCHEMES:
                with contextlib.suppress(VersionError):
                    versions.parse(line, scheme)
    elif fmt == "iperf3":
        with contextlib.suppress(IperfOutputError):
            parse_output(Result(("iperf3",), 0, path.read_text(errors="replace"), ""))
    elif fmt == "journal-sql":
        db = tmp_path / "journal.sqlite"
        db.write_bytes(committed_journal())
        con = sqlite3.connect(db)
        con.executescript(path.read_text())
        con.commit()
        con.close()
        j = Journal(db, lambda **kw: sqlite3.connect(db, **kw), readonly=True)
        try:
            _bad_input_only(lambda: [record.checked_upgrade(t, str(db))
                                     for t in j.transactions() if t["kind"] == "upgrade"])
        finally:
            j.close()
    else:
        raise AssertionError(f"{path}: no loader for format {fmt!r}")


def test_corpus_covers_the_classes() -> None:
    formats = {p.parent.name for p in _corpus()}
    assert formats >= {"json", "changes", "results", "expectation", "versions", "iperf3",
                       "journal-sql"}, formats


def test_named_file_that_is_not_a_file_is_refused_before_opening(tmp_path: Path) -> None:
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    with pytest.raises(BadInputError, match="is a FIFO, not a file"):
        safejson.load_file(fifo)  # would block forever if it were opened
    with pytest.raises(BadInputError, match="is a directory"):
        safejson.load_file(tmp_path)
    with pytest.raises(HwmgrError, match="larger than 10 bytes"):
        (tmp_path / "big.json").write_text("[" + "1," * 50 + "1]")
        safejson.load_file(tmp_path / "big.json", max_bytes=10)
