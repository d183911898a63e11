"""The rollout record: one change over many hosts, canaries first, a fleet-wide failure budget.

A rollout is a JSON file on the control node (format below) that outlives the control
node's processes: every step that changes it (`start`, `claim`, `mark`, `halt`) runs under
an exclusive lock on `RECORD.lock`, reads the file, changes it and writes it whole. Re-running
the same rollout resumes it: a host is handed out for its change once (`claim` moves it from
pending to in-flight; one left in flight by a crash is handed out again only marked as a
resume, so the caller re-runs an idempotent change, never a second one), and no host starts
once the failed gates reach the budget or someone said `halt`.

    {"format": "hwmgr-rollout", "version": 1, "id": "...", "change": {...},
     "batches": [1, 2, 4], "budget": {"failures": 1} | {"percent": 10.0},
     "created": "...", "halted": null | {"at": "...", "reason": "..."},
     "hosts": {"web-01": {"state": "pending", "batch": null, "started": null,
                          "finished": null, "resumed": 0, "gate": null, "rollback": null}}}
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, TypedDict, cast

from hwmgr import safejson
from hwmgr.errors import BadInputError, NotFoundError, RefusedError, UsageError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.transaction.journal import utcnow

FORMAT = "hwmgr-rollout"
VERSION = 1
STATES = ("pending", "in-flight", "done", "failed", "rolled-back")
FINAL = ("done", "failed", "rolled-back")
# what `mark` may record: a gate result, then what the rollback of a failed host did
MARKS = {"done": ("in-flight",), "failed": ("in-flight",), "rolled-back": ("failed",)}
MAX_HOSTS = 100_000
MAX_EVIDENCE = 256 << 10  # bytes of one host's gate evidence kept in the record
MAX_RECORD = 512 << 20
_HOST = re.compile(r"^[A-Za-z0-9_.:@-][A-Za-z0-9_.:@/-]{0,252}$")


class Halted(TypedDict):
    """Why and when a rollout stopped handing out hosts."""

    at: str
    reason: str


class HostEntry(TypedDict):
    """One host's place in the rollout; `gate` and `rollback` are its evidence as marked."""

    state: str  # one of STATES
    batch: int | None
    started: str | None
    finished: str | None
    resumed: int
    gate: object
    rollback: object


class BudgetJson(TypedDict, total=False):
    """The budget as the record keeps it: one of the two keys."""

    failures: int | None
    percent: float | None


class BudgetState(BudgetJson):
    """The budget with its limit for this rollout and whether the failed gates spent it."""

    limit: int
    failed_gates: int
    spent: bool


class Change(TypedDict):
    """The change a rollout makes on each host: `hwmgr VERB ARGS...`."""

    verb: str
    args: list[str]


class Record(TypedDict):
    """The record file (the module docstring shows one)."""

    format: str
    version: int
    id: str
    change: Change
    batches: list[int]
    budget: BudgetJson
    created: str
    halted: Halted | None
    hosts: dict[str, HostEntry]


@dataclass(frozen=True)
class Budget:
    """How many failed gates stop the rollout: a count, or a percentage of its hosts."""

    failures: int | None = None
    percent: float | None = None

    @classmethod
    def parse(cls, text: str) -> Budget:
        """'1' or '10%'; UsageError naming --budget when it is neither."""
        t = text.strip()
        try:
            if t.endswith("%"):
                pct = float(t[:-1])
                if not 0 < pct <= 100 or math.isnan(pct):
                    raise ValueError
                return cls(percent=pct)
            n = int(t)
            if n < 1:
                raise ValueError
            return cls(failures=n)
        except ValueError:
            raise UsageError(f"--budget {text!r}: expected a count of failed hosts (>= 1) "
                             "or a percentage of the rollout's hosts (e.g. 10%)") from None

    def limit(self, hosts: int) -> int:
        """The number of failed gates that halts a rollout of `hosts` hosts: the count, or
        the smallest count whose share reaches the percentage (at least 1)."""
        if self.failures is not None:
            return self.failures
        assert self.percent is not None
        return max(1, math.ceil(self.percent * hosts / 100 - 1e-9))

    def to_json(self) -> BudgetJson:
        return {"failures": self.failures} if self.failures is not None else {
            "percent": self.percent}


def parse_batches(text: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]: the canary batch first, the last size repeating."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(s < 1 for s in sizes) or len(sizes) > 64:
        raise UsageError(f"--batches {text!r}: expected sizes >= 1 separated by commas, the "
                         "canary batch first (e.g. 1,2,4)")
    return sizes


def plan_batches(hosts: list[str], sizes: list[int]) -> list[list[str]]:
    """The hosts cut into batches of the given sizes in order, the last size repeating."""
    out, i, n = [], 0, 0
    while i < len(hosts):
        size = sizes[min(n, len(sizes) - 1)]
        out.append(hosts[i:i + size])
        i, n = i + size, n + 1
    return out


