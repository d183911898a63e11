"""Harness of the hostile corpus: run one damaged input through the CLI in-process and check
the rules every case must keep (tests/test_hostile_*.py; generators in hostile_snap.py and
hostile_cat.py).

Per case: the exit code is one the case allows (never 70), an error is exactly one line on
stderr naming the file or member, no traceback, no raw control character reaches the
terminal, nothing is created, changed or left behind outside the scratch directory (a canary
directory next to it, the target of every hostile link, is listed before and after), the
input itself is unchanged, and the run ends within a per-case timeout (SIGALRM).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

CASE_TIMEOUT = 10  # seconds; a FIFO or a bomb must not hold a case longer than this
MAX_TIMEOUTS = 3  # per kind; then the rest of the kind is reported as not run
ERROR_CODES = frozenset({2, 3, 8})  # exits that mean "this input is wrong": one error line
SECRET = "CANARY-SECRET-7f3a"  # content of the canary files: must never be printed
# control characters a terminal would act on (newline ends lines and is checked apart)
_RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f\x80-\x9f]")


class CaseTimeout(BaseException):
    """Raised by SIGALRM; a BaseException so the CLI's `except Exception` cannot eat it."""


@dataclass
class Case:
    """One hostile input: how to build it, how to run it, what is allowed to come out."""

    kind: str
    name: str
    build: Callable[[Path, Sandbox], list[str]]  # writes the input under a dir -> argv
    codes: frozenset[int]
    names: tuple[str, ...] = ()  # an error line must name all of these (file, member)
    any_names: tuple[str, ...] = ()  # ... and at least one of these
    ok_names: bool = False  # also require `names` when the exit code is not an error
    check_out: Callable[[str], str | None] | None = None  # extra check of stdout
    check_err: Callable[[str], str | None] | None = None  # extra check of stderr
    one_line: bool = True  # False: a list of errors, one per line (catalog validate)
    patches: tuple[tuple[str, str, object], ...] = ()  # (module, name, value) while it runs


@dataclass
class Outcome:
    """What one in-process run printed and returned."""

    rc: int
    stdout: str
    stderr: str


@dataclass
class Sandbox:
    """base/ holds canary/ (what hostile links aim at) and scratch/ (inputs, TMPDIR)."""

    base: Path
    canary: Path = field(init=False)
    scratch: Path = field(init=False)
    tmp: Path = field(init=False)

    def __post_init__(self) -> None:
        self.canary = self.base / "canary"
        self.scratch = self.base / "scratch"
        self.tmp = self.scratch / "tmp"
        for d in (self.canary / "dir", self.tmp):
            d.mkdir(parents=True, exist_ok=True)
        (self.canary / "secret").write_text(SECRET + "\n")
        (self.canary / "dir" / "secret.json").write_text(json.dumps({"x": SECRET}))
        # an empty file is a valid empty sqlite db: a journal opened through a link lands here
        (self.canary / "dir" / "journal.sqlite").write_bytes(b"")

    def listing(self) -> dict[str, tuple[int, int, int]]:
        """Everything under base/ except scratch/: (mode, size, mtime_ns) by relative path."""
        out = {}
        for dirpath, dirs, files in os.walk(self.base, followlinks=False):
            if Path(dirpath) == self.base:
                dirs[:] = [d for d in dirs if d != "scratch"]
            for n in dirs + files:
                p = os.path.join(dirpath, n)
                st = os.lstat(p)
                out[os.path.relpath(p, self.base)] = (st.st_mode, st.st_size, st.st_mtime_ns)
        return out


