"""Parsers of tool output on hostile text (issue 25 §2): the RAID tools' (storcli JSON,
MegaCli text), a vendor's dkms.conf and DKMS's build output. Long runs of blank lines,
spaces or dots, lines without the expected terminator, unterminated or deep JSON: each
input is ~100 KB, and a parser that backtracks quadratically on it runs for minutes, which
the module's timeout turns into a failure. The assertions are on what was parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.inventory.raid import ADAPTERS, MegaCli, StorCli
from hwmgr.lifecycle.builds.buildlog import make_command
from hwmgr.lifecycle.builds.dkms import Dkms

pytestmark = pytest.mark.timeout(30)

N = 100_000
MEGACLI = ("Adapter #0\n\n====\nVersions\n                ================\n"
           "Product Name    : PERC H710P Mini\nFW Package Build: 21.3.2-0005\n\n"
           "                    Mfg. Data\nFW Version         : 3.131.05-4520\n")
# (name, text, what MegaCli finds, what storcli finds)
HOSTILE: list[tuple[str, str, list, list]] = [
    ("blank-lines", "\n" * N, [], []),
    ("spaces", " " * N, [], []),
    ("spaces-and-newlines", " \n" * (N // 2), [], []),
    ("adapter-then-blank-lines", "Adapter #0" + "\n" * N, [(None, None)], []),
    ("value-without-end", "Adapter #0\nFW Version : 1" + " " * N + "2",
     [(None, "1" + " " * N + "2")], []),
    ("key-without-value", "Adapter #0\nFW Version :" + " \n" * (N // 2), [(None, None)], []),
    ("colons", "Adapter #0\n" + ":" * N, [(None, None)], []),
    ("many-adapters", "Adapter #1\n" * (N // 11), [(None, None)] * (N // 11), []),
    ("json-unterminated", '{"Controllers": [' + " " * N, [], []),
    ("json-deep", "[" * N, [], []),
    ("json-long-string", '{"Controllers": [{"Response Data": {"Version": {"Firmware Version'
     '": "' + "\\u0020" * (N // 6) + '"}}}]}', [], [(None, " " * (N // 6))]),
]


@pytest.mark.parametrize("name,text,megacli,storcli", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_output_parses_linearly(name: str, text: str, megacli: list,
                                        storcli: list) -> None:
    assert MegaCli().parse(text) == megacli
    assert StorCli().parse(text) == storcli


def test_every_adapter_is_covered() -> None:
    assert {type(a) for a in ADAPTERS} == {MegaCli, StorCli}  # a new adapter: add its cases


def test_a_real_block_after_hostile_text_still_parses() -> None:
    text = "\n" * N + " " * N + "\n" + MEGACLI + "Adapter #1\nFW Package Build: 23.34.0-0019\n"
    assert MegaCli().parse(text) == [(None, "3.131.05-4520"), (None, "23.34.0-0019")]


BUILD = "make -j2 KERNELRELEASE=6.1.0-56-amd64 -C /var/lib/dkms/x/1.0/build modules"
DOTS = "." * (3 * N)  # the old regex took ~1 s at 20,000 dots, growing with the square


@pytest.mark.parametrize("output,command", [
    ("a" + DOTS, ""),
    (BUILD + DOTS + "(bad exit status: 2)", BUILD),
    (BUILD + DOTS + "(bad exit status: 2" + " " * N, ""),
    ("\n" * N + BUILD + "....(bad exit status: 2)\n", BUILD),
    ("Cleaning build area...(bad exit status: 2)\n" + BUILD + ".(bad exit status: 1)", BUILD),
])
def test_dkms_build_output(output: str, command: str) -> None:
    assert make_command(output) == command


def test_hostile_dkms_conf(tmp_path: Path) -> None:
    conf = tmp_path / "usr/src/vend-1.0/dkms.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("\n" * N + " " * N + "\n" + 'BUILT_MODULE_NAME[0]="vend"\n'
                    + "\n" * N + 'DEST_MODULE_LOCATION[0]="/kernel/drivers/net"\n'
                    + 'DEST_MODULE_LOCATION[1]="/' + "a" * N + '"x\n')
    dkms = Dkms(Host(tmp_path, SubprocessRunner()))
    assert dkms.modules_of("vend", "1.0") == ["vend"]
    assert dkms.dest_locations("vend", "1.0")[0] == "/kernel/drivers/net"
    assert not any(loc.startswith("/aaa") for loc in dkms.dest_locations("vend", "1.0"))


# ---------------------------------------------------------------- storcli members' types
STORCLI_DOC = {"Controllers": [{"Command Status": {"Status": "Success"}, "Response Data": {
    "Basics": {"Controller": 0, "PCI Address": "00:03:00:00"},
    "Version": {"Firmware Version": "4.680.00-8290"}}}]}
WRONG = [0, 7, -1, 10 ** 30, 1.5, True, False, None, "", "ab\x1bc", "x" * 5000, [], [1, "a"],
         [[]], {}, {"a": 1}]


def _paths(node: object, path: tuple = ()) -> list[tuple]:
    """Every member and list element path of a JSON document, the root's members first."""
    out: list[tuple] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, child in items:
        out.append(path + (key,))
        out += _paths(child, path + (key,))
    return out


def _replaced(doc: object, path: tuple, value: object) -> object:
    import copy

    new = copy.deepcopy(doc)
    node = new
    for key in path[:-1]:
        node = node[key]  # type: ignore[index]
    node[path[-1]] = value  # type: ignore[index]
    return new


STORCLI_VARIANTS = [(path, value) for path in _paths(STORCLI_DOC) for value in WRONG]


def test_storcli_member_of_every_wrong_type_is_not_reported() -> None:
    """Each member of a real storcli answer replaced by each wrong type: parse never raises,
    finds at most the one controller, and reports only what is still a well-typed string."""
    import json

    assert StorCli().parse(json.dumps(STORCLI_DOC)) == [("0000:03:00.0", "4.680.00-8290")]
    assert len(STORCLI_VARIANTS) > 150
    for path, value in STORCLI_VARIANTS + [((), v) for v in WRONG]:
        doc = _replaced(STORCLI_DOC, path, value) if path else value
        found = StorCli().parse(json.dumps(doc))
        assert len(found) <= 1, (path, value, found[:3])
        for addr, fw in found:
            assert addr in (None, "0000:03:00.0"), (path, value, addr)
            assert fw is None or fw == "4.680.00-8290" or fw == value, (path, value, fw)


@pytest.mark.parametrize("value", [7, "abc", {"a": 1}, None, [1, 2, 3], True],
                         ids=lambda v: type(v).__name__)
def test_storcli_controllers_of_the_wrong_type_through_inventory(value: object,
                                                                tmp_path: Path) -> None:
    import json
    import shutil

    from support import HOSTS, run_cli

    snap = tmp_path / "snap"
    shutil.copytree(HOSTS / "seed000-ustor", snap, symlinks=True)
    index = json.loads((snap / "commands/index.json").read_text())
    (snap / "commands/storcli.txt").write_text(json.dumps({"Controllers": value}))
    index.append({"argv": ["storcli64", "/call", "show", "J"], "rc": 0,
                  "stdout": "commands/storcli.txt"})
    (snap / "commands/index.json").write_text(json.dumps(index))
    res = run_cli("inventory", "--json", "--root", str(snap))
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and not res.stderr.strip()
    assert json.loads(res.stdout)["status"] == "ok"
