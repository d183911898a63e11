"""The journaled steps of `hwmgr apply` and `hwmgr revert`, registered by transaction kind.

Each setting is one step: do records the live value (journaled before anything changes), sets
the new one and check reads it back; undo sets the recorded value again. Persistence files are
backed up into the state dir (not /run, so `revert` works after a reboot) before they are
written, and restored byte for byte. `REGISTRY` lets `hwmgr recover` rebuild every step from
the journaled params alone.
"""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Mapping, TypedDict, cast

from hwmgr import safejson
from hwmgr.compliance.items import Status
from hwmgr.compliance.persist.backends import nm_property, nm_setting_present
from hwmgr.compliance.setters import apply_item, read_item, same
from hwmgr.errors import HwmgrError
from hwmgr.host.hashing import sha256_file
from hwmgr.transaction.engine import Ctx, Step
from hwmgr.transaction.state import BackupRecord

PENDING_DIR = "pending-revert"


# ---------------------------------------------------------------- the journaled params
class ItemParam(TypedDict, total=False):
    """One live setting: apply's `wanted` (and whether it may cut the link), revert's
    `value` (what the apply found)."""

    interface: str | None  # None: a host sysctl
    item: str
    wanted: object
    risky: bool
    value: object


class FileParam(TypedDict):
    """A persistence file apply writes whole."""

    path: str
    content: str


class NmParam(TypedDict, total=False):
    """NetworkManager properties set on one connection (revert: and the settings to drop)."""

    connection: str
    properties: dict[str, str]
    remove: list[str]


class ConfirmParam(TypedDict):
    """The timed revert armed before the risky settings: its timeout and waiter argv."""

    timeout: int
    argv: list[str]


class _Params(TypedDict, total=False):
    items: list[ItemParam]
    nm: list[NmParam]
    persist_root: str  # the root persistence files were written under


class ApplyParams(_Params, total=False):
    """`apply` params as journaled: settings, the files and NM properties that persist them,
    and the timed revert when a risky setting is among them."""

    files: list[FileParam]
    confirm: ConfirmParam


class RevertParams(_Params, total=False):
    """`revert` params as journaled: the apply undone, its settings' values before it and
    the backups of the files it wrote."""

    of: int
    files: list[BackupRecord]


def _list(params: Mapping[str, object], key: str, fields: Mapping[str, safejson.Types]
          ) -> list[dict[str, object]]:
    """params[key] as a list of objects whose `fields` have their types; BadInputError
    naming the field otherwise (a damaged journal, never a traceback)."""
    out = safejson.typed(params.get(key, []), list, f"params.{key}")
    for i, rec in enumerate(out):
        safejson.typed(rec, dict, f"params.{key}[{i}]")
        for name, types in fields.items():
            safejson.typed(rec.get(name), types, f"params.{key}[{i}].{name}")
    return cast("list[dict[str, object]]", out)


def _strings(value: object, where: str) -> None:
    """A list of strings (an argv, settings to remove), else BadInputError naming it."""
    for i, word in enumerate(safejson.typed(value, list, where)):
        safejson.typed(word, str, f"{where}[{i}]")


def _check_params(params: Mapping[str, object], files: Mapping[str, safejson.Types]) -> None:
    """The keys every settings step reads, each of its type (`files`: a file's keys)."""
    _list(params, "items", {"item": str, "interface": (str, type(None))})
    _list(params, "files", files)
    for i, n in enumerate(_list(params, "nm", {"connection": str, "properties": dict})):
        props = cast("dict[str, object]", n["properties"])
        for k, v in props.items():
            safejson.typed(v, str, f"params.nm[{i}].properties.{k}")
        _strings(n.get("remove", []), f"params.nm[{i}].remove")
    safejson.typed(params.get("persist_root", "/"), str, "params.persist_root")


def apply_params(params: Mapping[str, object]) -> ApplyParams:
    """Journaled `apply` params, checked once, so recovery rebuilds the steps or names the
    damaged field (BadInputError)."""
    _check_params(params, {"path": str, "content": str})
    if params.get("confirm"):
        conf = safejson.typed(params["confirm"], dict, "params.confirm")
        safejson.typed(conf.get("timeout"), int, "params.confirm.timeout")
        _strings(conf.get("argv"), "params.confirm.argv")
    return cast(ApplyParams, params)


