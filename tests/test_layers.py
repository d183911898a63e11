"""Architecture: packages form layers, imports only point down, and nothing imports in a circle.

The order is docs/architecture.md's: a module may import its own package and any package of a
lower layer, never a sibling package of its own layer nor anything above it. Imports inside
functions count too (the few heavy libraries imported only where needed are dependencies all
the same).
"""

from __future__ import annotations

import ast
from pathlib import Path

from hwmgr.cli import VERBS

PKG = Path(__file__).resolve().parent.parent / "hwmgr"

# lowest first; every hwmgr package or top-level module must be listed
LAYERS: list[set[str]] = [
    {"urls"},
    {"errors", "output", "__init__"},
    {"safejson", "numtext"},
    {"host"},
    {"config"},
    {"catalog", "transaction"},
    {"inventory"},
    {"lifecycle", "compliance", "fleet"},
    {"verify"},
    {"ui"},
    {"commands"},
    {"cli"},
    {"__main__"},
]
LEVEL = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    """'hwmgr.host.seam' -> 'host'; 'hwmgr.cli' -> 'cli'; 'hwmgr' -> '__init__'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (annotations only, no runtime edge)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            ids |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return ids


def imports(path: Path, runtime: bool = False) -> list[tuple[int, str]]:
    """(line, imported hwmgr module) for every import in the file, at any depth; with
    `runtime`, leaving out the type-only imports under `if TYPE_CHECKING:`."""
    out = []
    tree = ast.parse(path.read_text())
    skip = _type_only(tree) if runtime else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("hwmgr")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "hwmgr" or node.module.startswith("hwmgr.")):
            if node.module == "hwmgr":  # from hwmgr import cli  /  __version__
                out += [(node.lineno, f"hwmgr.{a.name}" if a.name != "__version__" else "hwmgr")
                        for a in node.names]
            else:  # `from hwmgr.catalog import load` depends on the module hwmgr.catalog.load
                subs = [f"{node.module}.{a.name}" for a in node.names
                        if (PKG.parent / f"{node.module}.{a.name}".replace(".", "/")).with_suffix(
                            ".py").is_file()]
                out += [(node.lineno, m) for m in subs] or [(node.lineno, node.module)]
    return out


FILES = sorted(PKG.rglob("*.py"))


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(module_name(p)) for p in FILES}
    assert units <= set(LEVEL), f"add to LAYERS: {sorted(units - set(LEVEL))}"


def test_imports_point_down() -> None:
    """Every upward or sideways import in the package, all reported at once."""
    bad = []
    for path in FILES:
        me = unit_of(module_name(path))
        for line, target in imports(path):
            other = unit_of(target)
            if other != me and LEVEL[other] >= LEVEL[me]:
                bad.append(f"{path.relative_to(PKG)}:{line} imports {target} (layer "
                           f"{LEVEL[other]} '{other}' is not below layer {LEVEL[me]} '{me}')")
    assert not bad, "imports that do not point down:\n" + "\n".join(bad)


# Rooms inside a package, lowest first: a module may import its own room and lower ones, never
# a higher one. A room is a subpackage or a set of the package's own modules; "" is the package's
# own modules not named in another room; the package's face (its __init__) is below every room.
ROOMS: dict[str, list[set[str]]] = {
    # sources are fetched and verified, builds use them, the plan room runs both as steps,
    # and the kernel gate reads the plan room's records to rebuild for a new kernel
    "lifecycle": [{"source"}, {"builds"}, {""}, {"gate"}],
    # readers and setters, then the persistence backends that use them, then apply and check
    "compliance": [{"items", "ethtool", "iplink", "sysctl", "fixes", "read", "setters"},
                   {"persist"}, {""}],
}


def room_of(module: str) -> tuple[str, int] | None:
    """('lifecycle', 1) for hwmgr.lifecycle.builds.dkms; None outside a package with rooms or
    for the package's face, which every room may import."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in ROOMS:
        return None
    rooms = ROOMS[parts[1]]
    named = set().union(*rooms)
    room = parts[2] if parts[2] in named else ""
    return parts[1], next(i for i, r in enumerate(rooms) if room in r)


def test_rooms_point_down() -> None:
    """Inside lifecycle/ and compliance/, imports point to the own room or a lower one."""
    bad = []
    for path in FILES:
        me = room_of(module_name(path))
        for line, target in imports(path) if me else ():
            other = room_of(target)
            if other and other[0] == me[0] and other[1] > me[1]:
                bad.append(f"{path.relative_to(PKG)}:{line} imports {target} (room {other[1]} "
                           f"of {me[0]}/ is above room {me[1]})")
    assert not bad, "imports that climb a room:\n" + "\n".join(bad)


def test_every_room_exists() -> None:
    """A room named in ROOMS is a subpackage or module that exists (renames keep this true)."""
    missing = [f"{pkg}/{room}" for pkg, rooms in ROOMS.items() for r in rooms for room in r
               if room and not (PKG / pkg / room).is_dir()
               and not (PKG / pkg / f"{room}.py").is_file()]
    assert not missing, f"rooms that do not exist: {missing}"


def test_no_verb_imports_another_verb() -> None:
    """A verb imports no other verb; a verb's own parts (commands/VERB_PART.py, not a verb
    themselves: catalog_trust for catalog's trust/update/rollback/sign) only its own."""
    verbs = {name.replace("-", "_") for name in VERBS}

    def verb_of(stem: str) -> str:
        return stem if stem in verbs else stem.split("_")[0]

    mods = {p.stem for p in (PKG / "commands").glob("*.py")} - {"__init__"}
    orphans = [m for m in sorted(mods) if verb_of(m) not in verbs]
    assert not orphans, f"modules in commands/ that are neither a verb nor a verb's part: {orphans}"
    bad = [f"commands/{path.name}:{line} imports {target}"
           for path in sorted((PKG / "commands").glob("*.py"))
           for line, target in imports(path) if target.startswith("hwmgr.commands")
           and (target.split(".")[-1] in verbs
                or verb_of(target.split(".")[-1]) != verb_of(path.stem))]
    assert not bad, "verbs importing verbs (share code from a lower layer):\n" + "\n".join(bad)


def test_modules_stay_small() -> None:
    big = {str(p.relative_to(PKG)): n for p in FILES
           if (n := len(p.read_text().splitlines())) > 520}
    assert not big, f"modules over ~500 lines: {big}"
