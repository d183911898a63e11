"""A file-based demo transaction on a temporary host root, run as a real subprocess.

test_transaction.py kills it at step boundaries (HWMGR_TEST_CRASH_AT) and recovers in a fresh
process, and uses it as a second process for the host-lock tests.
Usage: helpers_crash.py ROOT run|recover|hold SECONDS|try WAIT
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Any

from hwmgr.errors import HwmgrError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.transaction.engine import Ctx, Step, Transaction
from hwmgr.transaction.state import StateDir

STATE = "/var/lib/hwmgr"
FETCHED = "/var/cache/hwmgr/demo-1.0.src.rpm"
FILE_A = "/etc/demo/a.conf"
KO = "/lib/modules/6.1.0-demo/updates/dkms/m.ko"
ARMED = "/etc/demo/armed"
FAIL_UNDO_ENV = "HWMGR_TEST_FAIL_UNDO"  # step name whose undo raises (while set)

PARAMS: dict[str, Any] = {"pkg": "srpm-bytes", "a": "new a\n", "ko": "NEW-KO " * 5000}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _maybe_fail(ctx: Ctx, when: str) -> None:
    if ctx.params.get("fail") == f"{ctx.step}:{when}":
        raise RuntimeError(f"demo failure in {ctx.step}")
    if when == "undo" and os.environ.get(FAIL_UNDO_ENV) == ctx.step:
        raise RuntimeError(f"demo undo failure in {ctx.step}")


def _has(ctx: Ctx, logical: str, content: str) -> bool:
    return ctx.host.read_bytes(logical, limit=1 << 24) == content.encode()


def _fetch(ctx: Ctx) -> dict[str, Any]:
    ctx.host.write_bytes(FETCHED, ctx.params["pkg"].encode())
    return {"path": FETCHED, "sha256": _sha(ctx.params["pkg"].encode())}


def _write_a(ctx: Ctx) -> None:
    ctx.backup(FILE_A)
    ctx.host.write_bytes(FILE_A, ctx.params["a"].encode())
    _maybe_fail(ctx, "do")


def _replace_ko(ctx: Ctx) -> dict[str, Any]:
    rec = ctx.backup(KO)  # journaled (crash point "saved") before the file changes
    new = ctx.params["ko"].encode()
    ctx.host.write_bytes(KO, new)
    _maybe_fail(ctx, "do")
    return {"old_sha256": rec.get("sha256"), "new_sha256": _sha(new)}


def _arm(ctx: Ctx) -> None:
    ctx.host.write_bytes(ARMED, json.dumps({"txn": ctx.txn_id}).encode())
    _maybe_fail(ctx, "do")


def _undo_restore(path: str) -> Any:
    def undo(ctx: Ctx) -> None:
        _maybe_fail(ctx, "undo")
        ctx.restore(path)

    return undo


def _undo_arm(ctx: Ctx) -> None:
    _maybe_fail(ctx, "undo")
    ctx.host.remove(ARMED)


def demo_steps(params: dict[str, Any]) -> list[Step]:
    """fetch (irreversible) → write-a → replace-ko (point of no return) → arm."""
    return [
        Step("fetch", _fetch, None, lambda c: _has(c, FETCHED, c.params["pkg"])),
        Step("write-a", _write_a, _undo_restore(FILE_A), lambda c: _has(c, FILE_A, c.params["a"])),
        Step(
            "replace-ko",
            _replace_ko,
            _undo_restore(KO),
            lambda c: _has(c, KO, c.params["ko"]),
            commit_point=True,
        ),
        Step("arm", _arm, _undo_arm, lambda c: c.host.exists(ARMED)),
    ]


REGISTRY = {"demo": demo_steps}


def make_old_tree(root: str) -> None:
    """The 'before' host: a.conf and m.ko exist, nothing armed or fetched."""
    host = Host(root, SubprocessRunner())
    host.write_bytes(FILE_A, b"old a\n")
    host.write_bytes(KO, b"OLD-KO " * 4000)


def main(argv: list[str]) -> int:
    root, mode = argv[0], argv[1]
    state = StateDir(Host(root, SubprocessRunner()), STATE)
    try:
        if mode == "run":
            params = dict(PARAMS, **json.loads(argv[2] if len(argv) > 2 else "{}"))
            with state.lock(command="upgrade demo"):
                res = Transaction(state, REGISTRY, "demo", params, target="m").run()
            print(json.dumps(res.as_dict()))
        elif mode == "recover":
            with state.lock(command="recover"):
                print(json.dumps([r.as_dict() for r in Transaction.recover(state, REGISTRY)]))
        elif mode == "hold":
            with state.lock(command="upgrade be2net"):
                print("locked", flush=True)
                time.sleep(float(argv[2]))
        elif mode == "try":
            start = time.monotonic()
            print("trying", flush=True)  # the test releases only after reading this
            with state.lock(command="history", wait=float(argv[2])):
                print(f"acquired after {time.monotonic() - start:.2f}s", flush=True)
        else:
            print(f"unknown mode {mode}", file=sys.stderr)
            return 2
    except HwmgrError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
