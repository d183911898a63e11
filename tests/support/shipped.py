"""The shipped catalog as tests use it: a directory (catalogs/*.json, then one file per driver
under catalogs/drivers/), its files in load order, and its merged document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hwmgr.catalog.discover import dir_files
from hwmgr.catalog.load import load_catalog
from hwmgr.config import config_from

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "catalogs"
HEADER = SHIPPED / "hwmgr-catalog.json"


def shipped_files() -> list[Path]:
    """The shipped catalog's files in the order they are layered."""
    return dir_files(SHIPPED)


def shipped_doc() -> dict[str, Any]:
    """The shipped catalog merged into one document (what a published single file holds)."""
    doc = load_catalog([SHIPPED], config=config_from(None)).doc
    return json.loads(json.dumps(doc))


def driver_file(name: str) -> Path:
    """The file that defines one driver's entry."""
    return SHIPPED / "drivers" / f"{name}.json"


def write_shipped(path: Path) -> Path:
    """The merged shipped catalog as one file at `path` (for tests that sign, edit or break a
    whole catalog file)."""
    path.write_text(json.dumps(shipped_doc(), indent=1))
    return path
