"""The CLI's outputs on the fixture hosts, recorded: refactors must leave them byte-identical.

`python -m support.golden` (from tests/) re-records them after an intended change in output;
the diff of tests/fixtures/golden then shows what changed, for review.
"""

from __future__ import annotations

import sys
from pathlib import Path

from support import REPO, run_cli

GOLDEN = REPO / "tests" / "fixtures" / "golden"
FIXTURES = REPO / "tests" / "fixtures"
# (file suffix, verb arguments): what a user reads and what a fleet run parses
VIEWS = (("inventory.txt", ("inventory",)), ("inventory.json", ("inventory", "--json")),
         ("check.txt", ("check",)), ("check.json", ("check", "--json")))
FAST_GROUPS = ("hosts",)
SLOW_GROUPS = ("defects", "field")


def hosts(group: str) -> list[Path]:
    """Every snapshot directory of a fixture group (tests/fixtures/GROUP/NAME), sorted."""
    base = FIXTURES / group
    dirs = sorted(p for p in base.iterdir() if p.is_dir() and p.name != "broken")
    return [p / "snapshot" if (p / "snapshot").is_dir() else p for p in dirs]


def render(root: Path, args: tuple[str, ...]) -> str:
    """One run's exit code, stdout and stderr, as recorded."""
    rel = root.relative_to(REPO)
    res = run_cli(*args, "--root", str(rel), env={"COLUMNS": "100", "NO_COLOR": "1"})
    return f"exit {res.returncode}\n--- stdout\n{res.stdout}--- stderr\n{res.stderr}"


def path_for(group: str, root: Path, suffix: str) -> Path:
    name = root.parent.name if root.name == "snapshot" else root.name
    return GOLDEN / group / f"{name}.{suffix}"


def record() -> int:
    for group in (*FAST_GROUPS, *SLOW_GROUPS):
        for root in hosts(group):
            for suffix, args in VIEWS:
                out = path_for(group, root, suffix)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(render(root, args))
    return 0


if __name__ == "__main__":
    sys.exit(record())
