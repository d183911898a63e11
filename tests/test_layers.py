"""Architecture: packages form layers, imports only point down, and nothing imports in a circle.

The order is docs/architecture.md's: a module may import its own package and any package of a
lower layer, never a sibling package of its own layer nor anything above it. Imports inside
functions count too (the few heavy libraries imported only where needed are dependencies all
the same).
"""

from __future__ import annotations

import ast
from pathlib import Path

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


def test_no_verb_imports_another_verb() -> None:
    bad = [f"commands/{path.name}:{line} imports {target}"
           for path in sorted((PKG / "commands").glob("*.py"))
           for line, target in imports(path) if target.startswith("hwmgr.commands")]
    assert not bad, "verbs importing verbs (share code from a lower layer):\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    """Module cycles (inside one package too) by a depth-first search; type-only imports
    (`if TYPE_CHECKING:`) are not runtime edges and may point back."""
    graph: dict[str, set[str]] = {}
    names = {module_name(p) for p in FILES}
    for p in FILES:
        graph[module_name(p)] = {t for _, t in imports(p, runtime=True)
                                 if t in names} - {module_name(p)}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                cycle = stack[stack.index(m):] + [m]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


def test_modules_stay_small() -> None:
    big = {str(p.relative_to(PKG)): n for p in FILES
           if (n := len(p.read_text().splitlines())) > 520}
    assert not big, f"modules over ~500 lines: {big}"
