"""The CLI's own behaviour: options around the verb, usage errors, exit codes."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from support import HOSTS, REPO, run_cli

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


def test_top_help_is_argparse_help_of_the_verb_table() -> None:
    """`hwmgr --help` is plain argparse: every verb with its one line from `cli.VERBS`."""
    import contextlib
    import io

    from hwmgr import cli

    got = io.StringIO()
    with contextlib.redirect_stdout(got):
        assert cli.main(["--help"]) == 0
    want = io.StringIO()
    cli.build_parser().print_help(want)
    assert got.getvalue() == want.getvalue()
    sub = next(a for a in cli.build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    assert helps == cli.VERBS


def test_each_verb_runs_from_its_own_module_and_imports_no_other() -> None:
    """The table names real modules (each module's NAME is its key, and no module keeps a
    HELP of its own: the summary has one owner, the table), and a run imports its verb's
    module alone: `vercmp` in a fresh interpreter loads none of the other verbs."""
    from hwmgr import cli

    mods = cli.verb_modules()
    assert [mod.NAME for mod in mods.values()] == list(cli.VERBS)
    assert [name for name, mod in mods.items() if hasattr(mod, "HELP")] == []
    probe = ("import sys; from hwmgr import cli; rc = cli.main(['vercmp', '1', '2']); "
             "print(sorted(m for m in sys.modules if m.startswith('hwmgr.commands.')))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=REPO, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["<", "['hwmgr.commands.vercmp']"]


def test_a_check_imports_no_lifecycle_machinery_and_builds_only_its_own_parser() -> None:
    """`check` runs on every fleet host each night, so it pays for what it reads and no more:
    no DKMS, recipe, build-log or transaction-engine module (the kernel gate's records are
    read through `gaterecord` alone), and argparse builds the `check` sub-parser only
    (each sub-parser costs a locale lookup); `hwmgr --help` still lists every verb."""
    from hwmgr import cli

    probe = ("import io, sys; from hwmgr import cli; out = io.StringIO(); sys.stdout = out; "
             "rc = cli.main(['check', '--json', '--root', 'tests/fixtures/hosts/seed002-after']);"
             " sys.stdout = sys.__stdout__; print(rc); "
             "print(sorted(m for m in sys.modules if m.startswith(('hwmgr.lifecycle.', "
             "'hwmgr.transaction.'))))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=REPO, check=False)
    assert res.returncode == 0, res.stderr
    rc, mods = res.stdout.splitlines()
    assert rc in {"0", "5"}, res.stderr
    assert "hwmgr.lifecycle.gate.gaterecord" in mods and "hwmgr.transaction.state" in mods
    for heavy in ("dkms", "recipe", "buildlog", "kernelgate", "plan", "engine"):
        assert f".{heavy}'" not in mods, (heavy, mods)

    def choices(parser: argparse.ArgumentParser) -> list[str]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return list(sub.choices)

    assert choices(cli.build_parser("check")) == ["check"]
    assert choices(cli.build_parser()) == list(cli.VERBS)


def test_verb_help_shows_its_examples_and_exit_codes() -> None:
    res = run_cli("plan", "--help", env={"COLUMNS": "100"})
    assert res.returncode == 0, res.stderr
    examples = res.stdout.split("\nexamples:\n")[1].split("\nexit codes:\n")
    assert "hwmgr plan upgrade be2net --to 9.9" in examples[0] and "(exit 3)" in examples[0]
    codes = [int(line.split()[0]) for line in examples[1].splitlines() if line.strip()]
    assert codes == [0, 2, 3, 4, 8, 9, 11, 70, 130]


def test_calls_in_one_process_do_not_leak_into_each_other(capsys) -> None:
    from hwmgr import cli

    root = str(HOSTS / "seed002-before")
    assert cli.main(["check", "--json", "--root", root]) == 5
    first = capsys.readouterr().out
    assert cli.main(["vercmp", "1.0", "2.0"]) == 0
    assert capsys.readouterr().out.strip() == "<"
    assert cli.main(["check", "--json", "--root", root]) == 5
    assert capsys.readouterr().out == first


def test_help_without_a_verb_goes_to_stderr_with_exit_2() -> None:
    res = run_cli("--help", env={"COLUMNS": "100"})
    assert res.returncode == 0 and res.stdout.startswith("usage: hwmgr [-h] [--version] VERB")
    assert "collect-script" in res.stdout and "hwmgr VERB --help" in res.stdout
    res = run_cli(env={"COLUMNS": "100"})
    assert res.returncode == 2 and res.stdout == "" and res.stderr.startswith("usage: hwmgr")
    res = run_cli("--bogus")  # anything else still goes through argparse
    assert res.returncode == 2 and "unrecognized arguments: --bogus" in res.stderr


def test_relative_paths_are_resolved_where_the_user_stands(tmp_path: Path) -> None:
    """A documented example run from the directory holding its file, by the file's name:
    the path is made absolute at the CLI edge, before any step changes directory."""
    from hwmgr.cli import absolute_paths

    res = run_cli("check", "--json", "--root", "seed002-before", cwd=HOSTS)
    assert res.returncode == 5, res.stderr
    assert json.loads(res.stdout)["data"]["host"]["hostname"] == "server"
    args = argparse.Namespace(file="igb-5.18.7-1.src.rpm", mirror="https://mirror.example/x",
                              results=[Path("r")], out="-", verb="x")
    old = os.getcwd()
    try:
        os.chdir(tmp_path)
        absolute_paths(args)
    finally:
        os.chdir(old)
    assert args.file == str(tmp_path / "igb-5.18.7-1.src.rpm")
    assert args.mirror == "https://mirror.example/x" and args.out == "-"
    assert args.results == [tmp_path / "r"]
