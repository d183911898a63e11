"""The journaled record of an upgrade or rollback, checked before a rollback plan reads it.

`lifecycle.plan` builds a rollback from an earlier upgrade's params (driver, version, modules,
kernels, the versions it replaced) and its steps' data (the backup's saved module files, what
install uninstalled). The journal guarantees only that these are JSON objects; this module
checks the fields a rollback reads, so a damaged or hand-edited record is one line naming the
transaction and the field (`journal.damaged`, exit 8), never a KeyError deep in a plan.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, TypedDict, cast

from hwmgr import safejson
from hwmgr.lifecycle.builds.kmod import ModuleFiles
from hwmgr.lifecycle.params import UpgradeParams
from hwmgr.output import printable
from hwmgr.transaction.journal import damaged
from hwmgr.transaction.state import StateDir, history

MODULE_FIELDS = ("path", "version", "sha256")  # each saved/replaced module file: text or null


class UpgradeRecord(TypedDict):
    """A committed upgrade as a rollback reads it, once `checked_upgrade` passed it."""

    id: int
    params: UpgradeParams
    saved: Optional[ModuleFiles]  # what its backup step saved (None: no backup journaled)
    uninstalled: Optional[dict[str, list[str]]]  # kernel -> DKMS versions its install displaced


def _object(value: object, where: str) -> dict[str, object]:
    obj: dict[str, object] = safejson.typed(value, dict, where, damaged)
    return obj


def _names(value: object, where: str) -> list[str]:
    """A non-empty list of non-empty strings (module names, kernel releases)."""
    items: list[object] = safejson.typed(value, list, where, damaged)
    if not items:
        raise damaged(where, "expected at least one name, got an empty list")
    names: list[str] = []
    for i, name in enumerate(items):
        text: str = safejson.typed(name, str, f"{where}[{i}]", damaged)
        if not text:
            raise damaged(f"{where}[{i}]", "expected a name, got an empty string")
        names.append(text)
    return names


def _files(value: object, where: str, kernels: list[str], modules: list[str]) -> ModuleFiles:
    """{kernel: {module: {path, version, sha256 (text or null)}}} covering every pair."""
    files = _object(value, where)
    for k in kernels:
        per = _object(files.get(k), f"{where}.{k}")
        for m in modules:
            rec = _object(per.get(m), f"{where}.{k}.{m}")
            for field in MODULE_FIELDS:
                safejson.typed(rec.get(field), (str, type(None)), f"{where}.{k}.{m}.{field}",
                               damaged)
    return cast(ModuleFiles, files)  # the fields a rollback reads are checked above


def checked_upgrade(txn: Mapping[str, object], where: str) -> UpgradeRecord:
    """`txn` (a committed upgrade from `Journal.get`) when every field a rollback of it reads
    has its type; else the one-line damaged-journal error naming the field."""
    at = f"{where}: transaction {txn.get('id')}"
    params = _object(txn["params"], f"{at} params")
    safejson.typed(params.get("driver"), str, f"{at} params.driver", damaged)
    safejson.typed(params.get("version"), str, f"{at} params.version", damaged)
    modules = _names(params.get("modules"), f"{at} params.modules")
    kernels = _names(params.get("kernels"), f"{at} params.kernels")
    before = params.get("from")
    if before is not None:
        for k, mods in _object(before, f"{at} params.from").items():
            for m, rec in _object(mods, f"{at} params.from.{k}").items():
                module = _object(rec, f"{at} params.from.{k}.{m}")
                safejson.typed(module.get("version"), (str, type(None)),
                               f"{at} params.from.{k}.{m}.version", damaged)
    saved: Optional[ModuleFiles] = None
    uninstalled: Optional[dict[str, list[str]]] = None
    steps: list[object] = safejson.typed(txn["steps"], list, f"{at} steps", damaged)
    for step in steps:
        row = _object(step, f"{at} step")
        data, name = _object(row["data"], f"{at} step data"), row["name"]
        if name == "backup" and data.get("saved") is not None:
            files = _files(data["saved"], f"{at} step backup saved", kernels, modules)
            saved = files if saved is None else saved  # the first backup step's
        if name == "install" and data.get("uninstalled") is not None:
            displaced: dict[str, list[str]] = {}
            for k, versions in _object(data["uninstalled"],
                                       f"{at} step install uninstalled").items():
                listed: list[object] = safejson.typed(
                    versions, list, f"{at} step install uninstalled.{k}", damaged)
                displaced[k] = [safejson.typed(v, str, f"{at} step install uninstalled.{k}[{i}]",
                                               damaged) for i, v in enumerate(listed)]
            uninstalled = displaced if uninstalled is None else uninstalled
    txn_id: int = safejson.typed(txn["id"], int, f"{at} id", damaged)
    return {"id": txn_id, "params": cast(UpgradeParams, params),  # checked above
            "saved": saved, "uninstalled": uninstalled}


def checked_rollback(txn: Mapping[str, object], where: str) -> Optional[int]:
    """The upgrade a committed rollback undid: an integer id (or None, absent)."""
    params = _object(txn["params"], f"{where}: transaction {txn.get('id')} params")
    undo = params.get("undo_upgrade")
    if undo is None:
        return None
    undone: int = safejson.typed(undo, int,
                                 f"{where}: transaction {txn.get('id')} params.undo_upgrade",
                                 damaged)
    return undone


def upgrade_chain(state: StateDir, driver: str) -> list[UpgradeRecord]:
    """Committed upgrades of `driver` still in effect, oldest first (rollbacks pop them)."""
    return chain_of(history(state, target=driver), printable(state.journal_file))


def chain_of(txns: Sequence[Mapping[str, object]], where: str) -> list[UpgradeRecord]:
    """`upgrade_chain` of one target's transactions (newest first, as the journal lists
    them), each record checked before it is read; `where` names the journal."""
    stack: list[UpgradeRecord] = []
    for t in reversed(txns):
        if t["state"] != "committed":
            continue
        if t["kind"] == "upgrade":
            stack.append(checked_upgrade(t, where))
        elif t["kind"] == "rollback":
            undo_to = checked_rollback(t, where)
            while stack:
                top = stack.pop()
                if top["id"] == undo_to:
                    break
    return stack