@contextlib.contextmanager
def sandbox_dir(fallback: Path) -> Iterator[Path]:
    """A fresh directory for a corpus run: on tmpfs (/dev/shm) when there is one, because
    building and removing ~2,000 small trees on a loaded disk costs ten times as long."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="hwmgr-hostile-", dir=shm))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    else:
        yield fallback


def tree_listing(root: Path) -> dict[str, tuple[int, int, int]]:
    """A case input's own listing (the input must come out unchanged)."""
    if not root.exists() and not root.is_symlink():
        return {}
    st = os.lstat(root)
    out = {".": (st.st_mode, st.st_size, st.st_mtime_ns if not stat.S_ISDIR(st.st_mode) else 0)}
    if stat.S_ISDIR(st.st_mode):
        for dirpath, dirs, files in os.walk(root, followlinks=False):
            for n in dirs + files:
                p = os.path.join(dirpath, n)
                s = os.lstat(p)
                mtime = 0 if stat.S_ISDIR(s.st_mode) else s.st_mtime_ns
                out[os.path.relpath(p, root)] = (s.st_mode, s.st_size, mtime)
    return out


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise CaseTimeout in the main thread after `seconds` (also interrupts blocking opens)."""

    def fire(signum: int, frame: object) -> None:
        raise CaseTimeout(f"no answer within {seconds:g}s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_inproc(argv: list[str], timeout: float = CASE_TIMEOUT) -> Outcome:
    """hwmgr.cli.main(argv) with captured stdout/stderr; CaseTimeout if it does not end."""
    from hwmgr.cli import main

    # the encodings of a real UTF-8 pipe: stdout strict, stderr backslashreplace (a StringIO
    # would take lone surrogates from undecodable file names that a real stdout refuses)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="\n")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace",
                           newline="\n")
    with deadline(timeout), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # main() returns codes; a SystemExit is itself a finding
            rc = exc.code if isinstance(exc.code, int) else -1
            print(f"SystemExit escaped main(): {exc.code!r}", file=err)
        except UnicodeEncodeError as exc:  # what a real stdout would have raised
            rc = -2
            print(f"stdout refused the output: {exc}", file=err)
    return Outcome(rc, _text(out), _text(err))


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


def check(case: Case, argv: list[str], res: Outcome) -> list[str]:
    """Every rule the outcome breaks (empty when the case passed)."""
    problems = []
    if res.rc not in case.codes:
        problems.append(f"exit {res.rc}, expected one of {sorted(case.codes)}")
    for stream, text in (("stdout", res.stdout), ("stderr", res.stderr)):
        if "Traceback" in text:
            problems.append(f"traceback on {stream}")
        if SECRET in text:
            problems.append(f"canary content printed on {stream}")
        if _RAW_CONTROL.search(text) and not (stream == "stdout" and "--json" in argv):
            hit = _RAW_CONTROL.search(text)
            problems.append(f"raw control character {hit.group()!r} on {stream}")  # type: ignore
    lines = res.stderr.splitlines()
    verb = next((a for a in argv if not a.startswith("-")), "?")
    if "--json" in argv and res.stdout.strip():
        try:
            doc = json.loads(res.stdout)
            if not isinstance(doc, dict) or doc.get("format_version") != 1:
                problems.append("--json output is not the format-1 envelope")
        except ValueError:
            problems.append("--json output is not one JSON object")
    if res.rc in ERROR_CODES:
        if not lines or (case.one_line and len(lines) != 1):
            problems.append(f"{len(lines)} stderr lines, expected exactly one")
        if any(not ln.startswith(f"hwmgr {verb}: ") for ln in lines):
            problems.append(f"a stderr line does not start with 'hwmgr {verb}: '")
    elif any(not ln.startswith("hwmgr ") for ln in lines):
        problems.append("stderr holds a line that is not an hwmgr message")
    if res.rc in ERROR_CODES or case.ok_names:
        for name in case.names:
            if not _names(res.stderr, name):
                problems.append(f"stderr does not name {visible(name)!r}")
        if case.any_names and not any(_names(res.stderr, n) for n in case.any_names):
            problems.append(f"stderr names none of {[visible(n) for n in case.any_names]}")
    for hook, text in ((case.check_out, res.stdout), (case.check_err, res.stderr)):
        extra = hook(text) if hook is not None else None
        if extra:
            problems.append(extra)
    if problems:
        problems.append(f"stderr={res.stderr[:300]!r}")
    return problems


def _names(stderr: str, name: str) -> bool:
    """Does the error mention `name`, raw or escaped for a terminal?"""
    return name in stderr or visible(name) in stderr or repr(name)[1:-1] in stderr


def visible(text: str) -> str:
    """How a name appears once escaped for a terminal (hwmgr.output.printable)."""
    from hwmgr.output import printable

    return printable(text)


def run_case(case: Case, sb: Sandbox, workdir: Path,
             runner: Callable[[list[str]], Outcome] = run_inproc) -> list[str]:
    """Build, run and check one case; remove its input afterwards. Problems, or []."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    argv = case.build(workdir, sb)
    before_input = tree_listing(workdir)
    before = sb.listing()
    try:
        with _patched(case.patches):
            res = runner(argv)
    except CaseTimeout as exc:
        return [f"timeout: {exc}"]
    finally:
        leftovers = sorted(os.listdir(sb.tmp))
        for n in leftovers:
            p = sb.tmp / n
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() \
                else p.unlink()
    problems = check(case, argv, res)
    after = sb.listing()
    if after != before:
        changed = sorted(set(after) ^ set(before)) or sorted(
            k for k in after if after[k] != before.get(k))
        problems.append(f"outside the scratch dir changed: {changed[:5]}")
    if leftovers:
        problems.append(f"left behind in TMPDIR: {leftovers[:3]}")
    if tree_listing(workdir) != before_input:
        problems.append("the input itself was changed")
    shutil.rmtree(workdir, ignore_errors=True)
    return problems


