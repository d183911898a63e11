"""Conformance: nothing outside the host seam spawns processes, opens host paths or writes.

The seam is hwmgr/host/seam.py (paths, reads), hwmgr/host/writes.py (every write, confined)
and hwmgr/host/runner.py (commands). A few modules read files that are the *tool's own*
(names database, catalog and recipe files, work trees and the cache): they are listed with
the reason. Writes have no such licence: the few modules that still write by themselves are
listed in WRITES_PENDING as debts, and the list shrinks to nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hwmgr import cli

PKG = Path(__file__).resolve().parent.parent / "hwmgr"
SEAM = {"host/seam.py", "host/writes.py", "host/runner.py"}
SPAWN_MODULES = {"subprocess", "pty", "pexpect"}
SPAWN_CALLS = {"system", "popen", "fork", "forkpty", "execv", "execve", "execvp", "execvpe",
               "execl", "execle", "execlp", "spawnv", "spawnl", "posix_spawn", "posix_spawnp"}
FILE_CALLS = {"open", "listdir", "scandir", "readlink", "walk"}
HOST_PREFIXES = ("/sys", "/proc", "/dev", "/lib/modules", "/etc", "/boot", "/var", "/usr/src")
# module -> why it may open files itself (paths never come from a hard-coded host path)
OWN_FILES = {
    "catalog/pciids.py": "reads the analysing machine's pci.ids name database",
    "catalog/versions.py": "reads its own schemes.json (package data)",
    "catalog/load.py": "reads catalog files",
    "lifecycle/builds/recipe.py": "reads drivers/<name>/ recipe files",
    "host/snapshot.py": "writes/extracts snapshot archives the user named",
    "lifecycle/source/cache.py": "hashes cache files it verifies; flocks the cache dir while "
                                 "fetching",
    "transaction/state.py": "opens the journal/lock under the state dir resolved via Host.path",
    "lifecycle/builds/dkms.py": "hashes the .ko files DKMS built, to compare with the installed "
                               "ones",
    "transaction/engine.py": "journal and backups under the state dir resolved via Host.path",
    "lifecycle/builds/package.py": "reads the unpacked SRPM tree in its work dir to pack it",
    "catalog/validate.py": "reads the catalog files the user named (regular files only)",
    "fleet/report.py": "reads the per-host result and history files the user named",
    "fleet/stream.py": "reads the many-hosts results file the user named, a host at a time",
    "commands/apply.py": "reads the --changes file the user named (a check result or list)",
    "safejson.py": "reads the JSON files the user named (--changes, fleet results, --history)",
}
# module -> why it still writes without the Host. Each entry is a debt: delete it when the
# module moves onto Host.write_bytes/makedirs/copy_*/replace/journal_connect/open_lock.
WRITES_PENDING = {
    "host/snapshot.py": "the seam package's own capture writer: writes the snapshot the user "
                        "named; moves onto Host writes once they can make symlinks",
}
# who may widen where a live Host writes: the run's dirs (the run's context, ui/context.py,
# built by cli; a StateDir its own path),
# the user's --out (package, fleet-report, mirror sync) and rollout record, the catalog
# layers' and the catalog cache's dirs (catalog trust/update, the remembered schema verdicts)
WIDENERS = {"allow_writes": {"ui/context.py", "transaction/state.py", "compliance/steps.py"},
            "writable": {"lifecycle/builds/package.py",
                         "fleet/write.py", "lifecycle/source/mirror.py",
                         "commands/catalog_trust.py", "catalog/schema.py", "fleet/rollout.py"}}
SHUTIL_WRITES = {"copy", "copy2", "copyfile", "copytree", "copymode", "copystat", "move",
                 "rmtree", "chown", "make_archive", "unpack_archive"}
OS_WRITES = {"rename", "renames", "replace", "remove", "unlink", "rmdir", "removedirs", "chmod",
             "chown", "lchown", "symlink", "link", "makedirs", "mkdir", "mkfifo", "mknod",
             "truncate", "utime"}
OS_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}
PATH_WRITES = {"write_text", "write_bytes", "mkdir", "unlink", "rmdir", "touch", "symlink_to",
               "hardlink_to", "link_to"}
PATH_WRITES_ONE_ARG = {"rename", "replace", "chmod"}  # str.replace takes two arguments
TEMPFILE_WRITES = {"mkdtemp", "mkstemp", "NamedTemporaryFile", "TemporaryDirectory"}


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


def spawn_violations(source: str, where: str) -> list[str]:
    """Process spawning in a module (imports of subprocess & co, os.system/exec*/spawn*)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0]]
        else:
            names = []
        spawners = SPAWN_MODULES.intersection(names)
        if spawners:
            bad.append(f"{where}:{node.lineno} imports {sorted(spawners)}: use Host.run")
        if isinstance(node, ast.Call):
            chain = _attr_chain(node.func)
            if chain.startswith("os.") and chain[3:] in SPAWN_CALLS:
                bad.append(f"{where}:{node.lineno} calls {chain}: use Host.run")
    return bad


