"""Issue 28: every verb's documented exit codes are real and complete. For each verb and each
code its EXIT_CODES lists, a case drives the verb into that code against the fixture hosts
(or says why it cannot here); every help example runs and gives the code it states; any
run that ends with a code its verb does not document fails."""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support import HOSTS, REPO
from support.shipped import write_shipped

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
    ("gate", EXIT_OK): ["baseline", "r-verbs"],  # this machine, into the sandbox's state dir
}
CASES.update({(verb, EXIT_USAGE): ["--no-such-option"] for verb in cli.VERBS
              if (verb, EXIT_USAGE) not in CASES})

# driven below, beside CASES: a bug (70) and Ctrl-C (130) for every verb, the lock held (10),
# no such recorded thing (3), and a non-root user (13, slow: a process of its own)
DRIVEN_BELOW: dict[tuple[str, int], str] = {
    **{(verb, EXIT_INTERNAL): "test_every_verb_turns_a_bug_and_ctrl_c_into_their_codes"
       for verb in cli.VERBS},
    **{(verb, EXIT_INTERRUPTED): "test_every_verb_turns_a_bug_and_ctrl_c_into_their_codes"
       for verb in cli.VERBS},
    **{(verb, c): "test_journal_cases" for verb, c in (
        ("recover", EXIT_LOCKED), ("revert", EXIT_LOCKED), ("apply", EXIT_LOCKED),
        ("rollback", EXIT_NOT_FOUND), ("revert", EXIT_NOT_FOUND))},
    **{(verb, EXIT_PERMISSION): "test_non_root_is_refused" for verb in (
        "upgrade", "rollback", "kernel-gate")},
}

# codes documented but not driven here: the test that drives each for real, by name.
# test_delegated_code_is_asserted_by_the_named_test reads each one's source
# (tests/support/delegated.py) and fails unless it exists, runs the verb and asserts the code.
DELEGATED: dict[tuple[str, int], str] = {
    ("catalog", EXIT_FAILED): "test_catalog_update.py::test_update_refusals_change_nothing",
    ("check", EXIT_REBOOT_PENDING):
        "test_pending.py::test_check_verb_exits_7_on_a_snapshot_taken_before_the_reboot",
    ("plan", EXIT_OK): "test_plan.py::test_force_turns_the_route_refusal_into_a_warning",
    ("plan", EXIT_UNKNOWN):
        "test_plan.py::test_snapshot_without_modinfo_output_is_unknown_and_says_retake",
    ("fetch", EXIT_OK): "test_progress.py::test_piped_fetch_prints_one_line_per_step",
    ("fetch", EXIT_FAILED): "test_hostile_http.py::test_fetch_verb_names_the_url_and_deadline",
    **{("upgrade", c): "test_lifecycle.py::test_full_cycle" for c in (
        EXIT_OK, EXIT_FAILED, EXIT_NOTHING_TO_DO)},
    ("upgrade", EXIT_LOCKED): "test_lifecycle.py::test_refusals_change_nothing",
    **{("rollback", c): "test_lifecycle.py::test_full_cycle" for c in (
        EXIT_OK, EXIT_FAILED, EXIT_LOCKED)},
    ("rollback", EXIT_BAD_INPUT): "test_verify.py::test_bad_config_is_one_line",
    ("rollback", EXIT_REFUSED): "test_lifecycle.py::test_crash_during_upgrade_then_recover",
    ("apply", EXIT_PERMISSION):
        "test_small_mistakes.py::test_non_root_apply_and_revert_say_what_they_need",
    ("revert", EXIT_PERMISSION):
        "test_small_mistakes.py::test_non_root_apply_and_revert_say_what_they_need",
    ("apply", EXIT_FAILED): "test_compliance_apply.py::test_failure_part_way_undoes_done_steps",
    ("apply", EXIT_REFUSED): "test_compliance_apply.py::test_kill_at_apply_boundary_is_recovered",
    ("revert", EXIT_OK):
        "test_compliance_apply.py::test_apply_then_revert_restores_values_and_files_exactly",
    ("revert", EXIT_FAILED):
        "test_compliance_apply.py::test_apply_from_check_findings_on_a_netdev_driver_entry",
    ("recover", EXIT_FAILED): "test_transaction.py::test_recover_with_unknown_kind_keeps_txn_open",
    ("recover", EXIT_BAD_INPUT): "test_hostile_state.py::test_recover_refuses_a_damaged_journal",
    ("verify", EXIT_OK): "test_verify.py::test_armed_state_verifies_on_the_after_snapshot",
    ("verify", EXIT_FAILED):
        "test_verify.py::test_old_version_snapshot_fails_with_the_right_findings",
    **{("verify", c): "test_verify.py::test_failed_verification_really_rolls_back_and_reboots"
       for c in (EXIT_REBOOT_PENDING, EXIT_UNKNOWN)},
    ("throughput", EXIT_OK): "test_throughput.py::test_records_measurement_for_verify",
    ("throughput", EXIT_FAILED):
        "test_throughput.py::test_shaped_link_fails_in_the_shaped_direction",
    ("throughput", EXIT_UNKNOWN): "test_throughput.py::test_bad_peer_is_unknown_quickly",
    ("throughput", EXIT_REFUSED): "test_throughput.py::test_refuses_default_route_interface",
    ("mirror", EXIT_OK):
        "test_mirror.py::test_sync_from_files_then_fetch_serves_from_the_mirror",
    ("mirror", EXIT_FAILED):
        "test_mirror.py::test_sync_from_files_then_fetch_serves_from_the_mirror",
    ("mirror", EXIT_REFUSED):
        "test_mirror.py::test_refusals_name_file_driver_version_and_both_checksums",
    ("package", EXIT_OK): "test_package.py::test_package_end_to_end",
    ("recipe", EXIT_FAILED): "test_recipe_check.py::test_broken_source_names_the_compiler_error",
    ("recipe", EXIT_PERMISSION):
        "test_recipe_check.py::test_an_unwritable_state_dir_is_exit_13_in_one_line",
    ("kernel-gate", EXIT_LOCKED): "test_kernel_gate.py::test_gate_exit_codes_on_this_machine",
    **{("kernel-gate", c): "test_kernel_gate.py::test_gate_verb_without_headers_nor_boot_loader"
       for c in (EXIT_OK, EXIT_FAILED)},
    ("kernel-gate", EXIT_NOT_READY):
        "lab/test_kernel_gate.py::test_gate_b_unbuildable_driver_holds_the_old_kernel",
    **{("rollout", c): "test_rollout.py::test_status_says_done_failed_or_partial" for c in (
        EXIT_FAILED, EXIT_PARTIAL)},
    ("rollout", EXIT_REFUSED):
        "test_rollout.py::test_the_cli_resumes_the_same_rollout_and_refuses_another",
    ("gate", EXIT_BAD_INPUT): "test_gate.py::test_a_damaged_baseline_is_exit_8_and_a_bad_id_exit_2",
    **{("gate", c): "test_gate.py::"
       "test_gate_check_fails_on_a_link_gone_down_and_refuses_a_default_route_peer"
       for c in (EXIT_FAILED, EXIT_REFUSED)},
    ("package", EXIT_FAILED):
        "test_package.py::test_a_failing_rpmbuild_is_exit_1_and_leaves_nothing",
}