def as_change(change: Mapping[str, object], where: str) -> Change:
    """{verb, args} checked: BadInputError naming `where` otherwise."""
    verb, args = change.get("verb"), change.get("args")
    if not isinstance(verb, str) or not isinstance(args, list) or not all(
            isinstance(a, str) for a in args):
        raise BadInputError(f"{where}: change: expected {{verb: a string, args: strings}}")
    return cast(Change, change)


def rollout_id(change: Mapping[str, object], hosts: list[str]) -> str:
    """The same change over the same hosts is the same rollout (a re-run resumes it)."""
    blob = json.dumps({"change": change, "hosts": hosts}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def check_host_name(name: str) -> str:
    """An inventory host name as a record key; UsageError naming it when it is not one."""
    if not isinstance(name, str) or not _HOST.match(name):
        raise UsageError(f"host name {name!r}: expected letters, digits and ._-:@/ "
                         "(at most 253 characters)")
    return name


# ----------------------------------------------------------------------------- the record
def new_record(change: Mapping[str, object], hosts: list[str], batches: list[int],
               budget: Budget) -> Record:
    """A fresh record: every host pending."""
    if not hosts:
        raise UsageError("a rollout needs at least one host")
    if len(hosts) > MAX_HOSTS or len(set(hosts)) != len(hosts):
        raise UsageError("the rollout's hosts must be distinct (and at most "
                         f"{MAX_HOSTS})")
    return {"format": FORMAT, "version": VERSION, "id": rollout_id(change, hosts),
            "change": as_change(change, "--change"), "batches": batches,
            "budget": budget.to_json(),
            "created": utcnow(), "halted": None,
            "hosts": {h: {"state": "pending", "batch": None, "started": None,
                          "finished": None, "resumed": 0, "gate": None, "rollback": None}
                      for h in hosts}}


def _budget_of(rec: Record) -> Budget:
    b = rec["budget"]
    return Budget(b.get("failures"), b.get("percent"))


def counts(rec: Record) -> dict[str, int]:
    """Hosts per state, and the failed gates (failed and rolled-back hosts alike)."""
    out = {s: 0 for s in STATES}
    for h in rec["hosts"].values():
        out[h["state"]] += 1
    out["failed_gates"] = out["failed"] + out["rolled-back"]
    return out


def budget_state(rec: Record) -> BudgetState:
    """The budget, its limit for this rollout and whether it is spent."""
    c = counts(rec)
    limit = _budget_of(rec).limit(len(rec["hosts"]))
    return {**rec["budget"], "limit": limit, "failed_gates": c["failed_gates"],
            "spent": c["failed_gates"] >= limit}


def claim(rec: Record, asked: list[str]) -> dict[str, object]:
    """Which of `asked` (one batch, in order) start now; they become in-flight. A halted
    rollout or a spent budget starts none; a host already done, failed or rolled back is
    skipped with its state; one left in flight by a crash starts again marked `resume`."""
    start, resume, skip = [], [], {}
    bs = budget_state(rec)
    if bs["spent"] and rec["halted"] is None:
        rec["halted"] = {"at": utcnow(), "reason": f"failure budget reached: "
                         f"{bs['failed_gates']} failed gate(s), limit {bs['limit']}"}
    batch = 1 + max((h["batch"] or 0 for h in rec["hosts"].values()), default=0)
    for name in asked:
        h = rec["hosts"].get(name)
        if h is None:
            skip[name] = "not in this rollout"
        elif h["state"] in FINAL:
            skip[name] = h["state"]
        elif rec["halted"] is not None:
            skip[name] = "halted: " + rec["halted"]["reason"]
        else:
            if h["state"] == "in-flight":
                h["resumed"] += 1
                resume.append(name)
            else:
                h["state"], h["batch"], h["started"] = "in-flight", batch, utcnow()
            start.append(name)
    return {"start": start, "resume": resume, "skip": skip, "halted": rec["halted"],
            "budget": budget_state(rec)}


def mark(rec: Record, name: str, state: str, evidence: object) -> dict[str, object]:
    """Record a host's gate (done / failed) or its rollback (rolled-back) with evidence;
    RefusedError for a step out of order (a host is never marked done twice)."""
    h = rec["hosts"].get(name)
    if h is None:
        raise NotFoundError(f"host {name!r} is not in rollout {rec['id']}")
    if state not in MARKS:
        raise UsageError(f"state {state!r}: expected one of {', '.join(MARKS)}")
    if h["state"] not in MARKS[state]:
        raise RefusedError(f"{name} is {h['state']}: it cannot be marked {state} "
                           f"(only a host that is {' or '.join(MARKS[state])})")
    if len(json.dumps(evidence)) > MAX_EVIDENCE:
        evidence = {"truncated": True, "passed": isinstance(evidence, dict)
                    and evidence.get("passed")}
    if state == "rolled-back":
        h["rollback"] = evidence
    else:
        h["gate"] = evidence
    h["state"] = state
    h["finished"] = utcnow()
    bs = budget_state(rec)
    if bs["spent"] and rec["halted"] is None:
        rec["halted"] = {"at": utcnow(), "reason": f"failure budget reached: "
                         f"{bs['failed_gates']} failed gate(s), limit {bs['limit']}"}
    return {"host": name, "state": state, "halted": rec["halted"], "budget": bs}


def mark_results(rec: Record, results: object) -> dict[str, object]:
    """Mark a batch at once from {host: the hwmgr_rollout module's result}: a passed gate is
    done; a failed one is failed, then rolled-back when its rollback ran; a module that
    failed outright is a failed gate with its message; a host awaiting its reboot (or
    already marked) is left as it is, and said so."""
    if not isinstance(results, dict):
        raise BadInputError("--batch: expected an object {host: module result}")
    marked, left = {}, {}
    for name, res in results.items():
        h = rec["hosts"].get(name)
        if h is None:
            left[name] = "not in this rollout"
            continue
        if h["state"] != "in-flight":
            left[name] = f"already {h['state']}"
            continue
        res = res if isinstance(res, dict) else {}
        gate = res.get("gate")
        if not isinstance(gate, dict):
            if res.get("reboot_required"):
                left[name] = "awaits its reboot"
                continue
            why = str(res.get("msg") or "no gate result")[:400]
            gate = {"passed": False, "failed_steps": ["module"],
                    "steps": [{"step": "module", "passed": False, "detail": why}]}
        if gate.get("passed") is True and res.get("passed") is not False:
            mark(rec, name, "done", gate)
            marked[name] = "done"
            continue
        mark(rec, name, "failed", gate)
        marked[name] = "failed"
        rb = res.get("rollback")
        if isinstance(rb, dict) and not rb.get("error") and not rb.get("reboot_required"):
            mark(rec, name, "rolled-back", rb)
            marked[name] = "rolled-back"
    return {"marked": marked, "left": left, "halted": rec["halted"],
            "budget": budget_state(rec)}


def halt(rec: Record, reason: str) -> dict[str, object]:
    """Stop handing out hosts (hosts in flight finish); a second halt keeps the first."""
    if rec["halted"] is None:
        rec["halted"] = {"at": utcnow(), "reason": reason[:400] or "halted by hand"}
    return {"halted": rec["halted"]}


# ----------------------------------------------------------------------------- the file
def validate(doc: object, where: str) -> Record:
    """A record read back: BadInputError naming the file and field when it is not one."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BadInputError(f"{where}: not a hwmgr rollout record (format)")
    if doc.get("version") != VERSION:
        raise BadInputError(f"{where}: version: expected {VERSION}")
    hosts = doc.get("hosts")
    if not isinstance(hosts, dict):
        raise BadInputError(f"{where}: hosts: expected an object")
    for name, h in hosts.items():
        if not isinstance(h, dict) or h.get("state") not in STATES:
            raise BadInputError(f"{where}: hosts.{name}.state: expected one of "
                                f"{', '.join(STATES)}")
        if not isinstance(h.get("resumed"), int) or not (
                h.get("batch") is None or isinstance(h.get("batch"), int)):
            raise BadInputError(f"{where}: hosts.{name}: batch/resumed: expected integers")
    b = doc.get("budget")
    if not isinstance(b, dict) or not (isinstance(b.get("failures"), int) or isinstance(
            b.get("percent"), (int, float))):
        raise BadInputError(f"{where}: budget: expected {{failures: N}} or {{percent: P}}")
    if not isinstance(doc.get("change"), dict) or not isinstance(doc.get("id"), str):
        raise BadInputError(f"{where}: change/id missing")
    as_change(doc["change"], where)
    if doc.get("halted") is not None and not isinstance(doc["halted"], dict):
        raise BadInputError(f"{where}: halted: expected null or an object")
    return cast(Record, doc)  # the fields checked above; the rest only hwmgr writes


class RecordFile:
    """The record at `path`, read and written whole under the lock `path.lock`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).absolute()
        self.host = Host("/", SubprocessRunner(), writable=[str(self.path.parent)])

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> Record:
        """The record; NotFoundError when missing, BadInputError when damaged."""
        if not self.path.exists():
            raise NotFoundError(f"{self.path}: no such rollout record")
        doc = safejson.load_file(self.path, str(self.path), MAX_RECORD)
        return validate(doc, str(self.path))

    def write(self, rec: Record) -> None:
        """The record, whole (temp file, fsync, rename)."""
        self.host.write_bytes(str(self.path), json.dumps(rec, indent=1).encode() + b"\n")

    @contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive lock for one read-change-write (concurrent marks from many forks)."""
        self.host.makedirs(str(self.path.parent))
        fd = self.host.open_lock(str(self.path) + ".lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
