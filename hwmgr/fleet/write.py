"""Write a fleet report's three files (JSON, JUnit XML, HTML) into the directory the user named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hwmgr.fleet.html import render_html
from hwmgr.fleet.report import Report, junit_xml
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host


def write_outputs(report: Report, out: Path, history: list[dict[str, Any]]) -> list[Path]:
    """Write fleet-report.json, fleet-report.xml (JUnit) and fleet-report.html into `out`.

    Each file is written atomically through a Host that may write only `out`, so a reader
    never sees half a file and nothing lands anywhere else.
    """
    out = out.absolute()
    host = Host("/", SubprocessRunner(), writable=[str(out)])
    host.makedirs(str(out))
    files = {
        "fleet-report.json": (json.dumps(report, indent=1, ensure_ascii=False) + "\n").encode(),
        "fleet-report.xml": junit_xml(report),
        "fleet-report.html": render_html(report, history).encode("utf-8"),
    }
    written = []
    for fname, data in files.items():
        host.write_bytes(f"{out}/{fname}", data)
        written.append(out / fname)
    return written