def host_path_violations(source: str, where: str) -> list[str]:
    """Host paths a module opens or builds itself, and file opens by a module (`where`,
    relative to hwmgr/) that has no OWN_FILES licence."""
    bad = []
    for node in ast.walk(ast.parse(source)):
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
            if prefix and prefix.startswith(HOST_PREFIXES):
                bad.append(f"{where}:{node.lineno} builds Path({prefix!r}): "
                           "use Host.path/read_attr")
        if not is_file_call:
            continue
        if node.args:
            prefix = _literal_prefix(node.args[0])
            if prefix and prefix.startswith(HOST_PREFIXES):
                bad.append(f"{where}:{node.lineno} opens host path {prefix!r}: go through Host")
        if chain in ("open", "io.open", "os.open", "os.listdir", "os.scandir", "os.walk") and (
                where not in OWN_FILES):
            bad.append(f"{where}:{node.lineno} calls {chain}() outside the seam; go through "
                       "Host or add the module to OWN_FILES with a reason")
    return bad


def test_no_process_spawning_outside_runner() -> None:
    bad = [v for path in modules() for v in spawn_violations(path.read_text(), _rel(path))]
    assert not bad, "processes spawned outside the runner:\n" + "\n".join(bad)


def test_no_host_paths_opened_outside_host() -> None:
    bad = [v for path in modules()
           for v in host_path_violations(path.read_text(), _rel(path))]
    assert not bad, "host paths opened outside the seam:\n" + "\n".join(bad)


def test_spawn_and_open_detectors_catch_each_kind() -> None:
    """The two checks above see what they look for (a check that cannot fail is a defect)."""
    assert spawn_violations("import subprocess\nimport os\nos.system('x')\n", "m.py") == [
        "m.py:1 imports ['subprocess']: use Host.run", "m.py:3 calls os.system: use Host.run"]
    got = host_path_violations(
        "from pathlib import Path\nPath('/sys/bus/pci')\nopen('/proc/x')\n", "m.py")
    assert len(got) == 3 and "m.py:2 builds Path('/sys/bus/pci')" in got[0], got
    assert "m.py:3 opens host path '/proc/x'" in got[1] and "outside the seam" in got[2], got
    assert host_path_violations("open(p)\nhost.read_text('/etc/x')\n",
                                "lifecycle/builds/recipe.py") == []


def _mode_arg(node: ast.Call, position: int) -> str | None:
    """The literal mode of an open()-like call (positional or `mode=`), if it is a literal."""
    if len(node.args) > position:
        return _literal_prefix(node.args[position])
    for kw in node.keywords:
        if kw.arg == "mode":
            return _literal_prefix(kw.value)
    return None


def write_violations(source: str) -> list[str]:
    """Every write the module makes without the Host, as 'line: what (use instead)'."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in ("shutil", "sqlite3", "os"):
            names = {a.name for a in node.names}
            bad = names & (SHUTIL_WRITES | OS_WRITES | {"connect"})
            if bad:
                found.append((node.lineno, f"from {node.module} import {sorted(bad)}"))
        if not isinstance(node, ast.Call):
            continue
        chain = _attr_chain(node.func)
        leaf = chain.rsplit(".", 1)[-1]
        receiver = chain.rsplit(".", 1)[0] if "." in chain else ""
        method = isinstance(node.func, ast.Attribute)  # p.x(), Path(a).x(), self.tmp.x()
        hosted = receiver.endswith("host")
        what = None
        if chain.startswith("shutil.") and leaf in SHUTIL_WRITES:
            what = f"{chain}() (Host.copy_in/copy_tree/remove_tree)"
        elif chain.startswith("os.") and chain.count(".") == 1 and leaf in OS_WRITES:
            what = f"{chain}() (Host.replace/remove/makedirs/chmod)"
        elif chain == "os.open" and any(
                isinstance(n, ast.Attribute) and n.attr in OS_WRITE_FLAGS
                for a in node.args[1:2] for n in ast.walk(a)):
            what = "os.open() for writing (Host.open_atomic/open_resumable/open_lock)"
        elif chain in ("open", "io.open") and set(_mode_arg(node, 1) or "") & set("wax+"):
            what = f"{chain}() for writing (Host.open_atomic/write_bytes)"
        elif chain.startswith("tempfile.") and leaf in TEMPFILE_WRITES:
            what = f"{chain}() (Host.make_temp_dir)"
        elif chain == "sqlite3.connect":
            what = "sqlite3.connect() (Host.journal_connect)"
        elif leaf in ("extract", "extractall") and method and not hosted:
            what = f"{chain}() of an archive (Host.extract_tar)"
        elif chain == "tarfile.open" and node.args and set(
                (_mode_arg(node, 1) or "r")[:1]) & set("wax"):
            what = "tarfile.open() of a path for writing (Host.open_atomic as fileobj)"
        elif method and not hosted and (
                leaf in PATH_WRITES
                or (leaf in PATH_WRITES_ONE_ARG and len(node.args) == 1 and not node.keywords)):
            what = f"{chain}() (a Path write: Host.write_bytes/makedirs/remove/replace)"
        if what:
            found.append((node.lineno, what))
    return [f"{line}: {what}" for line, what in sorted(found)]


def widenings(source: str) -> list[tuple[int, str]]:
    """(line, how) for each call that widens where a live Host may write."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            chain = _attr_chain(node.func)
            if chain.endswith(".allow_writes"):
                out.append((node.lineno, "allow_writes"))
            if chain.endswith("Host") and any(k.arg == "writable" for k in node.keywords):
                out.append((node.lineno, "writable"))
    return out


