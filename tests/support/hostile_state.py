"""Hostile state dirs (issue 25): a real journal of a committed upgrade, a check history and
an armed expectation, each damaged one field at a time (wrong types, blobs, deep nesting,
huge integers, lone surrogates), then read by the verbs that trust them most: `history`,
`plan rollback`, `verify`. Generators for tests/test_hostile_state.py (harness:
tests/support/hostile.py).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from functools import lru_cache
from pathlib import Path

from support import FIXTURES
from support.hostile import Case, Sandbox

DRIVER = "hwmgrtest"  # the upgrade the fixture journal records (tests/fixtures/journals)
JOURNAL_FIXTURE = FIXTURES / "journals" / "upgrade-interrupted-at-arm.sqlite"
# exits a read of a damaged state dir may give: a verdict, nothing to do, a refusal (9:
# the fixture upgrade is not installed here) or bad input (8)
STATE_CODES = frozenset({0, 1, 3, 4, 5, 7, 8, 9, 11})
DEEP = "[" * 5000 + "]" * 5000
HUGE = "9" * 5000

# SQL literals a hand edit, a disk error or another hwmgr could leave in a JSON column
JSON_VALUES = {
    "int": "5", "float": "1.5", "blob": "x'00ff80'", "string": "'\"text\"'", "list": "'[1]'",
    "null-json": "'null'", "garbage": "'{not json'", "deep": f"'{DEEP}'",
    "huge-int": f"'{{\"a\": {HUGE}}}'", "surrogate": "'{\"a\": \"x\\ud800y\"}'",
    "nul": "'{\"a\": \"x\\u0000\\u001b[2J\"}'",
}
# SQL literals for a plain text column (a time, a kind, a name)
TEXT_VALUES = {"int": "5", "float": "1.5", "blob": "x'00ff80'", "null": "NULL",
               "escape": "'\x1b[2Jx'", "long": "'" + "x" * 100_000 + "'"}
NOT_NULL = {"kind", "target", "state", "started", "name", "detail", }
# what an upgrade's params need (lifecycle/plan.py reads them), damaged one field at a time
PARAM_FIELDS = {
    "modules": ["5", "[]", "[5]", "\"x\"", "null", "{}"],
    "kernels": ["5", "[]", "[5]", "\"x\"", "null", "{}"],
    "version": ["5", "null", "[]", "{}"],
    "driver": ["5", "null", "[]"],
    "from": ["5", "[]", "{\"k\": 5}", "{\"k\": {\"m\": 5}}", "{\"k\": {\"m\": {\"version\": 5}}}"],
}
STEP_FIELDS = {  # step name -> its data fields
    "backup": {"saved": ["5", "[]", "{\"6.1.0-56-amd64\": 5}",
                         "{\"6.1.0-56-amd64\": {\"hwmgrtest\": 5}}",
                         "{\"6.1.0-56-amd64\": {\"hwmgrtest\": {\"version\": 5}}}", "{}"]},
    "install": {"uninstalled": ["5", "[]", "{\"6.1.0-56-amd64\": 5}"],
                "after": ["5", "[]", "{\"6.1.0-56-amd64\": 5}"]},
}
EXPECT_FIELDS = {
    "boot_attempts": ["\"x\"", "-1", "1.5", "true", HUGE[:30], "[]"],
    "txn": ["\"x\"", "1.5", "[]", "true"],
    "verified": ["\"x\"", "5", "[]"],
    "auto_rollback": ["\"x\"", "5", "[]"],
    "expected_version": ["5", "[]", "{}"],
    "kernels": ["[]", "{\"k\": 5}", "{\"k\": {\"m\": 5}}", "{\"k\": {\"m\": {\"version\": 5}}}"],
    "devices": ["[{\"address\": \"0000:00:01.0\", \"interfaces\": [5]}]",
                "[{\"address\": 5}]", "[5]"],
    "kind": ["5", "[]"],
}
CHECK_ROWS = {  # table.column -> damaged values
    "checks.at": ["5", "1.5", "x'00ff'"],
    "checks.summary": ["5", "x'00ff'", f"'{DEEP}'"],
    "check_items.status": ["'x'", "1.5", "x'00'", "99"],
    "check_items.actual": ["5", "x'00ff80'", f"'{DEEP}'", f"'{HUGE}'"],
    "check_items.check_id": ["'x'", "1.5"],
    "items.layer": ["5", "x'00'"],
    "items.item": ["5", "x'00'", "'\x1b[2J'"],
}


@lru_cache(maxsize=1)
def committed_journal() -> bytes:
    """The fixture journal with its upgrade committed (arm done): `hwmgrtest` 1.0 in effect."""
    src = sqlite3.connect(JOURNAL_FIXTURE)
    mem = sqlite3.connect(":memory:")
    src.backup(mem)
    src.close()
    mem.execute("UPDATE transactions SET state='committed', ended='2026-01-01T00:00:00.000Z'")
    mem.execute("UPDATE steps SET state='done', data='{\"expectation\": \"x\"}' WHERE name='arm'")
    mem.commit()
    return _serialise(mem)


def _serialise(db: sqlite3.Connection) -> bytes:
    """A database's bytes (sqlite3's serialize is 3.11+: dump through a scratch file)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "db.sqlite"
        out = sqlite3.connect(path)
        db.backup(out)
        out.close()
        db.close()
        return path.read_bytes()


