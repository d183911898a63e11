"""The one symlink walk (hwmgr/host/links.py): chroot semantics for reads, refusal for
writes and archives, a bounded number of links, on real trees and on an archive's table."""

from __future__ import annotations

import os

import pytest

from hwmgr.host.links import MAX_FOLLOWS, Escape, disk_links, table_links, walk


@pytest.fixture
def tree(tmp_path):
    """root/a/b (dir), rel -> a/b, up -> ../.., abs -> /a, out -> ../../etc, self -> self."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.symlink("a/b", tmp_path / "rel")
    os.symlink("../..", tmp_path / "a" / "up")
    os.symlink("/a", tmp_path / "abs")
    os.symlink("self", tmp_path / "self")
    return tmp_path


def test_plain_and_relative_links(tree):
    t = disk_links(str(tree))
    assert walk(["a", "b"], t, reroot=False) == ["a", "b"]
    assert walk(["rel", "c"], t, reroot=False) == ["a", "b", "c"]
    assert walk(["a", ".", "", "b", ".."], t, reroot=False) == ["a"]


def test_reroot_keeps_climbs_and_absolute_targets_inside(tree):
    t = disk_links(str(tree))
    assert walk(["a", "up", "a"], t, reroot=True) == ["a"]  # ../.. from a/ stops at the root
    assert walk(["..", "..", "a"], t, reroot=True) == ["a"]
    assert walk(["abs", "b"], t, reroot=True) == ["a", "b"]  # /a means root/a


def test_refusals_name_the_link(tree):
    t = disk_links(str(tree))
    with pytest.raises(Escape) as got:
        walk(["abs", "b"], t, reroot=False)
    assert (got.value.why, got.value.link, got.value.target) == ("absolute", "abs", "/a")
    with pytest.raises(Escape) as got:
        walk(["a", "up", "x"], t, reroot=False)
    assert got.value.why == "climb"


@pytest.mark.parametrize("reroot", [True, False])
def test_loops_end(tree, reroot):
    with pytest.raises(Escape) as got:
        walk(["self"], disk_links(str(tree)), reroot=reroot)
    assert (got.value.why, got.value.link) == ("loop", "self")


def test_exactly_the_limit_of_links_is_followed(tree):
    for i in range(MAX_FOLLOWS):
        os.symlink(f"l{i + 1}", tree / f"l{i}")
    os.symlink("a", tree / f"l{MAX_FOLLOWS}")
    assert walk(["l1"], disk_links(str(tree)), reroot=False) == ["a"]  # 40 links
    with pytest.raises(Escape):
        walk(["l0"], disk_links(str(tree)), reroot=False)  # 41


def test_unreadable_parts_raise_oserror(tree):
    (tree / "file").write_text("x")
    assert walk(["file", "x"], disk_links(str(tree)), reroot=True) == ["file", "x"]
    with pytest.raises(OSError):
        walk(["a", "x"], lambda done, comp: os.readlink(tree / comp), reroot=True)


def test_archive_table():
    links = {"src/cur": "v2", "src/v2/up": "../../..", "src/abs": "/etc"}
    t = table_links(links)
    assert walk(["src", "cur", "f.c"], t, reroot=False) == ["src", "v2", "f.c"]
    for bad in (["src", "v2", "up", "x"], ["src", "abs"]):
        with pytest.raises(Escape):
            walk(bad, t, reroot=False)
