"""Journaled, undoable transactions: ordered steps with do / undo / check.

The contract is in docs/architecture.md, "Transactions".

Every mutating command (upgrade, rollback, recover) is a `Transaction` of `Step`s built by a
factory registered under the transaction's kind, so recovery can rebuild the steps from the
journal alone, without the process that started them.

Run: each step is journaled `started` (SQLite, synchronous=FULL) before `do`, then `done`
with its data after `do` returned and `check()` confirmed the effect. If step k fails, k is
undone (undo is idempotent and gets whatever data the step saved), then k-1 … 0 in reverse;
the transaction ends `rolled-back`, or `failed` (left open, error names the step) if an undo
fails.

Recovery policy (`Transaction.recover`, run under the host lock at start-up):
  1. every transaction still `running`/`interrupted`/`failed` is resumed, oldest first;
  2. a step journaled `started` but not `done` is resolved with its `check()`: effect
     present -> `done`, otherwise it stays in doubt (undo or re-do will handle it);
  3. roll FORWARD (re-run the remaining steps) when the transaction was going forward and
     has passed its point of no return (a `commit_point=True` step is done, or all steps are);
     otherwise roll BACK. A forward failure turns into a full roll back.
  The result is exactly the old or the new state with the journal closed, or `failed` with
  the transaction still open and an error naming the step.

Step contract: `do` may be re-run after a crash, so it must overwrite partial results; it
should `ctx.save()` what undo needs (e.g. `ctx.backup(path)`) BEFORE changing anything.
`undo` must be idempotent and cope with data saved by a partially applied `do`.

Signals (`interrupt`): SIGINT, SIGTERM, SIGHUP are deferred while a transaction runs or
recovers, and each is answered on stderr at once; going forward, the first one stops the
command in flight (`runner.stop_commands`: a dkms build is not waited for), so the running
step fails, the steps done are undone in reverse, and it ends `rolled-back` naming the
signal. Past the point of no return the recovery policy holds for signals too: the remaining
steps run and the transaction commits (a rollback's `restore` has removed the DKMS version
its undo could not bring back). After it ends, they stay deferred until the command ends
(`interrupt.release`).
SIGKILL or power loss leave it for `hwmgr recover`.

Test hook (`testhook`): env
`HWMGR_TEST_CRASH_AT="<step-name|seq>:<phase>[:INT|TERM|HUP][,...]"` SIGKILLs the process
at a boundary (or sends it the named signal); phases: before (journaled started), saved
(after ctx.save), after (do returned, not yet journaled done), done (journaled done), undo
(before an undo runs).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

from hwmgr.errors import EXIT_INTERNAL, HwmgrError, RefusedError
from hwmgr.host.capture import boot_id
from hwmgr.host.runner import allow_commands, stop_commands
from hwmgr.transaction.interrupt import answer, deferring_signals
from hwmgr.transaction.journal import Journal, TxnRow
from hwmgr.transaction.pending import NOTE
from hwmgr.transaction.result import TxnResult
from hwmgr.transaction.state import BackupRecord, StateDir, backup_record
from hwmgr.transaction.testhook import crash_point

TEST_CRASH_PHASES = ("before", "saved", "after", "done", "undo")
UNDO_FAILED = "; then the undo of step "  # joins the cause and a failed undo in journaled errors
STEP_STATES = ("pending", "started", "done", "failed", "undone", "kept")
TXN_STATES = ("running", "interrupted", "failed", "committed", "rolled-back")


class TransactionError(HwmgrError):
    """A transaction failed, was rolled back, or cannot be recovered."""


class StepUI(Protocol):
    """A progress reporter the engine tells of each step's start and undo (never journaled);
    steps may ask it for more (lifecycle.steps.UpgradeUI)."""

    def step(self, name: str, phase: str) -> None: ...


@dataclass(frozen=True)
class Step:
    """One undoable change. `undo=None` marks it irreversible (its effect is kept on rollback).

    `commit_point=True` marks the point of no return: once this step is done, recovery after
    a crash finishes the transaction instead of undoing it.
    """

    name: str
    do: Callable[[Ctx], Optional[Mapping[str, object]]]  # data merged into the journal
    undo: Optional[Callable[[Ctx], None]]
    check: Callable[[Ctx], bool]
    commit_point: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise TransactionError(f"step {self.name!r}: name must be a non-empty string")
        for attr in ("do", "check"):
            if not callable(getattr(self, attr)):
                raise TransactionError(f"step '{self.name}': {attr} must be callable")
        if self.undo is not None and not callable(self.undo):
            raise TransactionError(f"step '{self.name}': undo must be callable or None")

    @property
    def reversible(self) -> bool:
        return self.undo is not None


StepFactory = Callable[[dict[str, object]], Sequence[Step]]  # params as journaled (JSON)
Registry = Mapping[str, StepFactory]


class Ctx:
    """What a step's do / undo / check sees: host, params, its journaled data, helpers."""

    def __init__(self, txn: Transaction, seq: int, phase: str) -> None:
        self._txn = txn
        self.seq = seq
        self.phase = phase  # "do" | "undo" | "check"
        self.step = txn.steps[seq].name
        self.state: StateDir = txn.state
        self.host = txn.state.host
        self.txn_id: int = txn.id or 0
        self.kind = txn.kind
        self.target = txn.target
        # JSON as journaled; a step kind narrows it once (e.g. lifecycle.params.upgrade)
        self.params: dict[str, Any] = txn.params
        self.ui: StepUI | None = txn.ui  # progress reporter, None in recovery and tests

    @property
    def data(self) -> dict[str, Any]:
        """This step's journaled data (a copy; change it with `save`)."""
        return copy.deepcopy(self._txn._data[self.seq])

    def save(self, **values: object) -> None:
        """Journal data durably now (before changing anything undo would need to know)."""
        merged = _json_roundtrip({**self._txn._data[self.seq], **values}, f"step '{self.step}'")
        self._txn.journal.save_data(self.txn_id, self.seq, merged)
        self._txn._data[self.seq] = merged
        if self.phase == "do":
            crash_point(self._txn.steps[self.seq].name, self.seq, "saved")

    def output(self, step_name: str) -> dict[str, Any]:
        """Journaled data of another step of this transaction (e.g. the fetched path)."""
        for i, step in enumerate(self._txn.steps):
            if step.name == step_name:
                return copy.deepcopy(self._txn._data[i])
        raise TransactionError(f"transaction {self.txn_id} has no step '{step_name}'")

    def log(self, message: str) -> None:
        """Append a line to the transaction's event log."""
        self._txn.journal.event(self.txn_id, "log", message, seq=self.seq)

    def note(self, **values: object) -> None:
        """Attach free-form JSON notes to the transaction (shown by `hwmgr history`)."""
        self._txn.journal.add_notes(self.txn_id, **_json_roundtrip(values, "notes"))

    def backup(self, logical: str) -> BackupRecord:
        """Back up a host file under the state dir, save the record as data[`backup:<path>`]."""
        record = self.state.backup_file(logical, self.txn_id)
        self.save(**{f"backup:{logical}": record})
        return record

    def restore(self, logical: str) -> bool:
        """Restore a file this step backed up; False when no backup was recorded."""
        record = self._txn._data[self.seq].get(f"backup:{logical}")
        if record is None:
            return False
        self.state.restore_file(backup_record(record, f"step '{self.step}' backup:{logical}"))
        return True


