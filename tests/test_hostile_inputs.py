"""Hostile input through the real CLI, one test per class of issue 25 outside the snapshot
and state-dir corpora: the environment (COLUMNS, PYTHONIOENCODING, SOURCE_DATE_EPOCH), paths
past the system's limit, named files that are FIFOs or not UTF-8 (`--changes`, fleet
results, `--history`), huge integers and lone surrogates in fleet results, long version
strings, numbers from the command line, a catalog layer's schema_version. Each: never exit
70, one stderr line naming the file or field when refused, and an end (the timeout given to
the run is a guard against a hang, not a timing assertion)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import HOSTS, REPO, run_cli, run_cli_process

HOST = str(HOSTS / "seed002-before")
GUARD = 60  # seconds: a run past this hangs


def refused(res, code: int, *names: str) -> None:
    """Exit `code`, one stderr line, naming each of `names`; no traceback."""
    lines = res.stderr.splitlines()
    assert res.returncode == code, (res.returncode, res.stderr[-500:])
    assert len(lines) == 1 and lines[0].startswith("hwmgr "), res.stderr[-500:]
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert "Traceback" not in res.stdout + res.stderr


@pytest.mark.parametrize("columns", ["abc", "1e3", "\x1b[2J", "\u00b2", "9" * 40, "-5", ""])
def test_columns_read_defensively(columns: str) -> None:
    for verb in ("inventory", "check"):
        res = run_cli(verb, "--root", HOST, env={"COLUMNS": columns}, timeout=GUARD)
        assert res.returncode in (0, 5), (verb, res.returncode, res.stderr[-300:])
        assert res.stdout and "Traceback" not in res.stderr


def test_ascii_terminal_gets_escapes_not_a_crash() -> None:
    for verb in ("inventory", "check"):
        res = run_cli_process(verb, "--root", HOST, env={"PYTHONIOENCODING": "ascii",
                                                         "COLUMNS": "150"}, timeout=GUARD)
        assert res.returncode in (0, 5), (verb, res.returncode, res.stderr[-300:])
        assert res.stdout.isascii() and res.stdout.strip()


def test_lone_surrogates_in_results_reach_a_report_and_an_ascii_terminal(
        tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    doc = '{"status": "unreachable", "error": "ssh: \\ud800 \\u001b[2J"}'
    (results / "ok.json").write_text(doc)
    os.makedirs(results, exist_ok=True)
    (results / os.fsdecode(b"h\xffst.json")).write_text(doc)
    res = run_cli_process("fleet-report", "--results", str(results), "--out",
                          str(tmp_path / "out"), env={"PYTHONIOENCODING": "ascii"},
                          timeout=GUARD)
    assert res.returncode == 6, res.stderr
    report = json.loads((tmp_path / "out" / "fleet-report.json").read_text())
    assert set(report["hosts"]) == {"ok", "h\\xffst"}
    assert report["hosts"]["ok"]["error"] == "ssh: \\ud800 \x1b[2J"  # kept as text, escaped
    assert "\x1b" not in res.stdout


@pytest.mark.parametrize("what", ["root", "state", "config"])
def test_path_past_the_system_limit_is_one_line(what: str, tmp_path: Path) -> None:
    long = "/" + "/".join(["a" * 250] * 20)  # 5,000 characters
    if what == "root":
        res = run_cli("inventory", "--root", long, timeout=GUARD)
    elif what == "state":
        res = run_cli("history", "--state-dir", long, timeout=GUARD)
    else:
        res = run_cli("history", "--state-dir", str(tmp_path), env={"HWMGR_CONFIG": long},
                      timeout=GUARD)
    assert res.returncode in (0, 3, 8), res.stderr
    if res.returncode:
        refused(res, res.returncode)


def _changes(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "drift.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "utf16":
        path.write_bytes('[{"item": "mtu", "wanted": 9000}]'.encode("utf-16"))
    elif kind == "latin1":
        path.write_bytes('[{"item": "caf\xe9", "wanted": 1}]'.encode("latin-1"))
    elif kind == "random":
        path.write_bytes(bytes(range(256)) * 4)
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "huge-int":
        path.write_text('[{"item": "mtu", "wanted": ' + "9" * 5000 + "}]")
    elif kind == "list-of-lists":
        path.write_text("[[1]]")
    elif kind == "data-list":
        path.write_text('{"data": [1]}')
    elif kind == "findings-types":
        path.write_text(json.dumps({"findings": [{"status": "drift", "layer": 5, "item": 3}]}))
    elif kind == "bound-text":
        path.write_text(json.dumps({"findings": [{
            "status": "drift", "layer": "setting", "item": "ring.rx", "interface": "eth2",
            "expected": {"min": "a"}, "actual": 3}]}))
    return path


@pytest.mark.parametrize("kind", ["fifo", "dir", "utf16", "latin1", "random", "deep",
                                  "huge-int", "list-of-lists", "data-list", "findings-types",
                                  "bound-text"])
def test_changes_file_is_checked_at_the_door(kind: str, tmp_path: Path) -> None:
    path = _changes(tmp_path, kind)
    res = run_cli("apply", "--changes", str(path), "--root", HOST, "--dry-run",
                  timeout=GUARD)
    refused(res, 8, "drift.json")


@pytest.mark.parametrize("kind", ["fifo-member", "huge-int", "deep", "wrong-types"])
def test_fleet_results_checked_at_the_door(kind: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    bad = results / "web1.json"
    if kind == "fifo-member":
        os.mkfifo(bad)
    elif kind == "huge-int":
        bad.write_text('{"status": "ok", "check": {"summary": {"drift": ' + "9" * 5000 + "}}}")
    elif kind == "deep":
        bad.write_text('{"status": "ok", "check": ' + "[" * 50_000 + "]" * 50_000 + "}")
    else:
        bad.write_text(json.dumps({"status": "ok", "check": {"findings": 5}}))
    res = run_cli("fleet-report", "--results", str(results), "--out", str(tmp_path / "o"),
                  timeout=GUARD)
    refused(res, 8, "web1.json")


@pytest.mark.parametrize("kind", ["fifo", "huge-int", "results-fifo"])
def test_history_and_results_that_are_fifos(kind: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "a.json").write_text('{"status": "unreachable"}')
    old = tmp_path / "old.json"
    if kind == "fifo":
        os.mkfifo(old)
        args = ["--results", str(results), "--history", str(old)]
    elif kind == "huge-int":
        old.write_text('{"format_version": 1, "generated": "x", "summary": {"hosts": '
                       + "9" * 5000 + "}}")
        args = ["--results", str(results), "--history", str(old)]
    else:
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        args = ["--results", str(fifo)]
    res = run_cli("fleet-report", *args, "--out", str(tmp_path / "o"), timeout=GUARD)
    refused(res, 8)


@pytest.mark.parametrize("scheme", ["rpm", "driver", "firmware", "intel-firmware"])
def test_long_version_strings_refused_by_length(scheme: str) -> None:
    res = run_cli("vercmp", "--scheme", scheme, "1" + " " * 130_000 + "2", "1.2",
                  timeout=GUARD)
    refused(res, 8, "130002 characters long")


@pytest.mark.parametrize("args", [["--timeout", "inf"], ["--timeout", "1e308"],
                                  ["--connect-timeout", "9999999999999999"],
                                  ["--serve", "--timeout", "inf"], ["--floor", "inf"]])
def test_throughput_numbers_bounded(args: list[str]) -> None:
    peer = [] if args[0] == "--serve" else ["--peer", "127.0.0.1"]
    res = run_cli("throughput", *peer, "--port", "1", *args, timeout=GUARD)
    refused(res, 2, args[-2] if args[0] != "--serve" else "--timeout")


@pytest.mark.parametrize("epoch", ["9" * 30, "\u00b2", "abc", "-1", "1e9"])
def test_source_date_epoch_refused_in_one_line(epoch: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "a.json").write_text('{"status": "unreachable"}')
    res = run_cli("fleet-report", "--results", str(results), "--out", str(tmp_path / "o"),
                  env={"SOURCE_DATE_EPOCH": epoch}, timeout=GUARD)
    refused(res, 8, "SOURCE_DATE_EPOCH")


def test_catalog_layer_with_null_schema_version(tmp_path: Path) -> None:
    site = tmp_path / "catalog.d"
    site.mkdir()
    (site / "10-site.json").write_text('{"schema_version": null, "drivers": {}}')
    res = run_cli("check", "--root", HOST, env={"HWMGR_SITE_CATALOG_DIR": str(site)},
                  timeout=GUARD)
    refused(res, 8, "10-site.json", "schema_version")


def test_corpus_is_in_the_repository() -> None:
    assert (REPO / "tests" / "fixtures" / "hostile" / "README.md").is_file()


@pytest.mark.heavy
def test_a_100000_character_hostname_is_laid_out_in_linear_time(tmp_path: Path) -> None:
    """The table shows the whole value (never cut), wrapped by output.fit in one pass: the
    old one-character-at-a-time cut ran for minutes."""
    import shutil

    root = tmp_path / "host"
    shutil.copytree(HOST, root, symlinks=True)
    meta = json.loads((root / "snapshot.json").read_text())
    meta["hostname"] = "h" * 100_000
    (root / "snapshot.json").write_text(json.dumps(meta))
    (root / "proc/sys/kernel/hostname").write_text("h" * 100_000 + "\n")
    for verb in ("inventory", "check"):
        res = run_cli(verb, "--root", str(root), timeout=GUARD)
        assert res.returncode in (0, 5), res.stderr
        assert res.stdout.count("h") >= 100_000


def test_fit_counts_cells() -> None:
    from hwmgr.output import cell_len, fit

    for text, cells in [("abc", 2), ("日本語", 4), ("日本語", 3), ("x" * 1000, 80), ("", 3)]:
        n = fit(text, cells)
        assert cell_len(text[:n]) <= cells or n == 1
        assert n == len(text) or cell_len(text[:n + 1]) > cells