def expectation() -> dict[str, object]:
    """An armed expectation for the fixture upgrade, as the arm step writes it."""
    return {"format": "hwmgr-expectation", "version": 1, "driver": DRIVER,
            "expected_version": "1.0", "modules": [DRIVER], "txn": 1, "kind": "upgrade",
            "kernels": {"6.1.0-56-amd64": {DRIVER: {
                "path": "/lib/modules/6.1.0-56-amd64/updates/dkms/hwmgrtest.ko",
                "version": "1.0", "srcversion": "E464A80C76EB85D36AA9C9E", "sha256": "0" * 64}}},
            "devices": [], "boot_attempts": 0}


def checks_db(path: Path) -> None:
    """A check history of three checks (drift, then ok) as `check` records it."""
    from hwmgr.compliance.history import _SCHEMA

    db = sqlite3.connect(path)
    db.executescript(_SCHEMA)
    for i, (code, actual) in enumerate([(1, '"slow"'), (1, '"slower"'), (0, None)], 1):
        db.execute("INSERT INTO checks(at, boot_id, catalog_version, compliant, summary)"
                   " VALUES (?,?,?,?,?)", (f"2026-01-0{i}T00:00:00.000Z", "b", "1", 0, "{}"))
        db.execute("INSERT OR IGNORE INTO items(id, layer, device, interface, item)"
                   " VALUES (1, 'setting', '0000:02:00.0', 'eth2', 'speed')")
        db.execute("INSERT INTO check_items VALUES (?,?,?,?)", (i, 1, code, actual))
    db.commit()
    db.close()


def _state(work: Path) -> Path:
    state = work / "state"
    if state.exists():
        shutil.rmtree(state)
    (state / "expectations").mkdir(parents=True)
    (state / "journal.sqlite").write_bytes(committed_journal())
    (state / "expectations" / f"{DRIVER}.json").write_text(json.dumps(expectation()))
    checks_db(state / "checks.sqlite")
    return state


VERBS = {
    "history": lambda s: ["history", "--state-dir", s, "--steps"],
    "history-json": lambda s: ["history", "--state-dir", s, "--json", DRIVER],
    "checks": lambda s: ["history", "--state-dir", s, "--checks"],
    "plan": lambda s: ["plan", "rollback", DRIVER, "--state-dir", s],
    "verify": lambda s: ["verify", "--state-dir", s, "--on-failure", "report"],
}