# documented codes that no test drives yet, each saying why: shown as xfailed with that reason
# (make test's summary lists them); a test that drives one moves it to DELEGATED
UNPROVEN: dict[tuple[str, int], str] = {}


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
    elsewhere = {**DRIVEN_BELOW, **DELEGATED, **UNPROVEN}
    missing = [k for k in documented() if k not in CASES and k not in elsewhere]
    assert not missing, f"add a case (or the test that drives it): {missing}"
    both = [k for k in CASES if k in elsewhere]
    assert not both, f"driven here and delegated: {both}"
    stale = [k for k in [*CASES, *elsewhere] if k not in documented()]
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
    if why:  # not run here: its words still parse, and a case or a named test reaches its code
        words = shlex.split(example.command)
        words = words[:next((i for i, w in enumerate(words) if w in (">", "|", "<")),
                            len(words))]  # the shell's part (a redirection, a pipe)
        ran = words[1]  # a verb's example may show another verb (snapshot, then inventory)
        assert words[0] == "hwmgr" and ran in cli.VERBS, example.command
        try:
            cli.build_parser(ran).parse_args(words[1:])
        except SystemExit as exc:
            pytest.fail(f"{example.command!r} does not parse (exit {exc.code})")
        proven = {**dict.fromkeys(CASES, "a case here"), **DRIVEN_BELOW, **DELEGATED}
        assert (ran, example.code) in proven, (
            f"{example.command!r} gives {example.code}, which no case or named test drives")
        pytest.skip(f"needs {why} (its arguments parse; exit {example.code}: "
                    f"{proven[ran, example.code]})")
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


