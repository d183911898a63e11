"""Reboot pending from the journal and the boot id: real transactions through the engine on a
temporary host root whose /proc/sys/kernel/random/boot_id the test sets (a "reboot" is a new
id), a snapshot with and without a recorded boot id, and journals that are old or damaged."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from hwmgr.errors import BadInputError
from hwmgr.host.capture import BOOT_ID, BOOT_ID_PATH, boot_id
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.transaction.engine import Step, Transaction
from hwmgr.transaction.pending import reboot_needed, reboot_pending
from hwmgr.transaction.state import StateDir

STATE = "/var/lib/hwmgr"
BOOT1 = "0b6f7d2e-1c4a-4b8e-9f3d-5a6b7c8d9e01"
BOOT2 = "7c1d9e3f-2b5a-4c6d-8e7f-9a0b1c2d3e02"


def _write_step(name: str) -> Step:
    path = f"/etc/demo/{name}"
    return Step(name, lambda c: c.host.write_bytes(path, c.target.encode()),
                lambda c: c.host.remove(path), lambda c: c.host.exists(path))


REGISTRY = {kind: (lambda p, kind=kind: [_write_step(kind)])
            for kind in ("upgrade", "rollback", "apply")}


def boot(root: Path, bid: str) -> None:
    """Make `bid` the host's current boot id (what a reboot does)."""
    p = root / BOOT_ID_PATH.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(bid + "\n")


def commit(host: Host, kind: str, target: str, **params: object) -> int:
    st = StateDir(host, STATE)
    with st.lock(command="test"):
        res = Transaction(st, REGISTRY, kind, params, target=target).run()
    st.close()
    assert res.ok, res.error
    return int(res.id or 0)


@pytest.fixture
def host(tmp_path: Path) -> Host:
    boot(tmp_path, BOOT1)
    return Host(tmp_path, SubprocessRunner())


def test_commit_notes_the_boot_and_it_is_pending_until_the_next(host: Host) -> None:
    txn = commit(host, "upgrade", "be2net", version="2.0")
    st = StateDir(host, STATE)
    assert st.read_journal().get(txn)["notes"]["boot_id"] == BOOT1
    st.close()
    [entry] = reboot_pending(host, STATE)
    assert entry["driver"] == entry["target"] == "be2net" and entry["txn"] == txn
    assert entry["kind"] == "upgrade" and entry["status"] == "pending"
    assert "committed during this boot" in entry["reason"]
    boot(host.root, BOOT2)
    assert reboot_pending(host, STATE) == []


def test_newest_per_target_and_only_kinds_that_need_a_reboot(host: Host) -> None:
    boot(host.root, BOOT2)
    commit(host, "upgrade", "ixgbe", version="5.0")  # an earlier boot
    boot(host.root, BOOT1)
    up = commit(host, "upgrade", "be2net", version="2.0")
    back = commit(host, "rollback", "be2net", version="1.0")
    commit(host, "apply", "enp1s0f0")  # a settings apply that is live at once
    tuned = commit(host, "apply", "eth9", needs_reboot=True)
    entries = reboot_pending(host, STATE)
    assert [(e["target"], e["txn"], e["kind"]) for e in entries] == [
        ("eth9", tuned, "apply"), ("be2net", back, "rollback")]
    assert up not in [e["txn"] for e in entries]


def test_no_journal_and_journal_without_boot_ids(host: Host) -> None:
    assert reboot_pending(host, STATE) == []
    st = StateDir(host, STATE)
    with st.lock(command="test"):  # journaled by an hwmgr that did not note boot ids
        j = st.journal()
        j.set_txn(j.begin("upgrade", "be2net", {}, []), state="committed")
    st.close()
    assert reboot_pending(host, STATE) == []
    assert not (host.root / "var/lib/hwmgr/journal.sqlite-journal").exists()


def test_current_boot_unknown(host: Host) -> None:
    commit(host, "upgrade", "be2net", version="2.0")
    (host.root / BOOT_ID_PATH.lstrip("/")).write_text("not-a-uuid\n")
    assert boot_id(host) is None
    [entry] = reboot_pending(host, STATE)
    assert entry["status"] == "unknown" and "cannot be read" in entry["reason"]


def test_snapshot_boot_id_recorded_or_not(host: Host) -> None:
    commit(host, "upgrade", "be2net", version="2.0")
    meta = {"format": "hwmgr-snapshot", "records": [BOOT_ID]}
    snap = Host(host.root, SubprocessRunner(), meta=meta)
    assert boot_id(snap) == BOOT1
    assert [e["status"] for e in reboot_pending(snap, STATE)] == ["pending"]
    old = Host(host.root, SubprocessRunner(), meta={**meta, "records": []})
    assert boot_id(old) is None  # an older snapshot: the file is not trusted to be there
    [entry] = reboot_pending(old, STATE)
    assert entry["status"] == "unknown" and "retake it" in entry["reason"]


def test_damaged_journal_is_bad_input(host: Host) -> None:
    txn = commit(host, "upgrade", "be2net", version="2.0")
    db = sqlite3.connect(host.root / "var/lib/hwmgr/journal.sqlite")
    db.execute("UPDATE transactions SET notes='[1,' WHERE id=?", (txn,))
    db.commit()
    db.close()
    assert reboot_pending(host, STATE) == []  # unreadable notes: no boot id, nothing known
    (host.root / "var/lib/hwmgr/journal.sqlite").write_bytes(b"garbage" * 100)
    with pytest.raises(BadInputError, match="journal.sqlite"):
        reboot_pending(host, STATE)