def _case(kind: str, name: str, sql: str | None, verbs: tuple[str, ...], *,
          db: str = "journal.sqlite", expect: dict[str, object] | None = None,
          names: tuple[str, ...] = ()) -> list[Case]:
    out = []
    for verb in verbs:
        def build(work: Path, sb: Sandbox, sql: str | None = sql, verb: str = verb) -> list[str]:
            # verify writes what it counts (boot_attempts) into the state dir: that one lives
            # beside the case's input, not in it, which must come out unchanged
            state = _state(sb.scratch if verb == "verify" else work)
            if sql is not None:
                con = sqlite3.connect(state / db)
                con.execute(sql)
                con.commit()
                con.close()
            if expect is not None:
                (state / "expectations" / f"{DRIVER}.json").write_text(json.dumps(expect))
            return VERBS[verb](str(state))

        out.append(Case(kind, f"{kind}/{name}/{verb}", build, STATE_CODES, names))
    return out


def journal_cases() -> list[Case]:
    """Every JSON and text column of a committed transaction and its steps, damaged."""
    out: list[Case] = []
    for col in ("params", "notes", "results"):
        for name, lit in JSON_VALUES.items():
            out += _case("state-journal", f"{col}={name}",
                         f"UPDATE transactions SET {col}={lit}", ("history", "plan"))
    for name, lit in JSON_VALUES.items():
        out += _case("state-journal", f"step-data={name}", f"UPDATE steps SET data={lit}",
                     ("history", "plan"))
    for col in ("kind", "target", "state", "started", "ended", "hostname", "command", "error"):
        for name, lit in TEXT_VALUES.items():
            if name == "null" and col in NOT_NULL:
                continue
            out += _case("state-journal", f"{col}={name}",
                         f"UPDATE transactions SET {col}={lit}", ("history-json", "plan"))
    for col in ("name", "state", "started", "error"):
        for name, lit in TEXT_VALUES.items():
            if name == "null" and col in NOT_NULL and col != "started":
                continue
            out += _case("state-journal", f"step-{col}={name}", f"UPDATE steps SET {col}={lit}",
                         ("history", "plan"))
    for name, lit in TEXT_VALUES.items():
        if name == "null":
            continue
        out += _case("state-journal", f"pid={name}", f"UPDATE transactions SET pid={lit}",
                     ("history-json",))
        out += _case("state-journal", f"event-detail={name}",
                     f"UPDATE events SET detail={lit}", ("history-json",))
    return out


def params_cases() -> list[Case]:
    """The fields of an upgrade's params and step data that a rollback plan reads."""
    out: list[Case] = []
    for key, values in PARAM_FIELDS.items():
        for i, value in enumerate(values):
            sql = f"UPDATE transactions SET params=json_set(params, '$.\"{key}\"', json('{value}'))"
            out += _case("state-params", f"{key}#{i}", sql, ("plan", "history"))
        sql = f"UPDATE transactions SET params=json_remove(params, '$.\"{key}\"')"
        out += _case("state-params", f"{key}-missing", sql, ("plan",))
    for step, fields in STEP_FIELDS.items():
        for key, values in fields.items():
            for i, value in enumerate(values):
                sql = (f"UPDATE steps SET data=json_set(data, '$.\"{key}\"', json('{value}'))"
                       f" WHERE name='{step}'")
                out += _case("state-params", f"{step}.{key}#{i}", sql, ("plan",))
    return out


def expectation_cases() -> list[Case]:
    """The armed expectation `verify` reads, one field damaged at a time."""
    out: list[Case] = []
    for key, values in EXPECT_FIELDS.items():
        for i, value in enumerate(values):
            exp = {**expectation(), key: json.loads(value)}
            out += _case("state-expect", f"{key}#{i}", None, ("verify",), expect=exp,
                         names=())
    return out


def checks_cases() -> list[Case]:
    """The check history `history --checks` explains drift from."""
    out: list[Case] = []
    for where, values in CHECK_ROWS.items():
        table, col = where.split(".")
        for i, lit in enumerate(values):
            row = {"checks": "id=2", "items": "id=1", "check_items": "check_id=2"}[table]
            out += _case("state-checks", f"{where}#{i}",
                         f"UPDATE {table} SET {col}={lit} WHERE {row}",
                         ("checks",), db="checks.sqlite")
    return out


def state_kinds() -> dict[str, list[Case]]:
    return {"state-journal": journal_cases(), "state-params": params_cases(),
            "state-expect": expectation_cases(), "state-checks": checks_cases()}

