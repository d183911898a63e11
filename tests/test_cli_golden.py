"""The CLI's outputs (inventory and check, text and JSON) on every fixture host are
byte-identical to the recorded ones (tests/support/golden.py re-records after an intended
change): the guard for refactors that must not change behaviour."""

from __future__ import annotations

import pytest
from support.golden import FAST_GROUPS, SLOW_GROUPS, VIEWS, hosts, path_for, render

CASES = [(g, root, suffix, args) for g in (*FAST_GROUPS, *SLOW_GROUPS) for root in hosts(g)
         for suffix, args in VIEWS]


@pytest.mark.parametrize(
    "group,root,suffix,args",
    [pytest.param(*c, marks=() if c[0] in FAST_GROUPS else pytest.mark.slow,
                  id=f"{c[0]}/{path_for(*c[:3]).name}") for c in CASES])
def test_output_unchanged(group, root, suffix, args) -> None:
    want = path_for(group, root, suffix)
    assert want.is_file(), f"{want} not recorded: run `cd tests && python -m support.golden`"
    assert render(root, args) == want.read_text(), \
        f"{' '.join(args)} --root {root} changed; if intended, re-record and review the diff"
