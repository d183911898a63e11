"""The CLI's own behaviour: options around the verb, usage errors, exit codes."""

from __future__ import annotations

import json

from support import HOSTS, run_cli

from hwmgr import __version__


def test_version_and_help() -> None:
    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"hwmgr {__version__}"
    res = run_cli()
    assert res.returncode == 2 and "VERB" in res.stderr


def test_shared_options_may_come_before_the_verb() -> None:
    res = run_cli("--json", "--root", str(HOSTS / "seed000-ustor"), "inventory")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["data"]["host"]["hostname"] == "Ustor"


def test_usage_errors_are_one_line_with_exit_2() -> None:
    for args in (["bogus"], ["inventory", "--bogus"], ["vercmp", "1.0"]):
        res = run_cli(*args)
        assert res.returncode == 2, args
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and ": error: " in lines[0], res.stderr
        assert not lines[0].startswith("hwmgr hwmgr"), lines[0]
        assert "Traceback" not in res.stderr


def test_json_errors_keep_the_envelope() -> None:
    res = run_cli("catalog", "show", "nosuch", "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 3 and doc["status"] == "error" and doc["format_version"] == 1
    assert "nosuch" in doc["errors"][0]


def test_fast_top_help_is_argparse_help_at_every_width() -> None:
    """`hwmgr --help` skips argparse for start-up time; the text must be argparse's own."""
    import contextlib
    import io
    import os

    from hwmgr import cli

    saved = os.environ.get("COLUMNS")
    try:
        for columns in range(20, 301):
            os.environ["COLUMNS"] = str(columns)
            want = io.StringIO()
            cli.build_parser().print_help(want)
            fast = cli.top_help(columns)
            if columns >= 40:
                assert fast == want.getvalue(), columns
            else:
                assert fast is None, columns
            got = io.StringIO()
            with contextlib.redirect_stdout(got):
                assert cli.main(["--help"]) == 0
            assert got.getvalue() == want.getvalue(), columns
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


def test_help_without_a_verb_goes_to_stderr_with_exit_2() -> None:
    res = run_cli("--help", env={"COLUMNS": "100"})
    assert res.returncode == 0 and res.stdout.startswith("usage: hwmgr [-h] [--version] VERB")
    assert "collect-script" in res.stdout and res.stdout.endswith("README.md.\n")
    res = run_cli(env={"COLUMNS": "100"})
    assert res.returncode == 2 and res.stdout == "" and res.stderr.startswith("usage: hwmgr")
    res = run_cli("--bogus")  # anything else still goes through argparse
    assert res.returncode == 2 and "unrecognized arguments: --bogus" in res.stderr
