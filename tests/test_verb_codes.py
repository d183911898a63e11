"""Issue 28: every verb's documented exit codes are real and complete. For each verb and each
code its EXIT_CODES lists, a case drives the verb into that code against the fixture hosts
(or says why it cannot here); every help example runs and gives the code it states; any
run that ends with a code its verb does not document fails."""

from __future__ import annotations

import glob
import json
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from shipped import write_shipped
from support import HOSTS, REPO

from hwmgr import cli
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_DRIFT,
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_NOT_FOUND,
    EXIT_NOT_READY,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_PERMISSION,
    EXIT_REBOOT_PENDING,
    EXIT_REFUSED,
    EXIT_UNKNOWN,
    EXIT_USAGE,
)
from hwmgr.ui.verbhelp import all_codes

BEFORE, AFTER, BNX2, BROKEN = (str(HOSTS / h) for h in (
    "seed002-before", "seed002-after", "seed001-bnx2", "broken"))
CATALOG = str(REPO / "catalogs")

# (verb, code) -> argv run in the sandbox (cwd and HWMGR_STATE_DIR/CACHE_DIR in a temp dir)
CASES: dict[tuple[str, int], list[str]] = {
    ("inventory", EXIT_OK): ["--root", BEFORE],
    ("inventory", EXIT_NOT_FOUND): ["--root", "nosuch.tar.gz"],
    ("inventory", EXIT_BAD_INPUT): ["--root", BROKEN],
    ("check", EXIT_OK): ["--root", AFTER],
    ("check", EXIT_NOT_FOUND): ["--root", AFTER, "--catalog", "nosuch.json"],
    ("check", EXIT_DRIFT): ["--root", BEFORE],
    ("check", EXIT_BAD_INPUT): ["--root", BROKEN],
    ("check", EXIT_UNKNOWN): ["--root", BNX2],
    ("check", EXIT_PARTIAL): ["--root", AFTER, "--root", "nosuch.tar.gz"],
    ("snapshot", EXIT_OK): ["out.tar.gz"],
    ("snapshot", EXIT_USAGE): ["bad.json"],
    ("snapshot", EXIT_NOT_FOUND): ["nosuch/out.tar.gz"],
    ("snapshot", EXIT_BAD_INPUT): ["--site-catalog", "bad.json", "out.tar.gz"],
    ("catalog", EXIT_OK): ["show", "be2net"],
    ("catalog", EXIT_NOT_FOUND): ["show", "nosuch"],
    ("catalog", EXIT_BAD_INPUT): ["validate", "bad.json"],
    ("catalog", EXIT_REFUSED): ["trust", "be2net", "10.2.470.14", "--file", "bad.json"],
    ("vercmp", EXIT_OK): ["1.0", "2.0"],
    ("vercmp", EXIT_BAD_INPUT): ["--scheme", "driver", "6.1.0-56-amd64", "10.2.470.14"],
    ("plan", EXIT_NOT_FOUND): ["upgrade", "be2net", "--to", "9.9", "--root", BEFORE],
    ("plan", EXIT_NOTHING_TO_DO): ["rollback", "be2net", "--root", BEFORE],
    ("plan", EXIT_BAD_INPUT): ["upgrade", "be2net", "--to", "9.9", "--root", BROKEN],
    ("plan", EXIT_REFUSED): ["upgrade", "be2net", "--to", "4.1.307r", "--root", BEFORE],
    ("fetch", EXIT_NOT_FOUND): ["be2net", "--to", "9.9"],
    ("fetch", EXIT_BAD_INPUT): ["be2net", "--to", "9.9", "--catalog", "bad.json"],
    ("fetch", EXIT_REFUSED): ["be2net", "--to", "10.2.470.14"],
    ("upgrade", EXIT_NOT_FOUND): ["be2net", "--to", "9.9", "--yes"],
    ("upgrade", EXIT_BAD_INPUT): ["be2net", "--to", "9.9", "--yes", "--catalog", "bad.json"],
    ("upgrade", EXIT_REFUSED): ["be2net", "--to", "10.2.470.14", "--yes"],
    ("rollback", EXIT_NOTHING_TO_DO): ["be2net", "--yes"],
    ("apply", EXIT_OK): ["--root", BEFORE, "--dry-run"],
    ("apply", EXIT_NOT_FOUND): ["--root", "nosuch.tar.gz", "--dry-run"],
    ("apply", EXIT_NOTHING_TO_DO): ["--root", AFTER, "--dry-run"],
    ("apply", EXIT_BAD_INPUT): ["--root", BROKEN, "--dry-run"],
    ("revert", EXIT_NOTHING_TO_DO): ["--yes"],
    ("recover", EXIT_OK): [],
    ("history", EXIT_OK): ["--root", "snap.tar.gz"],
    ("history", EXIT_NOT_FOUND): ["--root", BEFORE],  # it carries no state dir
    ("history", EXIT_BAD_INPUT): ["--root", BROKEN],
    ("verify", EXIT_NOT_FOUND): ["--root", BEFORE, "--expectation", "nosuch.json"],
    ("verify", EXIT_NOTHING_TO_DO): ["--root", "snap.tar.gz"],
    ("verify", EXIT_BAD_INPUT): ["--root", BROKEN],
    ("throughput", EXIT_NOT_FOUND): ["--peer", "127.0.0.1", "--interface", "nosuch0"],
    ("mirror", EXIT_NOT_FOUND): ["sync", "mirror", "--driver", "be2net"],
    ("mirror", EXIT_BAD_INPUT): ["sync", "bad.json"],
    ("package", EXIT_NOT_FOUND): ["be2net", "--to", "9.9"],
    ("package", EXIT_BAD_INPUT): ["be2net", "--to", "9.9", "--catalog", "bad.json"],
    ("package", EXIT_REFUSED): ["be2net", "--to", "10.2.470.14"],
    ("recipe", EXIT_OK): ["list"],
    ("recipe", EXIT_NOT_FOUND): ["check", "nosuch", "--file", "x.src.rpm"],
    ("recipe", EXIT_BAD_INPUT): ["check", "hwmgrtest", "--file", "bad.json", "--kernel", "../x"],
    ("recipe", EXIT_REFUSED): ["check", "hwmgrtest", "--file", "bad.json"],
    ("fleet-report", EXIT_OK): ["--results", "fleet/ok", "--out", "report"],
    ("fleet-report", EXIT_DRIFT): ["--results", "fleet/drift", "--out", "report"],
    ("fleet-report", EXIT_PARTIAL): ["--results", "fleet/unreachable", "--out", "report"],
    ("fleet-report", EXIT_REBOOT_PENDING): ["--results", "fleet/reboot-pending", "--out",
                                            "report"],
    ("fleet-report", EXIT_BAD_INPUT): ["--results", "fleet/bad", "--out", "report"],
    ("fleet-report", EXIT_UNKNOWN): ["--results", "fleet/unknown", "--out", "report"],
    ("kernel-gate", EXIT_NOT_FOUND): ["9.9.9-none"],
    ("kernel-gate", EXIT_BAD_INPUT): ["../x"],
    ("kernel-gate", EXIT_REFUSED): ["--root", BEFORE, "6.1.0-58-amd64"],
    ("collect-script", EXIT_OK): [],
    ("collect-script", EXIT_NOT_FOUND): ["--site-catalog", "nosuch.json"],
    ("collect-script", EXIT_BAD_INPUT): ["--site-catalog", "bad.json"],
    ("rollout", EXIT_OK): ["start", "ro.json", "--change", "apply", "--hosts", "a"],
    ("rollout", EXIT_NOT_FOUND): ["status", "nosuch.json"],
    ("rollout", EXIT_BAD_INPUT): ["status", "bad.json"],
    ("gate", EXIT_NOT_FOUND): ["check", "no-such-rollout"],
}
CASES.update({(verb, EXIT_USAGE): ["--no-such-option"] for verb in cli.VERBS
              if (verb, EXIT_USAGE) not in CASES})