def test_hostile_notes_are_not_trusted(host: Host) -> None:
    txn = commit(host, "upgrade", "be2net", version="2.0")
    db = sqlite3.connect(host.root / "var/lib/hwmgr/journal.sqlite")
    db.execute("UPDATE transactions SET notes=? WHERE id=?",
               (json.dumps({"boot_id": {"x": 1}}), txn))
    db.commit()
    db.close()
    assert reboot_pending(host, STATE) == []


def test_the_newest_transaction_of_a_target_decides(host: Host) -> None:
    """An upgrade, then in the same boot a rollback that put back the build still loaded (its
    plan journaled needs_reboot false): nothing is pending, though the upgrade was."""
    commit(host, "upgrade", "be2net", version="2.0", needs_reboot=True)
    assert [e["kind"] for e in reboot_pending(host, STATE)] == ["upgrade"]
    commit(host, "rollback", "be2net", version="1.0", needs_reboot=False)
    assert reboot_pending(host, STATE) == []


@pytest.mark.parametrize("kernels, loaded, leaves, needed", [
    (["6.1.0-56-amd64"], "ABC", None, True),  # an upgrade of a loaded module
    (["6.1.0-56-amd64"], "ABC", "ABC", False),  # a rollback to the very build loaded
    (["6.1.0-56-amd64"], "ABC", "DEF", True),  # a rollback to another build
    (["6.1.0-56-amd64"], None, None, False),  # not loaded: the next load takes the new one
    (["6.1.0-99-amd64"], None, None, True),  # another kernel: booting it is the reboot
])
def test_the_rule_a_plan_journals(tmp_path: Path, kernels: list[str], loaded: str | None,
                                  leaves: str | None, needed: bool) -> None:
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("6.1.0-56-amd64\n")
    if loaded:
        (tmp_path / "sys/module/be2net").mkdir(parents=True)
        (tmp_path / "sys/module/be2net/srcversion").write_text(loaded + "\n")
    left = {"6.1.0-56-amd64": {"be2net": {"srcversion": leaves}}} if leaves else None
    host = Host(tmp_path, SubprocessRunner())
    assert reboot_needed(host, ["be2net"], kernels, left) is needed


@pytest.mark.slow  # a whole check of a snapshot
def test_check_verb_exits_7_on_a_snapshot_taken_before_the_reboot(tmp_path: Path) -> None:
    """`hwmgr check --root` of a host whose journal holds an upgrade committed in the boot the
    snapshot saw: reboot pending, exit 7 (the compliance itself is clean: seed002-after)."""
    import shutil

    from support import HOSTS, run_cli

    from hwmgr.host.capture import BOOT_ID

    root = tmp_path / "snap"
    shutil.copytree(HOSTS / "seed002-after", root, symlinks=True)
    boot(root, BOOT1)
    meta = json.loads((root / "snapshot.json").read_text())
    meta["records"] = [*meta.get("records", []), "state", BOOT_ID]
    (root / "snapshot.json").write_text(json.dumps(meta))
    txn = commit(Host(root, SubprocessRunner()), "upgrade", "be2net", version="2.0")
    res = run_cli("check", "--root", str(root))
    assert res.returncode == 7, res.stderr
    assert f"reboot pending: be2net: upgrade #{txn} of be2net" in res.stdout, res.stdout


@pytest.mark.parametrize("passed", [True, False])
def test_the_kernel_gate_path_neither_makes_nor_settles_a_reboot(host: Host,
                                                                  passed: bool) -> None:
    """The kernel gate readies a kernel not yet booted and journals nothing: after an upgrade
    (pending in this boot) its record changes no reboot answer; check's exit is 7 either way
    (its kernel_ready item ok, or drift in the driver layer the reboot may fix); after the
    reboot into the running kernel (the default held, or a new boot anyway) nothing is
    pending and check's exit is the gate's: 0 passed, 5 failed."""
    from hwmgr.compliance.check import exit_for, gate_finding
    from hwmgr.lifecycle.gate import gaterecord, kernelgate

    running, new = "6.1.0-56-amd64", "6.1.0-58-amd64"
    for p in ("proc/sys/kernel/osrelease", f"boot/vmlinuz-{new}"):
        (host.root / p).parent.mkdir(parents=True, exist_ok=True)
    (host.root / "proc/sys/kernel/osrelease").write_text(running + "\n")
    (host.root / f"boot/vmlinuz-{new}").write_bytes(b"")
    (host.root / f"lib/modules/{new}").mkdir(parents=True)
    txn = commit(host, "upgrade", "be2net", driver="be2net", version="2.0", modules=["be2net"],
                 kernels=[running], initramfs=[], **{"from": {running: {"be2net": {}}}})
    pending = reboot_pending(host, STATE)
    assert [e["txn"] for e in pending] == [txn]
    why = "built, installed and checked" if passed else "kernel headers are not installed"
    kernelgate.write_record(host, StateDir(host, STATE), new, running, [
        kernelgate.Readiness("be2net", "2.0", passed, why)])
    assert reboot_pending(host, STATE) == pending  # the gate journals nothing
    (item,) = gaterecord.check_items(host, STATE, running)
    finding = gate_finding(item)
    assert finding.status == ("ok" if passed else "drift")
    assert exit_for([(finding.layer, finding.status)], pending) == 7
    boot(host.root, BOOT2)
    assert reboot_pending(host, STATE) == []
    assert exit_for([(finding.layer, finding.status)], []) == (0 if passed else 5)
