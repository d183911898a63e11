"""Run a command in a real terminal (a detached tmux pane of a given width) and read the
screen back, as a person at that terminal would see it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Sequence

from support import REPO

HAVE_TMUX = shutil.which("tmux") is not None


def in_tmux(argv: Sequence[str], columns: int, *, env: dict[str, str] | None = None,
            timeout: float = 120, during: list[str] | None = None) -> tuple[int, str]:
    """`argv` run in a fresh tmux pane `columns` wide (and tall enough for the whole output);
    returns its exit code and the screen's text (wrapped by the terminal, as seen). With
    `during`, the screen is also captured every 0.1 s while it runs, into that list."""
    name = f"hwmgr-test-{uuid.uuid4().hex[:8]}"
    done = Path(f"/tmp/{name}.rc")
    extra = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    script = (f"cd {shlex.quote(str(REPO))}; env -u COLUMNS -u LINES {extra} "
              f"PYTHONPATH={shlex.quote(str(REPO))} {shlex.join(argv)}; "
              f"echo $? > {done}.tmp; mv {done}.tmp {done}; sleep 600")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    subprocess.run(["tmux", "-L", name, "new-session", "-d", "-s", name, "-x", str(columns),
                    "-y", "400", "sh", "-c", script], check=True, env=clean, timeout=30)
    try:
        deadline = time.monotonic() + timeout

        def capture() -> str:
            return subprocess.run(["tmux", "-L", name, "capture-pane", "-p", "-t", name, "-S",
                                   "-", "-E", "-"], capture_output=True, text=True,
                                  check=True, timeout=30).stdout

        while not done.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{argv} did not finish in {timeout} s")
            if during is not None:
                during.append(capture())
            time.sleep(0.1)
        return int(done.read_text()), capture().rstrip("\n") + "\n"
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], check=False, timeout=30,
                       capture_output=True)
        done.unlink(missing_ok=True)
