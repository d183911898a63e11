"""One walk through symlinks inside a root, for every place that resolves paths itself.

Reads of a snapshot re-root what they meet (chroot semantics: `..` stops at the root, an
absolute target starts again there), while writes and a source archive's members refuse it.
The walk and its limit live here once; each caller says where link targets come from
(`os.readlink` under a real root, or an archive's member table) and what an escape means.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Optional

# (the components walked so far, the link's name) -> the link's target, or None: not a link
TargetOf = Callable[[list[str], str], Optional[str]]

MAX_FOLLOWS = 40  # as the kernel's own limit (MAXSYMLINKS)


class Escape(Exception):
    """Why a walk stopped: `why` is 'climb' (`..` above the root), 'absolute' (a link to an
    absolute path) or 'loop' (more than MAX_FOLLOWS links); `link` is the symlink's path
    relative to the root and `target` its text, where a symlink was the cause."""

    def __init__(self, why: str, link: str = "", target: str = "") -> None:
        super().__init__(why)
        self.why, self.link, self.target = why, link, target


def walk(parts: Iterable[str], target_of: TargetOf, *, reroot: bool) -> list[str]:
    """The components of `parts` with every symlink followed; `target_of(done, name)` gives
    the target text of `done/name`, or None when it is not a link (it may raise OSError).

    reroot=True: `..` at the root stays there and an absolute target restarts at the root;
    reroot=False: both raise Escape. More than MAX_FOLLOWS links always raise Escape.
    """
    pending = [p for p in parts if p not in ("", ".")][::-1]
    done: list[str] = []
    follows = 0
    while pending:
        comp = pending.pop()
        if comp in ("", "."):
            continue
        if comp == "..":
            if done:
                done.pop()
            elif not reroot:
                raise Escape("climb")
            continue
        target = target_of(done, comp)
        if target is None:
            done.append(comp)
            continue
        follows += 1
        if follows > MAX_FOLLOWS:
            raise Escape("loop", "/".join([*done, comp]), target)
        if target.startswith("/"):
            if not reroot:
                raise Escape("absolute", "/".join([*done, comp]), target)
            done = []
        pending.extend(target.split("/")[::-1])
    return done


def disk_links(root: str) -> TargetOf:
    """`target_of` for a real directory tree: lstat, then readlink, under `root`."""

    def target_of(done: list[str], comp: str) -> str | None:
        cand = os.path.join(root, *done, comp)
        return os.readlink(cand) if os.path.islink(cand) else None

    return target_of


def table_links(links: dict[str, str]) -> TargetOf:
    """`target_of` for an archive: its symlink members, keyed by '/'-joined path."""
    return lambda done, comp: links.get("/".join([*done, comp]))