class Transaction:
    """A list of steps from `registry[kind](params)`, run and journaled under the host lock."""

    def __init__(
        self,
        state: StateDir,
        registry: Registry,
        kind: str,
        params: Mapping[str, object] | None = None,
        *,
        target: str = "",
        command: str = "",
        ui: StepUI | None = None,
        results: Mapping[str, object] | None = None,
    ) -> None:
        self.state = state
        self.results = results  # journaled with the transaction (e.g. throughput before)
        self.ui = ui  # optional progress reporter (step(name, phase)); never journaled
        self.kind = kind
        self.target = target
        self.command = command
        # steps are built from the JSON form of params, exactly as recovery will rebuild them
        self.params = _json_roundtrip(params or {}, f"'{kind}' params")
        self.steps: list[Step] = _build_steps(registry, kind, self.params)
        self.id: int | None = None
        self.direction = "forward"
        self._states = ["pending"] * len(self.steps)
        self._data: list[dict[str, object]] = [{} for _ in self.steps]
        self._recovered = False
        self.signal: str | None = None  # the first deferred signal that arrived (e.g. SIGINT)
        self._at = (0, "before")  # (seq, "before" | "running" | "done" | "undo" | "ended")

    def _past_commit(self) -> bool:
        """Going forward past the point of no return (a `commit_point` step is done): from
        here a signal, like a crash (`recover`), finishes the transaction instead of undoing."""
        return self.direction == "forward" and any(
            st == "done" and s.commit_point for s, st in zip(self.steps, self._states))

    def _note_signal(self, name: str) -> None:
        """A deferred signal: the first going forward stops the command in flight, unless the
        transaction is past its point of no return; each is answered on stderr at once, naming
        the step being undone (or finished)."""
        first, self.signal = self.signal is None, self.signal or name
        seq, phase = self._at
        past = phase not in ("ended", "undo") and self._past_commit()
        if first and self.direction == "forward" and phase != "ended" and not past:
            stop_commands()
        answer(name, first, seq + 1, self.steps[seq].name, "finishing" if past else phase)

    @property
    def journal(self) -> Journal:
        if not self.state.locked:
            raise HwmgrError(
                f"internal: transaction '{self.kind}' used without the host lock"
                " (wrap it in `with state.lock(...)`)",
                exit_code=EXIT_INTERNAL,
            )
        return self.state.journal()

    def run(self) -> TxnResult:
        """Run all steps; on failure undo in reverse. Refuses while another txn is open."""
        if self.id is not None:
            raise TransactionError(f"transaction {self.id} ({self.kind}) has already run")
        # from the journal's first row on, and held until the command ends (cli.main)
        with deferring_signals(self._note_signal, hold=True):
            try:
                return self._begin()
            finally:
                self._at = (self._at[0], "ended")
                allow_commands()

    def _begin(self) -> TxnResult:
        journal = self.journal
        for t in journal.open_transactions():
            raise RefusedError(
                f"transaction {t['id']} ({t['kind']} {t['target']}".rstrip()
                + f") is still {t['state']}; run `hwmgr recover` first"
            )
        host = self.state.host
        self.id = journal.begin(
            self.kind,
            self.target,
            self.params,
            [(s.name, s.reversible, s.commit_point) for s in self.steps],
            command=self.command,
            results=self.results,
            kernel=host.read_attr("/proc/sys/kernel/osrelease") or host.meta.get("kernel"),
            hostname=host.read_attr("/proc/sys/kernel/hostname") or host.meta.get("hostname"),
        )
        return self._forward()

    # ------------------------------------------------------------------ engine
    def _set(self, seq: int, state: str, *, data: Mapping[str, object] | None = None,
             error: str | None = None, event: str | None = None) -> None:
        self.journal.set_step(self.id or 0, seq, state, data=data, error=error, event=event)
        self._states[seq] = state

    def _interrupted(self, seq: int) -> TxnResult | None:
        """Roll back when a deferred signal arrived (checked before step `seq` runs, and with
        `seq == len(steps)` before the commit)."""
        if self.signal is None or self._past_commit():
            return None
        done = [s.name for s, st in zip(self.steps, self._states) if st == "done"]
        where = f"after step '{done[-1]}'" if done else "before its first step"
        return self._backward(f"interrupted by {self.signal} {where}")

    def _forward(self) -> TxnResult:
        for seq, step in enumerate(self.steps):
            if self._states[seq] == "done":
                continue
            stopped = self._interrupted(seq)
            if stopped is not None:
                return stopped
            self._set(seq, "started")
            self._at = (seq, "running")
            crash_point(step.name, seq, "before")
            if self.ui is not None:
                self.ui.step(step.name, "start")
            try:
                out = step.do(Ctx(self, seq, "do"))
                if out is not None and not isinstance(out, dict):
                    raise TypeError(f"do() returned {type(out).__name__}, expected dict or None")
                data = _json_roundtrip({**self._data[seq], **(out or {})}, f"step '{step.name}'")
                self._data[seq] = data
                if not step.check(Ctx(self, seq, "check")):
                    raise TransactionError("do() finished but check() says the effect is absent")
            except Exception as exc:  # noqa: BLE001 - any step failure triggers a rollback
                self._set(seq, "failed", error=_one_line(exc))
                if self.signal:  # stopped by it (its command was), or failed meanwhile
                    return self._backward(f"interrupted by {self.signal} during step "
                                          f"'{step.name}': {_one_line(exc)}")
                return self._backward(f"step '{step.name}' failed: {_one_line(exc)}")
            crash_point(step.name, seq, "after")
            self._set(seq, "done", data=data)
            self._at = (seq, "done")
            crash_point(step.name, seq, "done")
        stopped = self._interrupted(len(self.steps))
        if stopped is not None:
            return stopped
        # the boot this commit happens in: until the host reboots, what needs one is pending
        # (hwmgr.transaction.pending); a re-run after a crash overwrites it with the new boot
        booted = boot_id(self.state.host)
        if booted is not None:
            self.journal.add_notes(self.id or 0, **{NOTE: booted})
        self.journal.set_txn(self.id or 0, state="committed")
        return self._result("committed")

    def _backward(self, error: str) -> TxnResult:
        error = error.split(UNDO_FAILED, 1)[0]  # the cause, not an earlier attempt's undo error
        self.direction = "back"
        allow_commands()  # the undo runs its commands: a signal now only gets an answer
        self.journal.set_txn(self.id or 0, direction="back", error=error)
        for seq in reversed(range(len(self.steps))):
            step = self.steps[seq]
            if self._states[seq] in ("pending", "undone", "kept"):
                continue
            if step.undo is None:
                self._set(seq, "kept", event="kept (irreversible)")
                continue
            self._at = (seq, "undo")
            crash_point(step.name, seq, "undo")
            self.journal.event(self.id or 0, "undo-started", seq=seq)
            if self.ui is not None:
                self.ui.step(step.name, "undo")
            try:
                step.undo(Ctx(self, seq, "undo"))
            except Exception as exc:  # noqa: BLE001 - report which undo failed, keep txn open
                msg = (
                    f"{error}{UNDO_FAILED}'{step.name}' failed: {_one_line(exc)};"
                    f" transaction {self.id} left open, run `hwmgr recover`"
                )
                self.journal.set_step(
                    self.id or 0, seq, self._states[seq], error=_one_line(exc), event="undo-failed"
                )
                self.journal.set_txn(self.id or 0, state="failed", error=msg)
                return self._result("failed", msg)
            self._set(seq, "undone")
        self.journal.set_txn(self.id or 0, state="rolled-back", error=error)
        return self._result("rolled-back", error)

    def _result(self, state: str, error: str | None = None) -> TxnResult:
        return TxnResult(
            id=self.id,
            kind=self.kind,
            target=self.target,
            state=state,
            direction=self.direction,
            error=error,
            recovered=self._recovered,
            steps=[{"name": s.name, "state": st} for s, st in zip(self.steps, self._states)],
            signal=self.signal,
        )

    # ------------------------------------------------------------------ recovery
    @classmethod
    def recover(cls, state: StateDir, registry: Registry) -> list[TxnResult]:
        """Finish or undo every open transaction (policy in the module docstring)."""
        if not state.locked:
            raise HwmgrError("internal: recover() needs the host lock", exit_code=EXIT_INTERNAL)
        return [cls._resume(state, registry, row) for row in state.journal().open_transactions()]

    @classmethod
    def _resume(cls, state: StateDir, registry: Registry, row: TxnRow) -> TxnResult:
        journal = state.journal()
        tid, kind, target = row["id"], row["kind"], row["target"]
        if row["state"] == "running":
            journal.set_txn(tid, state="interrupted", error=row["error"])
            row["state"] = "interrupted"
        try:
            txn = cls(
                state, registry, kind, row["params"], target=target, command=row["command"] or ""
            )
            names = [s.name for s in txn.steps]
            journaled = [s["name"] for s in row["steps"]]
            if names != journaled:
                raise TransactionError(
                    f"its steps changed since it was journaled ({journaled} -> {names})"
                )
        except HwmgrError as exc:
            msg = f"transaction {tid} ({kind} {target}".rstrip() + f") cannot be recovered: {exc}"
            journal.event(tid, "recover-failed", msg)
            return TxnResult(
                tid,
                kind,
                target,
                row["state"],
                row["direction"],
                msg,
                True,
                [{"name": s["name"], "state": s["state"]} for s in row["steps"]],
            )
        txn.id = tid
        txn.direction = row["direction"]
        txn._recovered = True
        txn._states = [s["state"] for s in row["steps"]]
        txn._data = [s["data"] for s in row["steps"]]
        done = [i for i, st in enumerate(txn._states) if st == "done"]
        txn._at = (done[-1], "done") if done else (0, "before")  # what a signal's answer names
        with deferring_signals(txn._note_signal, hold=True):
            try:
                return txn._finish(row["error"])
            finally:
                txn._at = (txn._at[0], "ended")
                allow_commands()

    def _finish(self, prior_error: str | None) -> TxnResult:
        for seq, step in enumerate(self.steps):
            if self._states[seq] != "started":
                continue
            try:
                present = bool(step.check(Ctx(self, seq, "check")))
            except Exception as exc:  # noqa: BLE001 - unknown counts as "not done"
                present = False
                self.journal.event(self.id or 0, "check-failed", _one_line(exc), seq=seq)
            if present:
                self._set(seq, "done", event="resolved: check() found the effect present")
            else:
                self.journal.event(self.id or 0, "in-doubt", "check() found no effect", seq=seq)
        done = [st == "done" for st in self._states]
        passed = all(done) or any(d and s.commit_point for d, s in zip(done, self.steps))
        forward = self.direction == "forward" and passed and "failed" not in self._states
        self.journal.event(self.id or 0, "recover", "rolling " + ("forward" if forward else "back"))
        if forward:
            return self._forward()
        return self._backward(prior_error or self._interruption())

    def _interruption(self) -> str:
        """Where an interrupted transaction stopped, for its journaled error."""
        pairs = list(zip(self.steps, self._states))
        at = [s.name for s, st in pairs if st in ("started", "failed")]
        if at:
            return f"interrupted at step '{at[0]}'"
        done = [s.name for s, st in pairs if st == "done"]
        if done:
            return f"interrupted after step '{done[-1]}', before the point of no return"
        return "interrupted before its first step"


