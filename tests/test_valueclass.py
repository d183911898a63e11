"""hwmgr.valueclass behaves as dataclasses does for what hwmgr's value classes use."""

from __future__ import annotations

import dataclasses

import pytest

from hwmgr import valueclass


def _pair(frozen: bool) -> tuple[type, type]:
    made = []
    for mod in (dataclasses, valueclass):
        @mod.dataclass(frozen=frozen)
        class Thing:
            name: str
            size: int = 3
            tags: list[str] = mod.field(default_factory=list)
            parts: dict[str, str] = mod.field(default_factory=dict, hash=False)

            def label(self) -> str:
                return f"{self.name}:{self.size}"

        made.append(Thing)
    return made[0], made[1]


@pytest.mark.parametrize("frozen", [False, True])
def test_same_init_repr_eq_and_hash(frozen: bool) -> None:
    std, ours = _pair(frozen)
    for args, kwargs in (((), {"name": "a"}), (("a", 5), {}), (("a",), {"tags": ["x"]}),
                         (("a", 1, ["t"], {"k": "v"}), {})):
        a, b = std(*args, **kwargs), ours(*args, **kwargs)
        assert repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1]
        assert a.label() == b.label()
        assert ours(*args, **kwargs) == b and b != ours("other")
        assert (b == a) is False  # another class is never equal
        if frozen:
            # `parts` (hash=False) may hold a dict; the other fields must be hashable
            assert hash(std("a", 1, ("t",), {"k": "v"})) == hash(ours("a", 1, ("t",), {}))
            with pytest.raises(TypeError):
                hash(b)  # a list field: unhashable in both
            with pytest.raises(TypeError):
                hash(a)
            with pytest.raises(AttributeError):
                b.size = 9
        else:
            with pytest.raises(TypeError):
                hash(b)
            b.size = 9
            assert b.size == 9
    assert ours("a").tags is not ours("a").tags  # a fresh default per instance
    assert ours.size == std.size == 3 and not hasattr(ours, "tags")
    for bad_args, bad_kwargs in (((), {}), (("a",), {"nope": 1}), (("a",), {"name": "b"}),
                                 (("a", 1, [], {}, 5), {})):
        with pytest.raises(TypeError):
            std(*bad_args, **bad_kwargs)
        with pytest.raises(TypeError):
            ours(*bad_args, **bad_kwargs)


def test_fields_and_asdict() -> None:
    std, ours = _pair(False)
    assert [f.name for f in valueclass.fields(ours)] == [f.name for f in dataclasses.fields(std)]
    a, b = std("a", tags=["t"]), ours("a", tags=["t"])
    assert valueclass.asdict(b) == dataclasses.asdict(a)
    assert valueclass.asdict(b)["tags"] is not b.tags


def test_the_stdlib_helpers_accept_them() -> None:
    """Code elsewhere calls dataclasses.asdict/replace on these (also nested in a dataclass)."""
    _std, ours = _pair(False)
    b = ours("a", 2, ["t"])
    assert dataclasses.is_dataclass(b)
    assert dataclasses.asdict(b) == {"name": "a", "size": 2, "tags": ["t"], "parts": {}}
    assert dataclasses.replace(b, size=5) == ours("a", 5, ["t"])

    @dataclasses.dataclass
    class Outer:
        inner: object

    assert dataclasses.asdict(Outer(b)) == {"inner": dataclasses.asdict(b)}


def test_start_up_path_does_not_import_dataclasses() -> None:
    """The inventory's modules use valueclass: importing them leaves dataclasses out."""
    import subprocess
    import sys

    code = ("import sys, hwmgr.config, hwmgr.host.snapshot, hwmgr.inventory.scan, "
            "hwmgr.catalog.load, hwmgr.catalog.pciids, hwmgr.commands.inventory; "
            "print('dataclasses' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