def revert_params(params: Mapping[str, object]) -> RevertParams:
    """Journaled `revert` params, checked once: the files are the apply's backup records
    (`StateDir.backup_file`; `sha256` and `backup` only when the file existed)."""
    none = type(None)
    _check_params(params, {"path": str, "existed": (bool, none), "backup": (str, none),
                           "sha256": (str, none)})
    return cast(RevertParams, params)


def pending_path(state_path: str, txn_id: int) -> str:
    """Logical path of the marker that says "revert transaction `txn_id` unless confirmed"."""
    return f"{state_path}/{PENDING_DIR}/{int(txn_id)}.json"


# ---------------------------------------------------------------- one live setting
def _set_steps(prefix: str, rec: ItemParam, value_key: str) -> Step:
    iface, item = rec.get("interface"), rec["item"]
    value = rec.get(value_key)  # wanted (apply) | value (revert)

    def do(ctx: Ctx) -> dict[str, object]:
        if "before" not in ctx.data:
            before = read_item(ctx.host, iface, item)
            if isinstance(before, Status):
                raise HwmgrError(f"{iface or 'host'} {item}: cannot read the current value "
                                 f"({before.value}); nothing changed")
            ctx.save(before=before)
        apply_item(ctx.host, iface, item, value)
        return {}

    def check(ctx: Ctx) -> bool:
        return same(item, read_item(ctx.host, iface, item), value)

    def undo(ctx: Ctx) -> None:
        if "before" not in ctx.data:
            return  # crashed before anything was recorded: nothing was changed
        before = ctx.data["before"]
        if not same(item, read_item(ctx.host, iface, item), before):
            apply_item(ctx.host, iface, item, before)

    where = f"{iface}:" if iface else ""
    return Step(f"{prefix} {where}{item}", do, undo, check,
                description=f"{item} → {value}")


# ---------------------------------------------------------------- one persistence file
def _license(ctx: Ctx, root: str) -> None:
    """Persistence files go under the persist root the user named (default /, whose settings
    drop-in dirs are writable anyway): make that one directory writable for this run."""
    if root != "/":
        ctx.host.allow_writes(root)


def _file_step(rec: FileParam, root: str) -> Step:
    path, content = rec["path"], rec["content"].encode()

    def do(ctx: Ctx) -> dict[str, object]:
        _license(ctx, root)
        ctx.backup(path)  # journaled before the file changes; idempotent across re-runs
        ctx.host.write_bytes(path, content)
        return {"sha256": hashlib.sha256(content).hexdigest()}

    def check(ctx: Ctx) -> bool:
        return bool(ctx.host.read_bytes(path, limit=1 << 20) == content)

    def undo(ctx: Ctx) -> None:
        _license(ctx, root)
        ctx.restore(path)

    return Step(f"persist {path}", do, undo, check, description=f"write {path}")


# ---------------------------------------------------------------- NetworkManager properties
def _nm_set(ctx: Ctx, conn: str, props: dict[str, str]) -> None:
    argv = ["nmcli", "connection", "modify", conn]
    for k, v in props.items():
        argv += [k, v]
    res = ctx.host.run(argv, timeout=30)
    if not res.ok:
        raise HwmgrError(f"`{' '.join(argv)}` failed: {' '.join(res.stderr.split())}")


def _nm_remove(ctx: Ctx, conn: str, settings: list[str]) -> None:
    for setting in settings:
        res = ctx.host.run(["nmcli", "connection", "modify", conn, "remove", setting])
        if not res.ok:
            raise HwmgrError(f"`nmcli connection modify {conn} remove {setting}` failed: "
                             + " ".join(res.stderr.split()))


