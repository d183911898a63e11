"""A private network namespace with a veth pair for the apply/revert tests, and the CLI in it.

`ApplyNs.create()` makes namespace `hwi12-<pid>-<n>` holding veth `v0`/`v1` (names are private
to the namespace, so parallel runs never collide); `hwmgr(...)` runs `python -m hwmgr` inside
it with the state dir and persist root in a temp dir; `teardown()` kills what it started and
deletes the namespace.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[2]
_COUNTER = itertools.count()


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if check and res.returncode:
        raise RuntimeError(f"{' '.join(argv)}: rc {res.returncode}: {res.stderr.strip()}")
    return res


@dataclass
class ApplyNs:
    """One namespace, its temp dir (state dir, persist root) and started processes."""

    ns: str
    tmp: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    @classmethod
    def create(cls, tmp: Path) -> ApplyNs:
        env = cls(f"hwi12-{os.getpid()}-{next(_COUNTER)}", tmp)
        try:
            sh("ip", "netns", "add", env.ns)
            env.ip("link", "add", "v0", "type", "veth", "peer", "name", "v1")
            env.ip("link", "set", "v0", "up")
            env.ip("link", "set", "v1", "up")
            env.ip("link", "set", "lo", "up")
        except BaseException:
            env.teardown()
            raise
        return env

    @property
    def state(self) -> str:
        return str(self.tmp / "state")

    @property
    def root(self) -> Path:
        return self.tmp / "persist"

    def ip(self, *argv: str) -> str:
        return sh("ip", "-n", self.ns, *argv).stdout

    def x(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a command inside the namespace."""
        return sh("ip", "netns", "exec", self.ns, *argv, check=check)

    def hwmgr(self, *argv: str, env: dict[str, str] | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess:
        full = dict(os.environ, **(env or {}))
        full.pop("SSH_CONNECTION", None)
        return subprocess.run(["ip", "netns", "exec", self.ns, sys.executable, "-m", "hwmgr",
                               *argv], capture_output=True, text=True, cwd=REPO, env=full,
                              timeout=timeout, check=False)

    def apply(self, changes: Sequence[dict[str, Any]], *extra: str,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        path = self.tmp / "changes.json"
        path.write_text(json.dumps(list(changes)))
        return self.hwmgr("apply", "--changes", str(path), "--persist-root", str(self.root),
                          "--state-dir", self.state, *extra, env=env)

    def gro(self, ifname: str = "v0") -> str:
        for line in self.x("ethtool", "-k", ifname).stdout.splitlines():
            if line.startswith("generic-receive-offload:"):
                return line.split()[1]
        raise AssertionError("no generic-receive-offload line")

    def qlen(self, ifname: str = "v0") -> int:
        return int(self.x("cat", f"/sys/class/net/{ifname}/tx_queue_len").stdout)

    def rx_channels(self, ifname: str = "v0") -> int:
        out = self.x("ethtool", "-l", ifname).stdout.split("Current hardware settings:")[1]
        return int(out.split("RX:")[1].split()[0])

    def sysctl(self, name: str) -> str:
        return self.x("cat", "/proc/sys/" + name.replace(".", "/")).stdout.strip()

    def start(self, argv: Sequence[str]) -> subprocess.Popen:
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns, *argv],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def teardown(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            if proc.stderr:
                proc.stderr.close()
        for pid in waiter_pids(self.state):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        sh("ip", "netns", "del", self.ns, check=False)


def waiter_pids(state_dir: str) -> list[int]:
    """Detached `hwmgr apply --auto-revert` children working on this state dir."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--auto-revert" in argv and state_dir.encode() in argv:
            out.append(int(p.name))
    return out


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` → its bytes (for byte-for-byte comparisons)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}