@pytest.mark.parametrize(("verb", "code"), sorted([*DELEGATED, *UNPROVEN]), ids=lambda v: str(v))
def test_delegated_code_is_asserted_by_the_named_test(verb: str, code: int) -> None:
    """The named test exists, runs `hwmgr VERB` and asserts CODE (read from its source)."""
    from support.delegated import claims

    if (verb, code) in UNPROVEN:
        pytest.xfail(UNPROVEN[verb, code])
    ref = DELEGATED[verb, code]
    try:
        got = claims(ref)
    except KeyError:
        pytest.fail(f"{ref}: no such test function")
    assert verb in got.verbs, f"{ref} does not run hwmgr {verb}"
    assert code in got.codes, f"{ref} asserts {sorted(got.codes)}, not {code}"
    assert not got.skips, f"{ref} skips itself: it cannot stand for ({verb}, {code})"


def _first_case(verb: str) -> list[str]:
    """Arguments that parse for VERB (its first case that is not a usage error)."""
    return next(argv for (v, c), argv in sorted(CASES.items()) if v == verb and c != EXIT_USAGE)


@pytest.mark.parametrize("verb", sorted(cli.VERBS))
def test_every_verb_turns_a_bug_and_ctrl_c_into_their_codes(
        verb: str, sandbox: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A bug inside the verb is one line and 70; Ctrl-C is one line and 130 (cli.main's
    handlers, for each verb's own parser and arguments)."""
    mod = cli.verb_module(verb)
    for exc, code, says in ((RuntimeError("boom"), EXIT_INTERNAL, "internal error: "
                             "RuntimeError: boom (rerun with --debug)"),
                            (KeyboardInterrupt(), EXIT_INTERRUPTED, "interrupted")):
        def raise_(*_: object, exc: BaseException = exc) -> None:
            raise exc
        monkeypatch.setattr(mod, "run", raise_)
        assert run(verb, _first_case(verb), sandbox, monkeypatch) == code
        err = capsys.readouterr().err
        assert err == f"hwmgr {verb}: error: {says}\n", err


def test_journal_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       capsys: pytest.CaptureFixture[str]) -> None:
    """A journal with a committed upgrade and apply: no such recorded version or apply (3),
    then each verb that takes the state dir's lock while another holds it (10). The apply
    would re-set lo's own txqueuelen, persisted under the sandbox."""
    from hwmgr.host.runner import SubprocessRunner
    from hwmgr.host.seam import Host
    from hwmgr.transaction.state import StateDir

    box = tmp_path
    (box / "hwmgr.json").write_text("{}")
    kver = "6.1.0-56-amd64"
    host = Host("/", SubprocessRunner(), writable=[box])
    st = StateDir(host, str(box / "state"))
    j = st.journal()
    j.set_txn(j.begin("upgrade", "be2net", {
        "driver": "be2net", "version": "10.2.470.14", "modules": ["be2net"], "kernels": [kver],
        "from": {kver: {"be2net": {"version": None}}}, "initramfs": []}, []), state="committed")
    j.set_txn(j.begin("apply", "lo", {"changes": []}, []), state="committed")
    st.close()
    qlen = Path("/sys/class/net/lo/tx_queue_len").read_text().strip()
    (box / "lo.json").write_text(json.dumps([{"interface": "lo", "item": "txqueuelen",
                                              "wanted": int(qlen)}]))
    cases = [("rollback", ["be2net", "--to", "9.9", "--yes"], EXIT_NOT_FOUND, "'9.9'"),
             ("revert", ["--txn", "99", "--yes"], EXIT_NOT_FOUND, "transaction 99")]
    for verb, argv, code, says in cases:
        assert run(verb, argv, box, monkeypatch) == code
        assert says in capsys.readouterr().err
    held = StateDir(host, str(box / "state"))
    with held.lock(command="test_journal_cases"):
        for verb, argv in (("recover", []), ("revert", ["--yes"]),
                           ("apply", ["--changes", "lo.json", "--persist-root",
                                      str(box / "root"), "--yes"])):
            assert run(verb, argv, box, monkeypatch) == EXIT_LOCKED, verb
            assert "locked by pid" in capsys.readouterr().err
    held.close()
    assert not (box / "root").exists()


@pytest.mark.slow  # a process of its own per verb, as nobody
@pytest.mark.parametrize(("verb", "argv"), [
    ("upgrade", ["be2net", "--to", "10.2.470.14", "--yes"]),
    ("rollback", ["be2net", "--yes"]),
    ("kernel-gate", ["6.1.0-56-amd64"])])
def test_non_root_is_refused(verb: str, argv: list[str], tmp_path: Path) -> None:
    from support import python_runs_as_nobody

    if os.geteuid() != 0 or not python_runs_as_nobody():
        pytest.skip("needs root to drop privileges to nobody")
    res = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
         "-m", "hwmgr", verb, *argv, "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, cwd=REPO, check=False, timeout=120,
        env={**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(REPO)})
    assert res.returncode == EXIT_PERMISSION, res.stderr
    assert res.stderr.startswith(f"hwmgr {verb}: error: must run as root: "), res.stderr