def _build_steps(registry: Registry, kind: str, params: dict[str, object]) -> list[Step]:
    factory = registry.get(kind)
    if factory is None:
        raise TransactionError(f"no steps are registered for transaction kind '{kind}'")
    try:
        steps = list(factory(params))
    except HwmgrError:
        raise
    except Exception as exc:  # noqa: BLE001 - a factory bug must not become a traceback
        raise TransactionError(f"cannot build '{kind}' steps: {_one_line(exc)}") from None
    seen: set[str] = set()
    for step in steps:
        if not isinstance(step, Step):
            raise TransactionError(f"'{kind}' factory returned {type(step).__name__}, not Step")
        if step.name in seen:
            raise TransactionError(f"'{kind}' has two steps named '{step.name}'")
        seen.add(step.name)
    if not steps:
        raise TransactionError(f"'{kind}' factory returned no steps")
    return steps


def _json_roundtrip(value: Mapping[str, object], what: str) -> dict[str, object]:
    """`value` as the journal will hand it back (a JSON object: the dump of a mapping)."""
    try:
        copied: object = json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise TransactionError(f"{what}: data is not JSON-serialisable ({exc})") from None
    if not isinstance(copied, dict):  # a mapping dumps as an object: never, but say so
        raise TransactionError(f"{what}: data is not a JSON object")
    return copied


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, HwmgrError):
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())
