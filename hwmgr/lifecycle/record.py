"""The journaled record of an upgrade or rollback, checked before a rollback plan reads it.

`lifecycle.plan` builds a rollback from an earlier upgrade's params (driver, version, modules,
kernels, the versions it replaced) and its steps' data (the backup's saved module files, what
install uninstalled). The journal guarantees only that these are JSON objects; this module
checks the fields a rollback reads, so a damaged or hand-edited record is one line naming the
transaction and the field (`journal.damaged`, exit 8), never a KeyError deep in a plan.
"""

from __future__ import annotations

from typing import Any

from hwmgr import safejson
from hwmgr.output import printable
from hwmgr.transaction.journal import damaged
from hwmgr.transaction.state import StateDir, history

MODULE_FIELDS = ("path", "version", "sha256")  # each saved/replaced module file: text or null


def _typed(value: object, types: safejson.Types, where: str) -> Any:
    return safejson.typed(value, types, where, damaged)


def _names(value: Any, where: str) -> list[str]:
    """A non-empty list of non-empty strings (module names, kernel releases)."""
    _typed(value, list, where)
    if not value:
        raise damaged(where, "expected at least one name, got an empty list")
    for i, name in enumerate(value):
        if not _typed(name, str, f"{where}[{i}]"):
            raise damaged(f"{where}[{i}]", "expected a name, got an empty string")
    names: list[str] = value
    return names


def _files(value: Any, where: str, kernels: list[str], modules: list[str]) -> None:
    """{kernel: {module: {path, version, sha256 (text or null)}}} covering every pair."""
    _typed(value, dict, where)
    for k in kernels:
        per = _typed(value.get(k), dict, f"{where}.{k}")
        for m in modules:
            rec = _typed(per.get(m), dict, f"{where}.{k}.{m}")
            for field in MODULE_FIELDS:
                _typed(rec.get(field), (str, type(None)), f"{where}.{k}.{m}.{field}")


def checked_upgrade(txn: dict[str, Any], where: str) -> dict[str, Any]:
    """`txn` (a committed upgrade from `Journal.get`) when every field a rollback of it reads
    has its type; else the one-line damaged-journal error naming the field."""
    at = f"{where}: transaction {txn.get('id')}"
    params = txn["params"]
    _typed(params.get("driver"), str, f"{at} params.driver")
    _typed(params.get("version"), str, f"{at} params.version")
    modules = _names(params.get("modules"), f"{at} params.modules")
    kernels = _names(params.get("kernels"), f"{at} params.kernels")
    before = params.get("from")
    if before is not None:
        _typed(before, dict, f"{at} params.from")
        for k, mods in before.items():
            for m, rec in _typed(mods, dict, f"{at} params.from.{k}").items():
                _typed(rec, dict, f"{at} params.from.{k}.{m}")
                _typed(rec.get("version"), (str, type(None)), f"{at} params.from.{k}.{m}.version")
    for step in txn["steps"]:
        data, name = step["data"], step["name"]
        if name == "backup" and data.get("saved") is not None:
            _files(data["saved"], f"{at} step backup saved", kernels, modules)
        if name == "install" and data.get("uninstalled") is not None:
            for k, versions in _typed(data["uninstalled"], dict,
                                      f"{at} step install uninstalled").items():
                for i, v in enumerate(_typed(versions, list, f"{at} step install uninstalled.{k}")):
                    _typed(v, str, f"{at} step install uninstalled.{k}[{i}]")
    return txn


def checked_rollback(txn: dict[str, Any], where: str) -> dict[str, Any]:
    """A committed rollback: the upgrade it undid is an integer id (or absent)."""
    undo = txn["params"].get("undo_upgrade")
    if undo is not None:
        _typed(undo, int, f"{where}: transaction {txn.get('id')} params.undo_upgrade")
    return txn


def upgrade_chain(state: StateDir, driver: str) -> list[dict[str, Any]]:
    """Committed upgrades of `driver` still in effect, oldest first (rollbacks pop them)."""
    return chain_of(history(state, target=driver), printable(state.journal_file))


def chain_of(txns: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """`upgrade_chain` of one target's transactions (newest first, as the journal lists
    them), each record checked before it is read; `where` names the journal."""
    stack: list[dict[str, Any]] = []
    for t in reversed(txns):
        if t["state"] != "committed":
            continue
        if t["kind"] == "upgrade":
            stack.append(checked_upgrade(t, where))
        elif t["kind"] == "rollback":
            undo_to = checked_rollback(t, where)["params"].get("undo_upgrade")
            while stack:
                top = stack.pop()
                if top["id"] == undo_to:
                    break
    return stack