# codes documented but not driven here, and why (the named tests drive them for real)
NOT_DRIVEN: dict[tuple[str, int], str] = {
    **{(verb, EXIT_INTERNAL): "a bug" for verb in cli.VERBS},
    **{(verb, EXIT_INTERRUPTED): "Ctrl-C" for verb in cli.VERBS},
    ("check", EXIT_REBOOT_PENDING): "a committed upgrade in this boot (test_pending.py)",
    ("catalog", EXIT_FAILED): "gpg or a download failing (test_catalog_update.py)",
    ("plan", EXIT_OK): "a trusted source and kernel headers (test_plan.py)",
    ("plan", EXIT_UNKNOWN): "a snapshot lacking a needed output (test_plan.py)",
    ("fetch", EXIT_OK): "an HTTP server (test_fetch.py)",
    ("fetch", EXIT_FAILED): "an HTTP server that fails (test_fetch.py)",
    **{("upgrade", c): "a DKMS build (test_lifecycle.py)" for c in (
        EXIT_OK, EXIT_FAILED, EXIT_NOTHING_TO_DO, EXIT_LOCKED)},
    **{("rollback", c): "a recorded upgrade (test_lifecycle.py)" for c in (
        EXIT_OK, EXIT_FAILED, EXIT_NOT_FOUND, EXIT_BAD_INPUT, EXIT_REFUSED, EXIT_LOCKED)},
    **{(verb, EXIT_PERMISSION): "a non-root user" for verb in (
        "upgrade", "rollback", "apply", "revert")},
    **{("apply", c): "network namespaces (test_compliance_apply.py)" for c in (
        EXIT_FAILED, EXIT_REFUSED, EXIT_LOCKED)},
    **{("revert", c): "a committed apply (test_compliance_apply.py)" for c in (
        EXIT_OK, EXIT_FAILED, EXIT_NOT_FOUND, EXIT_LOCKED)},
    ("recover", EXIT_FAILED): "an interrupted transaction (test_transaction.py)",
    ("recover", EXIT_LOCKED): "a held lock (test_transaction.py)",
    ("recover", EXIT_BAD_INPUT): "a damaged journal (test_hostile_state.py)",
    **{("verify", c): "an armed expectation (test_verify.py)" for c in (
        EXIT_OK, EXIT_FAILED, EXIT_REBOOT_PENDING, EXIT_UNKNOWN)},
    **{("throughput", c): "iperf3 between namespaces (test_throughput.py)" for c in (
        EXIT_OK, EXIT_FAILED, EXIT_REFUSED, EXIT_UNKNOWN)},
    **{("mirror", c): "an HTTP server (test_mirror.py)" for c in (
        EXIT_OK, EXIT_FAILED, EXIT_REFUSED)},
    **{("package", c): "rpmbuild (test_package.py)" for c in (EXIT_OK, EXIT_FAILED)},
    ("recipe", EXIT_FAILED): "a failing DKMS build (test_recipe_check.py)",
    ("recipe", EXIT_PERMISSION): "a non-root user (test_recipe_check.py)",
    ("kernel-gate", EXIT_LOCKED): "a held lock (test_kernel_gate.py)",
    ("kernel-gate", EXIT_PERMISSION): "a non-root user",
    **{("kernel-gate", c): "an installed kernel that is not running: /boot/vmlinuz-KVER "
       "(test_kernel_gate.py's gate functions, tests/lab)" for c in (
           EXIT_OK, EXIT_FAILED, EXIT_NOT_READY)},
    **{("rollout", c): "a record with failed or pending hosts, or another rollout's "
       "(test_rollout.py)" for c in (EXIT_FAILED, EXIT_PARTIAL, EXIT_REFUSED)},
    **{("gate", c): "a live host's links, iperf3 peer and state dir (test_rollout_fleet.py)"
       for c in (EXIT_OK, EXIT_FAILED, EXIT_REFUSED)},
    ("gate", EXIT_BAD_INPUT): "a damaged baseline (test_gate.py)",
}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the files the cases and examples name."""
    box = tmp_path_factory.mktemp("verbs")
    snap = box / "snap"  # seed002-before, taken by a hwmgr that copies the state dir (empty)
    shutil.copytree(BEFORE, snap, symlinks=True)
    meta = json.loads((snap / "snapshot.json").read_text())
    (snap / "snapshot.json").write_text(json.dumps({**meta, "records": [
        *meta["records"], "state"]}))
    with tarfile.open(box / "snap.tar.gz", "w:gz") as tar:
        tar.add(snap, arcname="snap")
    shutil.rmtree(snap)
    (box / "web01").symlink_to(AFTER)
    (box / "bad.json").write_text("{")
    (box / "snapshots.json").write_text(json.dumps({"web01": "web01", "web02": "snap.tar.gz"}))
    (box / "hwmgr.json").write_text("{}")
    write_shipped(box / "my.json")
    (box / "catalogs").symlink_to(REPO / "catalogs")
    (box / "fleet" / "unreachable").mkdir(parents=True)
    (box / "fleet" / "unreachable" / "web01.json").write_text(json.dumps(
        {"status": "unreachable", "check": None, "error": "ssh: no route to host"}))
    for name, host in (("ok", AFTER), ("drift", BEFORE), ("unknown", BNX2)):
        (box / "fleet" / name).mkdir(parents=True)
        out = subprocess.run([sys.executable, "-m", "hwmgr", "check", "--json", "--root", host],
                             capture_output=True, text=True, check=False).stdout
        (box / "fleet" / name / "web01.json").write_text(out)
    (box / "fleet" / "reboot-pending").mkdir(parents=True)
    (box / "fleet" / "reboot-pending" / "web01.json").write_text(json.dumps(
        {"status": "reboot-pending", "check": json.loads(
            (box / "fleet" / "ok" / "web01.json").read_text()), "error": None}))
    (box / "results").symlink_to(box / "fleet" / "drift")
    (box / "old").mkdir()
    (box / "fleet" / "bad").mkdir()
    (box / "fleet" / "bad" / "web01.json").write_text("{")
    return box


def run(verb: str, argv: list[str], box: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """`hwmgr VERB ARGV...` in-process in the sandbox; fails on an undocumented code."""
    monkeypatch.chdir(box)
    monkeypatch.setenv("HWMGR_STATE_DIR", str(box / "state"))
    monkeypatch.setenv("HWMGR_CACHE_DIR", str(box / "cache"))
    monkeypatch.setenv("HWMGR_SITE_CATALOG_DIR", str(box / "catalog.d"))
    monkeypatch.setenv("HWMGR_CONFIG", str(box / "hwmgr.json"))
    rc = cli.main([verb, *argv])
    assert rc in all_codes(cli.verb_module(verb).EXIT_CODES), (
        f"hwmgr {verb} {shlex.join(argv)} exited {rc}, which its EXIT_CODES do not list")
    return rc


def documented() -> list[tuple[str, int]]:
    return [(verb, code) for verb, mod in cli.verb_modules().items()
            for code in all_codes(mod.EXIT_CODES)]


def test_every_documented_code_has_a_case_or_a_reason() -> None:
    missing = [k for k in documented() if k not in CASES and k not in NOT_DRIVEN]
    assert not missing, f"add a case (or the reason it cannot run here): {missing}"
    stale = [k for k in [*CASES, *NOT_DRIVEN] if k not in documented()]
    assert not stale, f"cases for codes the verbs do not document: {stale}"


@pytest.mark.parametrize(("verb", "code"), sorted(CASES), ids=lambda v: str(v))
def test_verb_reaches_its_documented_code(verb: str, code: int, sandbox: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.replace("out.tar.gz", f"out-{code}.tar.gz") for a in CASES[verb, code]]
    assert run(verb, argv, sandbox, monkeypatch) == code, capsys.readouterr().err


# examples that cannot run here, and why (each still states the code it gives)
EXAMPLE_NOT_RUN: dict[str, str] = {
    "hwmgr check": "the live host's compliance",
    "hwmgr check --catalog base.json --catalog site.json": "the live host's compliance",
    "hwmgr snapshot /tmp/web01.tar.gz": "writes outside the sandbox",
    "hwmgr snapshot /tmp/web01": "writes outside the sandbox",
    "hwmgr inventory --root /tmp/web01.tar.gz": "the snapshot the example before writes",
    "hwmgr collect-script > hwmgr-collect.sh": "a shell redirection",
    "hwmgr collect-script | ssh old-host sh -s > old-host.tar.gz": "ssh to an old host",
    "hwmgr collect-script --site-catalog site.json > hwmgr-collect.sh": "a shell redirection",
    "hwmgr snapshot --site-catalog site.json /tmp/web01.tar.gz": "writes outside the sandbox",
    "hwmgr inventory --root old-host.tar.gz": "the snapshot the collector writes",
    "hwmgr plan upgrade e1000e --to 3.8.7-lab --kernel 6.1.0-56-amd64 --json":
        "the lab's catalog (tests/lab)",
    "hwmgr plan upgrade be2net --to 10.2.470.14": "the live host",
    "hwmgr plan rollback be2net": "an upgrade recorded on the live host",
    "hwmgr plan rollback be2net --to inbox": "an upgrade recorded on the live host",
    "hwmgr verify --throughput --peer 10.0.0.2": "an iperf3 peer",
    "hwmgr verify --boot --on-failure rollback": "a boot with an armed expectation",
    "hwmgr verify --root snap.tar.gz --expectation be2net.json": "an armed expectation file",
    "hwmgr verify": "an armed expectation on the live host",
    "hwmgr verify be2net --json": "an armed expectation on the live host",
    "hwmgr fleet-report --results results/ --out report/ --history old/*/fleet-report.json":
        "earlier reports",
    "hwmgr recipe check igb --file igb-5.9.3-1.src.rpm": "Intel's SRPM and a DKMS build",
    "hwmgr recipe check igb --file igb-5.9.3-1.src.rpm --kernel 6.1.0-56-amd64 --json":
        "Intel's SRPM and a DKMS build",
}
EXAMPLE_NEEDS = {  # verbs whose examples all change the live host or need the network
    "fetch": "the vendor's server", "upgrade": "a DKMS build on the live host",
    "rollback": "a recorded upgrade", "revert": "a committed apply", "recover": "the live host",
    "throughput": "an iperf3 peer", "mirror": "the vendor's server", "package": "rpmbuild",
    "apply": "the live host's NICs",
    "kernel-gate": "a kernel installed but not running, and a boot loader",
    "rollout": "the record the examples before it make (test_rollout.py runs the story)",
    "gate": "a live host's links and an iperf3 peer (test_rollout_fleet.py)",
}
EXAMPLES = [(verb, ex) for verb, mod in cli.verb_modules().items() for ex in mod.EXAMPLES]


def _runnable(verb: str, command: str) -> str | None:
    """Why an example is not run here, or None."""
    if command in EXAMPLE_NOT_RUN:
        return EXAMPLE_NOT_RUN[command]
    if verb in EXAMPLE_NEEDS and "--root" not in command and "hwmgr plan" not in command:
        return EXAMPLE_NEEDS[verb]
    if "catalog trust" in command or "catalog update" in command or "catalog sign" in command \
            or command == "hwmgr catalog rollback":
        return "a vendor package, gpg or an installed catalog (test_trust.py)"
    return None


@pytest.mark.parametrize(("verb", "example"), EXAMPLES, ids=[e.command for _, e in EXAMPLES])
def test_help_example_gives_its_code(verb: str, example: object, sandbox: Path,
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from hwmgr.ui.verbhelp import Example

    assert isinstance(example, Example)
    assert example.code in all_codes(cli.verb_module(verb).EXIT_CODES), example
    why = _runnable(verb, example.command)
    if why:
        pytest.skip(f"needs {why}")
    words = shlex.split(example.command)
    assert words[0] == "hwmgr"
    monkeypatch.chdir(sandbox)
    argv = [w for word in words[2:] for w in (sorted(glob.glob(word)) if "*" in word else [word])]
    rc = run(words[1], argv, sandbox, monkeypatch)
    assert rc == example.code, capsys.readouterr().err


def test_generated_exit_code_tables_are_current() -> None:
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "gen-exit-codes"), "--check"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
