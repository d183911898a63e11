"""Runners: real subprocesses under LC_ALL=C, and the snapshot replay runner."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hwmgr.errors import BadInputError
from hwmgr.host.runner import RecordingRunner, ReplayRunner, SubprocessRunner


def test_subprocess_runner_sets_c_locale_and_returns_output() -> None:
    res = SubprocessRunner().run(["sh", "-c", "echo $LC_ALL; echo err >&2; exit 3"],
                                 env={"LC_ALL": "de_DE.UTF-8"})
    assert res.rc == 3 and res.stdout == "C\n" and res.stderr == "err\n"
    assert not res.ok and res.available
    assert "exited 3: err" in res.describe()


def test_missing_binary_is_rc_127_not_an_exception() -> None:
    res = SubprocessRunner().run(["hwmgr-no-such-tool", "-i"])
    assert res.rc == 127 and not res.available


def test_timeout_is_bounded() -> None:
    t0 = time.monotonic()
    res = SubprocessRunner().run(["sleep", "5"], timeout=0.3)
    assert res.rc == 124 and "timed out" in res.stderr
    assert time.monotonic() - t0 < 3


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie waiting for init to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_timeout_stops_what_the_command_started(tmp_path: Path) -> None:
    """dkms's make and gcc must not build on after hwmgr gave up on dkms: the whole session
    the command leads is killed, not just its first process."""
    pidfile = tmp_path / "child.pid"
    res = SubprocessRunner().run(
        ["sh", "-c", f"sleep 60 & echo $! > {pidfile}; echo started; wait"], timeout=1)
    assert res.rc == 124 and res.stdout == "started\n"
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), f"the command's child {pid} outlived the timeout"


def test_recording_runner_keeps_calls() -> None:
    rec = RecordingRunner(SubprocessRunner())
    rec.run(["true"])
    rec.run(["false"])
    assert [(c.argv, c.rc) for c in rec.calls] == [(("true",), 0), (("false",), 1)]


def _snap(tmp_path: Path, index: object, files: dict[str, str]) -> ReplayRunner:
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands/index.json").write_text(
        index if isinstance(index, str) else json.dumps(index)
    )
    for name, text in files.items():
        (tmp_path / name).write_text(text)

    def read(rel: str) -> bytes | None:
        p = tmp_path / rel
        return p.read_bytes() if p.is_file() else None

    return ReplayRunner(tmp_path, read)


def test_replay_matches_exact_argv_with_bare_command_name(tmp_path: Path) -> None:
    r = _snap(
        tmp_path,
        [{"argv": ["ethtool", "-i", "eth2"], "rc": 0, "stdout": "commands/e.txt"}],
        {"commands/e.txt": "driver: be2net\n"},
    )
    assert r.run(["/usr/sbin/ethtool", "-i", "eth2"]).stdout == "driver: be2net\n"
    assert r.run(["ethtool", "-i", "eth3"]).rc == 127
    assert r.run(["ethtool", "-i", "eth2", "-v"]).rc == 127
    assert "not recorded" in r.run(["lspci"]).stderr


@pytest.mark.parametrize(
    "index, files, fragment",
    [
        ("{not json", {}, "not valid JSON"),
        ({"argv": []}, {}, "expected a list"),
        ([{"argv": []}], {}, "[0].argv"),
        ([{"argv": ["x"], "rc": "0"}], {}, "[0].rc"),
        ([{"argv": ["x"], "stdout": "commands/missing.txt"}], {}, "is missing"),
        ([{"argv": ["x"], "stdout": "../../etc/passwd"}], {}, "relative path inside"),
    ],
)
def test_bad_index_is_a_clear_error(tmp_path: Path, index, files, fragment) -> None:
    with pytest.raises(BadInputError) as exc:
        _snap(tmp_path, index, files)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


# ------------------------------------------------ output drained at once, capped (issue 41 §5b)
_DRAIN_CASES = {
    # (shell script, what stdout must be) — each ends well inside its bound
    "1MiB-stderr": ("head -c 1048576 /dev/zero | tr '\\0' e >&2; echo ok", "ok\n"),
    "both-pipes-full": ("head -c 3000000 /dev/zero | tr '\\0' e >&2 & "
                        "head -c 3000000 /dev/zero | tr '\\0' o; wait", None),
    "left-child-holds-stderr": ("(yes e >&2 &); echo ok", "ok\n"),
    "left-child-holds-stdout": ("(sleep 60 &); echo ok", "ok\n"),
    "past-the-cap": ("yes o | head -c 20000000", None),
}


@pytest.mark.parametrize("name", sorted(_DRAIN_CASES))
def test_output_is_drained_concurrently_and_capped(name: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from hwmgr.host import runner as runner_mod

    monkeypatch.setattr(runner_mod, "MAX_OUTPUT_BYTES", 1 << 20)
    monkeypatch.setattr(runner_mod, "EXIT_GRACE", 0.5)
    script, want = _DRAIN_CASES[name]
    start = time.monotonic()
    res = SubprocessRunner().run(["sh", "-c", script], timeout=20)
    assert time.monotonic() - start < 15, "not ended within the bound"
    assert res.rc == 0, res.stderr[-200:]
    for text in (res.stdout, res.stderr):
        assert len(text) <= (1 << 20) + 100
    if want is not None:
        assert res.stdout == want
    if name == "past-the-cap":
        assert res.stdout.endswith("more bytes dropped]\n")


def test_a_command_that_never_ends_still_times_out_with_its_output() -> None:
    res = SubprocessRunner().run(["sh", "-c", "echo partial; exec sleep 30"], timeout=1)
    assert res.rc == 124 and res.stdout == "partial\n" and "timed out after 1s" in res.stderr