def _nm_step(rec: NmParam) -> Step:
    """Set NM properties; `before` keeps their values and `absent` the settings (ethtool,
    link) the connection did not have, removed again on undo so its keyfile is as it was."""
    conn, props = rec["connection"], rec["properties"]

    def do(ctx: Ctx) -> dict[str, object]:
        if "before" not in ctx.data:
            settings = sorted({p.split(".", 1)[0] for p in props})
            ctx.save(before={p: nm_property(ctx.host, conn, p) or "" for p in props},
                     absent=[s for s in settings if not nm_setting_present(ctx.host, conn, s)])
        _nm_set(ctx, conn, props)
        _nm_remove(ctx, conn, rec.get("remove", []))
        return {}

    def check(ctx: Ctx) -> bool:
        return all(nm_property(ctx.host, conn, p) == v for p, v in props.items())

    def undo(ctx: Ctx) -> None:
        if "before" in ctx.data:
            _nm_set(ctx, conn, ctx.data["before"])
            _nm_remove(ctx, conn, ctx.data.get("absent", []))

    return Step(f"nm-connection {conn}", do, undo, check,
                description=f"nmcli connection modify {conn}")


# ---------------------------------------------------------------- the timed automatic revert
def _arm_step(rec: ConfirmParam) -> Step:
    """Arm a revert that fires unless `hwmgr apply --confirm TXN` comes within the timeout."""

    def do(ctx: Ctx) -> dict[str, object]:
        marker = pending_path(ctx.state.path, ctx.txn_id)
        ctx.save(marker=marker)
        ctx.host.write_bytes(marker, json.dumps({"txn": ctx.txn_id,
                                                 "timeout": rec["timeout"]}).encode())
        argv = [a.replace("{txn}", str(ctx.txn_id)) for a in rec["argv"]]
        res = ctx.host.run(argv, timeout=30)
        if not res.ok:
            raise HwmgrError(f"cannot arm the timed revert (`{' '.join(argv)}`): "
                             + " ".join((res.stderr or f"rc {res.rc}").split()))
        return {"armed": argv}

    def check(ctx: Ctx) -> bool:
        return ctx.host.exists(pending_path(ctx.state.path, ctx.txn_id))

    def undo(ctx: Ctx) -> None:
        ctx.host.remove(pending_path(ctx.state.path, ctx.txn_id))  # the waiter then does nothing

    return Step("arm timed revert", do, undo, check,
                description=f"revert unless confirmed within {rec['timeout']} s")


def apply_steps(raw: Mapping[str, object]) -> list[Step]:
    """safe settings → persistence files / NM properties → (arm timed revert → risky ones)."""
    params = apply_params(raw)
    safe = [c for c in params["items"] if not c.get("risky")]
    risky = [c for c in params["items"] if c.get("risky")]
    steps = [_set_steps("set", c, "wanted") for c in safe]
    root = params.get("persist_root", "/")
    steps += [_file_step(f, root) for f in params.get("files", [])]
    steps += [_nm_step(n) for n in params.get("nm", [])]
    if risky:
        if params.get("confirm"):
            steps.append(_arm_step(params["confirm"]))
        steps += [_set_steps("set", c, "wanted") for c in risky]
    return steps


# ---------------------------------------------------------------- revert
def _restore_file_step(rec: BackupRecord, root: str) -> Step:
    """Put a persistence file back exactly as the apply found it (or remove it)."""
    path = rec["path"]

    def do(ctx: Ctx) -> dict[str, object]:
        _license(ctx, root)
        ctx.backup(path)  # what is there now, so undoing the revert puts it back
        ctx.state.restore_file(rec)
        return {}

    def check(ctx: Ctx) -> bool:
        real = ctx.host.path(path)
        if not rec.get("existed"):
            return not real.exists()
        return real.is_file() and sha256_file(real) == rec["sha256"]

    def undo(ctx: Ctx) -> None:
        _license(ctx, root)
        ctx.restore(path)

    return Step(f"restore {path}", do, undo, check, description=f"restore {path}")


def revert_steps(raw: Mapping[str, object]) -> list[Step]:
    """Undo one apply: its settings and persistence in reverse order of the apply."""
    params = revert_params(raw)
    steps = [_nm_step(n) for n in params.get("nm", [])]
    root = params.get("persist_root", "/")
    steps += [_restore_file_step(f, root) for f in params.get("files", [])]
    steps += [_set_steps("restore", c, "value") for c in params["items"]]
    return steps


REGISTRY: dict[str, Callable[[Mapping[str, object]], list[Step]]] = {
    "apply": apply_steps,
    "revert": revert_steps,
}