def test_no_writes_outside_the_seam() -> None:
    bad = []
    for path in modules():
        found = write_violations(path.read_text())
        rel = _rel(path)
        if rel in WRITES_PENDING:
            if not found:
                bad.append(f"{rel} no longer writes by itself: delete its WRITES_PENDING entry")
        elif found:
            bad += [f"{rel}:{v}" for v in found]
    assert not bad, "writes without the Host:\n" + "\n".join(bad)


def test_only_the_run_widens_live_writes() -> None:
    bad = [f"{_rel(path)}:{line} widens the live Host's writable dirs ({how}); only "
           f"{sorted(WIDENERS[how])} may"
           for path in modules() for line, how in widenings(path.read_text())
           if _rel(path) not in WIDENERS[how]]
    assert not bad, "\n".join(bad)


def test_write_detector_catches_each_kind() -> None:
    """The conformance check itself: every kind of write is seen, the Host's own are not."""
    bad = {
        "shutil.rmtree(p)": "shutil.rmtree",
        "shutil.copytree(a, b, symlinks=True)": "shutil.copytree",
        "shutil.move(a, b)": "shutil.move",
        "from shutil import copyfile": "import ['copyfile']",
        "os.replace(a, b)": "os.replace",
        "os.rename(a, b)": "os.rename",
        "os.unlink(p)": "os.unlink",
        "os.chmod(p, 0o644)": "os.chmod",
        "os.symlink(a, b)": "os.symlink",
        "os.makedirs(p, exist_ok=True)": "os.makedirs",
        "os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)": "os.open() for writing",
        "open(p, 'wb')": "open() for writing",
        "open(p, mode='a')": "open() for writing",
        "p.write_text('x')": "p.write_text",
        "Path(x).write_bytes(b'')": "write_bytes()",
        "p.parent.mkdir(parents=True)": "p.parent.mkdir",
        "p.unlink(missing_ok=True)": "p.unlink",
        "p.rename(q)": "p.rename",
        "tmp.replace(dest)": "tmp.replace",
        "p.symlink_to(q)": "p.symlink_to",
        "p.touch()": "p.touch",
        "tar.extractall(dest)": "tar.extractall",
        "tar.extract(member, dest)": "tar.extract",
        "tarfile.open(p, 'w:gz')": "tarfile.open()",
        "sqlite3.connect(str(p))": "sqlite3.connect",
        "tempfile.mkdtemp(dir=d)": "tempfile.mkdtemp",
    }
    for code, expect in bad.items():
        got = write_violations(code)
        assert len(got) == 1 and expect in got[0], (code, got)
    fine = ["open(p, 'rb')", "os.open(p, os.O_RDONLY)", "text.replace('a', 'b')",
            "host.write_bytes(p, b'')", "self.host.makedirs(p)", "ctx.host.remove(p)",
            "host.extract_tar(a, d, f)", "tarfile.open(p, 'r:*')",
            "tarfile.open(fileobj=fh, mode='w:gz')", "os.path.join(a, b)", "p.read_text()"]
    for code in fine:
        assert write_violations(code) == [], code
    assert widenings("h.allow_writes(d)\nHost('/', r, writable=[d])\nHost('/', r)") == [
        (1, "allow_writes"), (2, "writable")]


@pytest.mark.parametrize("verb", list(cli.VERBS))
def test_every_verb_has_help_with_examples(verb: str, capsys: pytest.CaptureFixture) -> None:
    rc = cli.main([verb, "--help"])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"hwmgr {verb}" in out and "examples:" in out
