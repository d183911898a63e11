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