@contextlib.contextmanager
def _patched(patches: tuple[tuple[str, str, object], ...]) -> Iterator[None]:
    """Lower a limit for one in-process case (e.g. the member count of an archive), so a
    bomb past it costs milliseconds; the limit's own value is tested by its module."""
    import importlib

    saved = []
    for modname, name, value in patches:
        mod = importlib.import_module(modname)
        saved.append((mod, name, getattr(mod, name)))  # AttributeError: the limit moved
        setattr(mod, name, value)
    try:
        yield
    finally:
        for mod, name, old in reversed(saved):
            setattr(mod, name, old)


@contextlib.contextmanager
def sandboxed_env(sb: Sandbox) -> Iterator[None]:
    """TMPDIR and the catalog cache inside scratch/; no state/config from the environment."""
    keys = ("TMPDIR", "XDG_CACHE_HOME", "HWMGR_STATE_DIR", "HWMGR_CACHE_DIR", "HWMGR_CONFIG",
            "HWMGR_CATALOG_DIR", "HWMGR_DEBUG", "COLUMNS")
    saved = {k: os.environ.get(k) for k in keys}
    saved_tempdir = tempfile.tempdir
    for k in keys:
        os.environ.pop(k, None)
    os.environ["TMPDIR"] = str(sb.tmp)
    os.environ["XDG_CACHE_HOME"] = str(sb.scratch / "cache")
    os.environ["COLUMNS"] = "150"
    tempfile.tempdir = str(sb.tmp)
    try:
        yield
    finally:
        tempfile.tempdir = saved_tempdir
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def subprocess_runner(sb: Sandbox) -> Callable[[list[str]], Outcome]:
    """Runs a case through the real entry point (`python -m hwmgr`, real pipes)."""
    import subprocess

    from support import run_cli_process as run_cli

    env = {"TMPDIR": str(sb.tmp), "XDG_CACHE_HOME": str(sb.scratch / "cache"),
           "HWMGR_STATE_DIR": "", "HWMGR_CONFIG": "", "HWMGR_CATALOG_DIR": "", "COLUMNS": "150"}

    def run(argv: list[str]) -> Outcome:
        try:
            res = run_cli(*argv, env=env, timeout=3 * CASE_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise CaseTimeout(f"no answer within {exc.timeout:g}s") from None
        return Outcome(res.returncode, res.stdout, res.stderr)

    return run


def sample_through_cli(kinds: dict[str, list[Case]], sb: Sandbox) -> list[str]:
    """The middle case of every kind through the real CLI; failure lines."""
    failures = []
    for cases in kinds.values():
        case = cases[len(cases) // 2]
        problems = run_case(case, sb, sb.scratch / "sub", subprocess_runner(sb))
        if problems:
            failures.append(f"{case.name}: " + "; ".join(problems))
    return failures


def run_kind(cases: list[Case], sb: Sandbox) -> tuple[int, list[str]]:
    """Run every case of one kind; (cases run, failure lines). After MAX_TIMEOUTS the rest of
    the kind is reported, not run, so hangs cost a few timeouts, not hundreds."""
    failures: list[str] = []
    timeouts = 0
    with sandboxed_env(sb):
        for case in cases:
            if timeouts >= MAX_TIMEOUTS:
                failures.append(f"{case.name}: not run ({timeouts} cases of this kind hung)")
                continue
            problems = run_case(case, sb, sb.scratch / "case")
            if problems:
                failures.append(f"{case.name}: " + "; ".join(problems))
                timeouts += problems[0].startswith("timeout")
    return len(cases), failures
