"""Reads a named test's source (its AST) to say which hwmgr verbs it runs and which exit codes
it asserts: test_verb_codes.py checks each code it delegates to another test that way."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hwmgr import errors

TESTS = Path(__file__).resolve().parent
CODES = {n: getattr(errors, n) for n in dir(errors) if n.startswith("EXIT_")}


@dataclass(frozen=True)
class Claims:
    """What one test function runs and asserts, as its source says."""

    verbs: frozenset[str]  # in the test, its helpers, or as "hwmgr VERB" in its module (lab)
    codes: frozenset[int]
    skips: bool  # calls pytest.skip/xfail itself (a fixture's skip shows in -rs instead)


@cache
def _module(name: str) -> ast.Module:
    return ast.parse((TESTS / name).read_text(), name)


def _words(node: ast.AST) -> set[str]:
    """The first word of every string constant, and the names of the methods called (ns.apply)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.strip():
            words = n.value.split()
            out.add(words[0])  # run_cli("upgrade", ...)
            out |= {w for h, w in zip(words, words[1:]) if h == "hwmgr"}  # "hwmgr upgrade ..."
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            out.add(n.func.attr.replace("_", "-"))
    return out


def _asserted(node: ast.AST, params: dict[str, set[int]]) -> set[int]:
    """Integers (literal, EXIT_*, a module constant or a parametrized argument's values)
    compared in an assert."""
    out: set[int] = set()
    for a in ast.walk(node):
        if not isinstance(a, ast.Assert):
            continue
        for c in ast.walk(a.test):
            if not isinstance(c, ast.Compare):
                continue
            for side in (c.left, *c.comparators):
                for s in ast.walk(side):
                    if isinstance(s, ast.Constant) and type(s.value) is int:
                        out.add(s.value)
                    elif isinstance(s, ast.Name):
                        out |= {CODES[s.id]} if s.id in CODES else params.get(s.id, set())
    return out


def _params(fn: ast.FunctionDef) -> dict[str, set[int]]:
    """argname -> the integers among its @pytest.mark.parametrize values."""
    out: dict[str, set[int]] = {}
    for d in fn.decorator_list:
        if not (isinstance(d, ast.Call) and len(d.args) >= 2
                and isinstance(d.args[0], ast.Constant) and isinstance(d.args[0].value, str)):
            continue
        names = [n.strip() for n in d.args[0].value.split(",")]
        ints = {n.value for n in ast.walk(d.args[1])
                if isinstance(n, ast.Constant) and type(n.value) is int}
        ints |= {CODES[n.id] for n in ast.walk(d.args[1])
                 if isinstance(n, ast.Name) and n.id in CODES}
        for name in names:
            out[name] = ints
    return out


def claims(ref: str) -> Claims:
    """What `FILE.py::test_name` runs and asserts; KeyError when no such test function."""
    name, _, func = ref.partition("::")
    tree = _module(name)
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    consts = {t.id: n for n in tree.body if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name)}  # HWMGR = [..., "throughput"]
    fn = fns[func]
    seen, todo, words = {func}, [fn], set()
    while todo:  # the module's own helpers it calls, and theirs (hw(), verify(), ...)
        node = todo.pop()
        words |= _words(node)
        for c in ast.walk(node):
            if isinstance(c, ast.Name) and c.id in consts:
                words |= _words(consts[c.id])
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) \
                    and c.func.id in fns and c.func.id not in seen:
                seen.add(c.func.id)
                todo.append(fns[c.func.id])
    skips = any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and c.func.attr in ("skip", "xfail") and isinstance(c.func.value, ast.Name)
                and c.func.value.id == "pytest" for c in ast.walk(fn))
    words |= {w for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
              for h, w in zip(n.value.split(), n.value.split()[1:]) if h == "hwmgr"}
    ints = {k: {v.value.value} for k, v in consts.items()
            if isinstance(v.value, ast.Constant) and type(v.value.value) is int}
    return Claims(frozenset(words), frozenset(_asserted(fn, {**ints, **_params(fn)})), skips)
