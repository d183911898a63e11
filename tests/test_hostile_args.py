"""Control characters in every string argument of every verb (issue 41 §6): `throughput
--peer $'\\e[2J'` printed the peer raw. Each verb's sub-parser is read for its string options
and positionals; one run per verb (and per choice of a positional that takes choices) passes
ESC, BEL, CR and a C1 CSI in all of them at once, as text and as --json, with the state,
cache and working directory in a scratch dir and no --yes: nothing may print a raw control
character, exit 70 or show a traceback."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from support import run_cli

from hwmgr import cli

HOSTILE = "x\x1b[2J\x07\r\u009b31m"
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
SKIP_TYPES = (int, float)


def _strings(p: argparse.ArgumentParser) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """A parser's string options, its plain positionals, and its sub-actions by name."""
    options: list[str] = []
    positionals: list[str] = []
    subs: dict[str, list[str]] = {}
    for act in p._actions:
        if isinstance(act, argparse._SubParsersAction):
            subs = {name: [] for name in act.choices}
            continue
        if isinstance(act, (argparse._HelpAction, argparse._VersionAction,
                            argparse._StoreConstAction, argparse._CountAction)) or \
                act.nargs == 0 or act.dest in ("debug", "json", "yes"):
            continue
        if act.type in SKIP_TYPES or (act.type is not None and act.type is not str):
            continue
        if act.choices:  # a choice is hwmgr's own word: the first is passed as it is
            if not act.option_strings:
                positionals.append(str(list(act.choices)[0]))
            continue
        if act.option_strings:
            options.append(act.option_strings[0])
        else:
            positionals.append(HOSTILE)
    return options, positionals, subs


def _argvs(verb: str) -> list[list[str]]:
    """Per string argument of the verb (and of each sub-action), one command line with
    HOSTILE in that argument alone, so each reaches whatever prints it."""
    parser = cli.build_parser(verb)
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options, positionals, subs = _strings(top.choices[verb])
    out: list[list[str]] = []
    heads: list[tuple[list[str], list[str], list[str]]] = [([], positionals, options)]
    if subs:
        sub_act = next(a for a in top.choices[verb]._actions
                       if isinstance(a, argparse._SubParsersAction))
        heads = []
        for name, sp in sub_act.choices.items():
            o, pos, _ = _strings(sp)
            heads.append(([name], pos, o + options))
    for head, pos, opts in heads:
        out.append([verb, *head, *pos])
        out += [[verb, *head, *pos, opt, HOSTILE] for opt in opts]
    return [list(a) for a in dict.fromkeys(tuple(a) for a in out)]


CASES = [(argv, js) for verb in cli.VERBS for argv in _argvs(verb) for js in (False, True)]


@pytest.mark.slow
@pytest.mark.parametrize("argv,js", CASES, ids=[
    " ".join(x if x != HOSTILE else "ESC" for x in a) + (" json" if j else "") for a, j in CASES])
def test_no_raw_control_character_reaches_the_terminal(argv: list[str], js: bool,
                                                       tmp_path: Path) -> None:
    env = {"HWMGR_STATE_DIR": str(tmp_path / "state"), "HWMGR_CACHE_DIR": str(tmp_path / "c"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg"), "HWMGR_CONFIG": "", "COLUMNS": "120",
           "HWMGR_TRUSTED_KEYS_DIR": str(tmp_path / "keys")}
    args = [*argv, "--json"] if js else argv
    res = run_cli(*args, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode != 70, res.stderr[-400:]
    assert "Traceback" not in res.stdout + res.stderr
    for name, text in (("stderr", res.stderr), ("stdout", "" if js else res.stdout)):
        hit = RAW.search(text)
        assert hit is None, f"raw {hit.group()!r} on {name}: {text[max(0, hit.start() - 80):hit.end() + 40]!r}"  # type: ignore[union-attr]  # noqa: E501


def test_every_verb_has_a_case() -> None:
    assert {a[0] for a, _ in CASES} == set(cli.VERBS)
    assert any("--peer" in a for a, _ in CASES)
