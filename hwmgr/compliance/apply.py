"""`hwmgr apply` / `hwmgr revert`: plan the changes, then run them as one journaled transaction.

A plan is built from drift: a list of `Change`s (interface or None, item, current, wanted,
evidence) — from the compliance engine's findings (`changes_from_findings`) or given directly.
Each change gets its command and its persistence (backend, file, key, or why none) before
anything runs; interfaces that carry the default route or an SSH session (through any bond,
bridge or VLAN stack, `inventory.guard`) are refused unless forced, and then applied last
under a timed automatic revert. Other owners of an item (sysctl.d, tuned, .link, NM) are
conflicts: refused unless `--override`."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, TypedDict

from hwmgr import safejson
from hwmgr.catalog.load import load_catalog
from hwmgr.compliance.check import check_host, parse_layers
from hwmgr.compliance.items import Status, jsonable
from hwmgr.compliance.judge import citation
from hwmgr.compliance.persist import backends, distro
from hwmgr.compliance.read import canonical_item
from hwmgr.compliance.setters import command, normalise, settable, shown
from hwmgr.compliance.steps import (
    REGISTRY,
    ApplyParams,
    FileParam,
    ItemParam,
    NmParam,
    RevertParams,
    pending_path,
)
from hwmgr.config import Config
from hwmgr.errors import (
    EXIT_REFUSED,
    BadInputError,
    NotFoundError,
    NothingToDo,
    RefusedError,
)
from hwmgr.host.seam import Host
from hwmgr.inventory import guard
from hwmgr.inventory.guard import cut_off_refusal, protected_interfaces
from hwmgr.transaction.engine import Transaction
from hwmgr.transaction.journal import Journal
from hwmgr.transaction.result import TxnResult
from hwmgr.transaction.state import BackupRecord, StateDir

LAYERS = ("settings", "sysctl")
DEFAULT_CONFIRM_TIMEOUT = 120

# items no driver resets the link for: a guarded (uplink/SSH) interface may still take them
LINK_SAFE_ITEMS = frozenset({"txqueuelen"})


@dataclass
class Change:
    """One item to change: the small interface apply plans from."""

    interface: str | None
    item: str
    current: object  # as read, or as the change file said (any JSON value)
    wanted: object
    evidence: str | None = None


def changes_from_findings(findings: Iterable[Mapping[str, object]], *,
                          layers: Iterable[str] = LAYERS,
                          interfaces: Iterable[str] = ()) -> list[Change]:
    """Drift findings (check's `findings[]`) of the chosen layers → changes apply can make."""
    want_layers = {"setting" if x == "settings" else x for x in layers}
    only = set(interfaces)
    out = []
    for f in findings:
        if f.get("status") != "drift" or f.get("layer") not in want_layers:
            continue
        if only and f.get("interface") not in only:
            continue
        iface = f.get("interface")  # a string or null: _finding_shape checked a file's
        out.append(Change(iface if isinstance(iface, str) else None, str(f["item"]),
                          f.get("actual"), concrete(f.get("expected"), f.get("actual")),
                          citation(f)))
    return out



def _bound(spec: object, have: object) -> object:
    """The nearest value meeting {min, max} (or {value}); `have` when it already does."""
    if not isinstance(spec, dict):
        return spec
    if "value" in spec:
        return spec["value"]
    if isinstance(have, int) and "min" in spec and have < spec["min"]:
        return spec["min"]
    if isinstance(have, int) and "max" in spec and have > spec["max"]:
        return spec["max"]
    return have if isinstance(have, int) else spec.get("min", spec.get("max"))


def concrete(expected: object, actual: object) -> object:
    """The value to set for a finding's `expected`: a bound becomes the nearest value that
    meets it (as check's fix does), per-field rules keep the fields they do not constrain."""
    if isinstance(expected, list) and isinstance(actual, list) and \
            any(e is None or isinstance(e, dict) for e in expected):
        return [e if i >= len(actual) else actual[i] if e is None else _bound(e, actual[i])
                for i, e in enumerate(expected)] + list(actual[len(expected):])
    return _bound(expected, actual)


class _Persisted(TypedDict):
    backend: str  # systemd-link, networkmanager, network-scripts, ifupdown, udev-rule, sysctl.d
    file: str | None
    key: str | None


class Persisted(_Persisted, total=False):
    """Where one change survives a reboot and why that backend (or, `not_persisted`, why it
    does not)."""

    connection: str | None
    why: str
    not_persisted: str


class PlannedChange(TypedDict):
    """One change in the plan (`apply --json` data.changes[])."""

    interface: str | None
    item: str  # canonical
    current: object
    wanted: object
    command: str
    persist: Persisted | None
    risky: bool  # on a guarded (uplink / SSH) interface: applied last, under a timed revert
    evidence: str | None


class Refusal(TypedDict):
    code: int
    reason: str


@dataclass
class ApplyPlan:
    """Everything apply will do, shown before it does it."""

    changes: list[PlannedChange] = field(default_factory=list)
    files: list[FileParam] = field(default_factory=list)  # journaled, so `recover` can
    nm: list[NmParam] = field(default_factory=list)
    conflicts: list[backends.Conflict] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    persist_root: str = "/"
    confirm_timeout: int | None = None

    @property
    def exit_code(self) -> int:
        return self.refusals[0]["code"] if self.refusals else 0

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["files"] = [{"path": f["path"], "bytes": len(f["content"].encode())}
                      for f in self.files]
        return d

    def params(self, argv: list[str]) -> ApplyParams:
        """The journaled params the apply steps are built from (also after a crash)."""
        items: list[ItemParam] = [{"interface": c["interface"], "item": c["item"],
                                   "wanted": c["wanted"], "risky": c["risky"]}
                                  for c in self.changes]
        p: ApplyParams = {"items": items, "files": self.files, "nm": self.nm,
                          "persist_root": self.persist_root}
        if any(c["risky"] for c in self.changes) and self.confirm_timeout:
            p["confirm"] = {"timeout": self.confirm_timeout, "argv": argv}
        return p


def _value(item: str, value: object) -> object:
    if isinstance(value, Status):
        return value.value
    try:
        v = normalise(item, value)
    except BadInputError:
        return value
    return shown(v) if isinstance(v, bool) else v


def plan_apply(host: Host, changes: list[Change], *, persist_root: str = "/",
               force: bool = False, override: bool = False, confirm_timeout: int | None = None,
               env: Mapping[str, str] | None = None) -> ApplyPlan:
    """Commands, persistence, guards and conflicts for `changes`; nothing is changed."""
    if not persist_root.startswith("/"):
        raise BadInputError(f"--persist-root {persist_root!r}: expected an absolute path")
    plan = ApplyPlan(persist_root=persist_root, confirm_timeout=confirm_timeout)
    protected = protected_interfaces(host, env) if any(c.interface for c in changes) else {}
    by_iface: dict[str | None, dict[str, object]] = {}
    seen: set[tuple[str | None, str]] = set()
    cut_off: dict[str, tuple[str, list[str]]] = {}  # guarded interface → (why, items)
    for ch in changes:
        item = canonical_item(ch.item)
        if (ch.interface, item) in seen:
            continue
        seen.add((ch.interface, item))
        if not settable(item):
            plan.notes.append(f"{ch.interface or 'host'} {item}: apply cannot set this item; "
                              "left as it is")
            continue
        normalise(item, ch.wanted)  # BadInputError for a value no setter takes
        guarded = protected.get(ch.interface) if ch.interface else None
        risky = guarded is not None and item not in LINK_SAFE_ITEMS
        if risky and not force and ch.interface and guarded:
            cut_off.setdefault(ch.interface, (guarded, []))[1].append(item)
        plan.changes.append({
            "interface": ch.interface, "item": item, "current": _value(item, ch.current),
            "wanted": _value(item, ch.wanted), "command": " ".join(
                command(ch.interface, item, ch.wanted)), "persist": None, "risky": risky,
            "evidence": ch.evidence})
        by_iface.setdefault(ch.interface, {})[item] = ch.wanted
    if cut_off:
        plan.refusals.append({"code": EXIT_REFUSED, "reason": cut_off_refusal(cut_off)})
    _plan_persistence(host, plan, by_iface, override)
    if plan.conflicts and not override:
        for c in plan.conflicts:
            plan.refusals.append({"code": EXIT_REFUSED, "reason": (
                f"{c['file']} sets {c['key']} = {c['value']} for "
                f"{c['interface'] or 'the host'}; apply would fight it (use --override)")})
    if any(c["risky"] for c in plan.changes) and force and not confirm_timeout:
        plan.confirm_timeout = DEFAULT_CONFIRM_TIMEOUT
    return plan


def _plan_persistence(host: Host, plan: ApplyPlan,
                      by_iface: dict[str | None, dict[str, object]], override: bool) -> None:
    netns = guard.other_netns(host) if plan.persist_root == "/" else None
    if netns is not None:  # /etc is the host's: its sysctl.d and .link files are not ours
        why = (f"this is network namespace {netns}: /etc/sysctl.d, .link files and "
               "NetworkManager configure the host's own namespace at boot, not this one")
        for c in plan.changes:
            c["persist"] = {"backend": "none", "file": None, "key": None,
                            "not_persisted": why}
        plan.notes.append(f"nothing persisted ({why}); the changes are live in this namespace "
                          "only, until it is removed")
        return
    root = plan.persist_root
    nm = backends.nm_connections(host) if root == "/" and host.live else {}
    systemd = distro.systemd_version(host, root) if any(by_iface) else None
    where: dict[tuple[str | None, str], Persisted] = {}
    for iface, wanted in by_iface.items():
        if iface is None:
            pps = [backends.SysctlBackend(host, root).plan(wanted, override)]
        else:
            assert systemd is not None
            backend, reason = backends.choose_backend(host, root, iface, nm, systemd)
            pps = [backend.plan(iface, wanted, override)]
            pps[0].reason = reason
            left = {i: v for i, v in wanted.items() if i in pps[0].unpersisted
                    or pps[0].not_on_add and i in pps[0].keys}
            if left and backend.name != distro.UdevRuleBackend.name:
                pps.append(distro.UdevRuleBackend(host, root).plan(iface, left, override))
                pps[1].reason = "; ".join(
                    ([f"{pps[0].backend} cannot carry some ({systemd.source})"]
                     if set(left) & set(pps[0].unpersisted) else [])
                    + ([f"{pps[0].not_on_add}: the rule re-applies them on device add "
                        "(driver reload)"] if pps[0].not_on_add else []))
            plan.conflicts += backends.other_owner_conflicts(host, root, iface, wanted)
            for pp in pps:
                if pp.keys:
                    plan.notes.append(f"{iface}: persisted with {pp.backend} ({pp.target}) "
                                      f"because {pp.reason}")
        for pp in pps:
            plan.conflicts += pp.conflicts
            plan.notes += pp.notes
            plan.refusals += [{"code": EXIT_REFUSED, "reason": r} for r in pp.refusals]
            if pp.content is not None and pp.keys:
                plan.files.append({"path": pp.target, "content": pp.content.decode()})
            if pp.properties and pp.connection:
                plan.nm.append({"connection": pp.connection, "properties": pp.properties})
        for item in wanted:
            pp = next((p for p in pps if item in p.keys), pps[-1])
            if item in pp.keys:
                file = pp.target if pp.backend != "networkmanager" else None
                why = pp.reason if pp is pps[0] else \
                    f"{pps[0].backend}: {pps[0].unpersisted[item]}"
                where[(iface, item)] = {"backend": pp.backend, "file": file,
                                        "key": pp.keys[item], "connection": pp.connection,
                                        "why": why}
            else:
                why = "; ".join(p.unpersisted[item] for p in pps if item in p.unpersisted) \
                    or "conflicts with another owner"
                where[(iface, item)] = {"backend": pp.backend, "file": None, "key": None,
                                        "not_persisted": why}
                plan.notes.append(f"{iface or 'host'} {item}: not persisted ({why}); "
                                  "it is lost at the next reboot")
    for c in plan.changes:
        c["persist"] = where.get((c["interface"], c["item"]))


def waiter_argv(config: Config, timeout: int) -> list[str]:
    """The detached command that reverts `{txn}` after `timeout` s unless confirmed: a
    systemd-run timer where systemd runs, else a detached child in its own session."""
    me = [sys.executable, "-m", "hwmgr", "apply", "--state-dir", config.state_dir]
    if os.path.isdir("/run/systemd/system"):
        return ["systemd-run", "--unit", "hwmgr-revert-{txn}", f"--on-active={timeout}",
                "--timer-property=AccuracySec=1s", *me, "--auto-revert", "{txn}", "--after", "0"]
    inner = " ".join(shlex.quote(a)
                     for a in [*me, "--auto-revert", "{txn}", "--after", str(timeout)])
    return ["setsid", "-f", "sh", "-c", f"exec {inner} </dev/null >/dev/null 2>&1"]


def run_apply(host: Host, plan: ApplyPlan, config: Config, *, command: str,
              wait: float = 0) -> TxnResult:
    """Run the plan as one transaction under the host lock (undone in reverse on failure)."""
    state = StateDir(host, config.state_dir)
    params = plan.params(waiter_argv(config, plan.confirm_timeout or DEFAULT_CONFIRM_TIMEOUT))
    target = ",".join(sorted({c["interface"] or "sysctl" for c in plan.changes}))
    try:
        with state.lock(command=command, wait=wait):
            return Transaction(state, REGISTRY, "apply", dict(params), target=target,
                               command=command).run()
    finally:
        state.close()


# ---------------------------------------------------------------- revert
def _reverted(journal: Journal, txn_id: int) -> int | None:
    for t in journal.transactions(kind="revert"):
        if t["state"] == "committed" and isinstance(t["params"], dict) and \
                t["params"].get("of") == txn_id:
            return int(t["id"])
    return None


def _touched(row: Mapping[str, object]) -> set[str]:
    """`IF:item` and file paths an apply changed (to order reverts)."""
    p = row["params"] if isinstance(row["params"], dict) else {}
    out = {f"{i.get('interface') or 'host'}:{i.get('item')}" for i in p.get("items", [])}
    return out | {f.get("path", "") for f in p.get("files", [])}


def revert_params(state: StateDir, txn: int | None) -> RevertParams:
    """What undoing apply `txn` (default: the newest committed one not yet reverted) means,
    from the values and file backups its steps journaled."""
    journal = state.read_journal()
    if journal is None:  # this host never ran a transaction
        if txn is not None:
            raise NotFoundError(f"transaction {txn}: no such apply in the journal")
        raise NothingToDo("no committed apply left to revert")
    applies = journal.transactions(kind="apply")
    row: dict[str, Any] | None
    if txn is None:
        candidates = [t for t in applies if t["state"] == "committed"
                      and _reverted(journal, t["id"]) is None]
        if not candidates:
            raise NothingToDo("no committed apply left to revert")
        row = candidates[0]
    else:
        row = next((t for t in applies if t["id"] == txn), None)
        if row is None:
            raise NotFoundError(f"transaction {txn}: no such apply in the journal")
        if row["state"] != "committed":
            raise NothingToDo(f"transaction {txn} ended {row['state']}: nothing to revert")
        if (by := _reverted(journal, txn)) is not None:
            raise NothingToDo(f"transaction {txn} was already reverted by transaction {by}")
        mine = _touched(row)
        for later in applies:
            if later["id"] > txn and later["state"] == "committed" and \
                    _reverted(journal, later["id"]) is None and mine & _touched(later):
                raise RefusedError(
                    f"apply #{later['id']} changed {', '.join(sorted(mine & _touched(later)))}"
                    f" after #{txn}: revert #{later['id']} first")
    full = journal.get(row["id"])
    items: list[ItemParam] = []
    files: list[BackupRecord] = []
    nm: list[NmParam] = []
    for s in reversed(full["steps"]):
        data = s["data"] or {}
        name = s["name"]
        if name.startswith("set ") and "before" in data:
            iface, _, item = name[4:].rpartition(":")
            items.append({"interface": iface or None, "item": item, "value": data["before"]})
        elif name.startswith("persist "):
            rec = data.get(f"backup:{name[len('persist '):]}")
            if rec:
                files.append(rec)
        elif name.startswith("nm-connection ") and "before" in data:
            nm.append({"connection": name[len("nm-connection "):], "properties": data["before"],
                       "remove": data.get("absent", [])})
    return {"of": row["id"], "items": items, "files": files, "nm": nm,
            "persist_root": (row.get("params") or {}).get("persist_root", "/")}


def run_revert(host: Host, params: RevertParams, config: Config, *, command: str,
               wait: float = 0) -> TxnResult:
    """Revert one apply as its own transaction; drops its pending timed revert."""
    state = StateDir(host, config.state_dir)
    try:
        with state.lock(command=command, wait=wait):
            res = Transaction(state, REGISTRY, "revert", dict(params), target=f"#{params['of']}",
                              command=command).run()
            if res.ok:
                host.remove(pending_path(state.path, params["of"]))
            return res
    finally:
        state.close()


def confirm(host: Host, config: Config, txn: int) -> bool:
    """`apply --confirm TXN`: keep the change; False when no revert was pending for it."""
    return host.remove(pending_path(StateDir(host, config.state_dir).path, txn))


def auto_revert(host: Host, config: Config, txn: int, after: float) -> TxnResult | None:
    """The detached waiter: sleep, then revert `txn` unless it was confirmed meanwhile."""
    time.sleep(max(0.0, after))
    state = StateDir(host, config.state_dir)
    marker = pending_path(state.path, txn)
    if not host.exists(marker):
        return None
    try:
        with state.lock(command=f"hwmgr apply --auto-revert {txn}", wait=600):
            if not host.exists(marker):
                return None  # confirmed while we waited for the lock
            journal = state.journal()
            row = journal.get(txn)
            if row["state"] != "committed":
                host.remove(marker)
                return None
            params = revert_params(state, txn)
            res = Transaction(state, REGISTRY, "revert", dict(params), target=f"#{txn}",
                              command=f"hwmgr apply --auto-revert {txn} (not confirmed)").run()
            if res.ok:
                host.remove(marker)
            return res
    finally:
        state.close()


def drift_changes(host: Host, args: argparse.Namespace, layers: list[str], config: Config
                  ) -> list[Change]:
    """The host's own drift in `layers`: the compliance engine's findings (`hwmgr check`);
    `config` (the run's Config) says where the catalog is."""
    result = check_host(host, load_catalog(args.catalog, config=config),
                        parse_layers(",".join(layers)))
    return changes_from_findings([f.to_json() for f in result.findings], layers=layers,
                                 interfaces=args.interface)


def load_changes(doc: object, where: str) -> list[Change]:
    """Changes from a parsed JSON file (`safejson.load_file`): a list of {interface, item,
    current, wanted, evidence}, or a check result (`data.findings` / `findings`); a wrong
    shape is one line naming the file and the field."""
    if isinstance(doc, dict):
        data = doc.get("data", doc)
        if data is None or not isinstance(data, dict):
            raise BadInputError(f"{where}: data: expected a check result object")
        key = "findings" if "findings" in data else "changes"
        doc = data.get(key)
        where_list = f"{where}: {key}"
        if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "status" in doc[0]:
            for i, f in enumerate(doc):
                _finding_shape(f, f"{where_list}[{i}]")
            return changes_from_findings(doc)
    if not isinstance(doc, list):
        raise BadInputError(f"{where}: expected a list of changes or check findings")
    out = []
    for i, c in enumerate(doc):
        if not isinstance(c, dict) or not isinstance(c.get("item"), str) or "wanted" not in c:
            raise BadInputError(f"{where}: change [{i}] needs 'item' and 'wanted'")
        iface = c.get("interface")
        if iface is not None and not isinstance(iface, str):
            raise BadInputError(f"{where}: change [{i}].interface must be a string or null")
        out.append(Change(iface, c["item"], c.get("current"), c["wanted"], c.get("evidence")))
    return out


def _finding_shape(value: object, where: str) -> None:
    """A check finding as `changes_from_findings` reads it: an object whose status, layer,
    item and interface are strings (interface may be null)."""
    f = safejson.typed(value, dict, where)
    for key in ("status", "item"):
        safejson.typed(f.get(key), str, f"{where}.{key}")
    safejson.typed(f.get("layer", ""), str, f"{where}.layer")
    safejson.typed(f.get("interface"), (str, type(None)), f"{where}.interface")
    expected = f.get("expected")
    for i, spec in enumerate(expected if isinstance(expected, list) else [expected]):
        if isinstance(spec, dict):  # a bound: {min, max} compared with the actual value
            at = f"{where}.expected" + (f"[{i}]" if isinstance(expected, list) else "")
            for key in ("min", "max"):
                if key in spec:
                    safejson.typed(spec[key], int, f"{at}.{key}")


__all__ = ["Change", "ApplyPlan", "plan_apply", "run_apply", "revert_params", "run_revert",
           "confirm", "auto_revert", "changes_from_findings", "load_changes", "jsonable"]
