"""Write a fleet report's three files (JSON, JUnit XML, HTML) into the directory the user named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hwmgr.fleet.html import render_html
from hwmgr.fleet.report import junit_xml


def write_outputs(report: dict[str, Any], out: Path, history: list[dict[str, Any]]) -> list[Path]:
    """Write fleet-report.json, fleet-report.xml (JUnit) and fleet-report.html into `out`.

    Each file is written to a temporary name and renamed, so a reader never sees half a file.
    """
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "fleet-report.json": (json.dumps(report, indent=1, ensure_ascii=False) + "\n").encode(),
        "fleet-report.xml": junit_xml(report),
        "fleet-report.html": render_html(report, history).encode("utf-8"),
    }
    written = []
    for fname, data in files.items():
        tmp = out / f".{fname}.tmp"
        tmp.write_bytes(data)
        tmp.replace(out / fname)
        written.append(out / fname)
    return written
