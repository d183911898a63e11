"""Conformance: nothing outside the host seam spawns processes or opens host paths.

The seam is the hwmgr/host/ package: seam.py (paths), runner.py (commands), snapshots. A few
modules open files that are the *tool's own* (names database, catalog and recipe files, the
state/cache dirs the caller resolved through Host.path): they are listed with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hwmgr import cli

PKG = Path(__file__).resolve().parent.parent / "hwmgr"
SEAM = {"host/seam.py", "host/runner.py"}
SPAWN_MODULES = {"subprocess", "pty", "pexpect"}
SPAWN_CALLS = {"system", "popen", "fork", "forkpty", "execv", "execve", "execvp", "execvpe",
               "execl", "execle", "execlp", "spawnv", "spawnl", "posix_spawn", "posix_spawnp"}
FILE_CALLS = {"open", "listdir", "scandir", "readlink", "walk"}
HOST_PREFIXES = ("/sys", "/proc", "/dev", "/lib/modules", "/etc", "/boot", "/var", "/usr/src")
# module -> why it may open files itself (paths never come from a hard-coded host path)
OWN_FILES = {
    "catalog/pciids.py": "reads the analysing machine's pci.ids name database",
    "catalog/versions.py": "reads its own schemes.json (package data)",
    "catalog/load.py": "reads catalog files and its validation cache",
    "catalog/index.py": "reads and writes its compiled catalog index in the cache dir",
    "lifecycle/recipe.py": "reads drivers/<name>/ recipe files",
    "catalog/validate.py": "reads the catalog files the user named (regular files only)",
    "lifecycle/fetch.py": "writes the download cache dir the caller resolved via Host.path",
    "lifecycle/cache.py": "download cache files under the dir resolved via Host.path",
    "transaction/state.py": "opens the journal/lock under the state dir resolved via Host.path",
    "transaction/lock.py": "opens the lock file under the state dir resolved via Host.path",
    "lifecycle/srpm.py": "inspects the downloaded SRPM's tarball in a private work dir",
    "lifecycle/dkms.py": "renders dkms.conf into a tree resolved via Host.path",
    "transaction/engine.py": "journal and backups under the state dir resolved via Host.path",
    "lifecycle/package.py": "packs the unpacked SRPM tree from its work dir under the cache dir",
    "fleet/report.py": "reads the per-host result and history files the user named",
    "fleet/write.py": "writes the report files into the --out directory the user named",
}


def modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py")
                  if _rel(p) not in SEAM and not _rel(p).startswith("host/"))


def _rel(path: Path) -> str:
    return path.relative_to(PKG).as_posix()


def _attr_chain(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _literal_prefix(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_process_spawning_outside_runner(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0]]
        else:
            names = []
        bad = SPAWN_MODULES.intersection(names)
        assert not bad, f"{path.name}:{node.lineno} imports {bad}: use Host.run"
        if isinstance(node, ast.Call):
            chain = _attr_chain(node.func)
            assert not (chain.startswith("os.") and chain[3:] in SPAWN_CALLS), (
                f"{path.name}:{node.lineno} calls {chain}: use Host.run"
            )


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_host_paths_opened_outside_host(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain = _attr_chain(node.func)
        leaf = chain.rsplit(".", 1)[-1]
        receiver = chain.rsplit(".", 1)[0] if "." in chain else ""
        if receiver.endswith("host"):
            continue  # host.read_text("/etc/...") is the seam itself
        is_file_call = chain in ("open", "io.open") or (
            chain.startswith(("os.", "os.path.")) and leaf in FILE_CALLS | {"stat", "lstat"}
        ) or leaf in ("read_text", "read_bytes", "write_text", "write_bytes", "iterdir")
        if chain == "Path" or chain.endswith(".Path"):
            prefix = _literal_prefix(node.args[0]) if node.args else None
            assert not (prefix and prefix.startswith(HOST_PREFIXES)), (
                f"{path.name}:{node.lineno} builds Path({prefix!r}): use Host.path/read_attr"
            )
        if not is_file_call:
            continue
        if node.args:
            prefix = _literal_prefix(node.args[0])
            assert not (prefix and prefix.startswith(HOST_PREFIXES)), (
                f"{path.name}:{node.lineno} opens host path {prefix!r}: go through Host"
            )
        if chain in ("open", "io.open", "os.open", "os.listdir", "os.scandir", "os.walk"):
            assert _rel(path) in OWN_FILES, (
                f"{path.name}:{node.lineno} calls {chain}() outside the seam; go through Host "
                "or add the module to OWN_FILES with a reason"
            )


@pytest.mark.parametrize("verb", list(cli.VERBS))
def test_every_verb_has_help_with_examples(verb: str, capsys: pytest.CaptureFixture) -> None:
    rc = cli.main([verb, "--help"])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"hwmgr {verb}" in out and "examples:" in out
