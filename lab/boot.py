"""What one lab boot left behind: its console transcript and the guest's /lab/out files.

Split from vm.py (which runs the boots) so each stays readable; `lab.vm` re-exports them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESTART = "reboot: Restarting system"  # the kernel's last console line of a reboot


@dataclass
class Boot:
    """One guest boot: its console transcript and what the guest wrote to /lab/out."""

    vm: str
    n: int
    log: Path
    out: Path
    wall: float
    rc: int | None
    lines: list[str] = field(default_factory=list)
    grub: tuple[str, str] | None = None  # (kernel, why) when the harness played GRUB

    def text(self, name: str) -> str | None:
        p = self.out / name
        return p.read_text(errors="replace") if p.is_file() else None

    def json(self, name: str) -> Any:
        t = self.text(name)
        if t is None:
            return None
        try:
            return json.loads(t)
        except ValueError as exc:
            raise AssertionError(f"{self.vm} boot {self.n}: {name} is not JSON: {t[:300]!r}") \
                from exc

    def rc_of(self, name: str) -> int | None:
        t = self.text(f"{name}.rc")
        return int(t.strip()) if t and t.strip().lstrip("-").isdigit() else None

    def ok(self, name: str) -> Any:
        """The JSON of a `rec NAME hwmgr ... --json` command that must have exited 0 (an
        AssertionError with its errors, stderr and the transcript's tail otherwise)."""
        rc, doc = self.rc_of(name), self.json(f"{name}.out")
        assert rc == 0, f"{name} exited {rc}: {doc and doc.get('errors')} " \
            f"{self.text(name + '.err')}\n{self.where()}"
        return doc

    @property
    def facts(self) -> dict[str, Any]:
        """The guest's own view of the drivers at the end of the boot (or its start)."""
        return self.json("facts-end.json") or self.json("facts-boot.json") or {}

    @property
    def boot_facts(self) -> dict[str, Any]:
        """The guest's view right after coldplug, before this boot's step ran."""
        return self.json("facts-boot.json") or {}

    @property
    def verify(self) -> dict[str, Any] | None:
        """The boot-time `hwmgr verify --json` result, if verification ran."""
        return self.json("boot-verify.json")

    @property
    def reboot_requested(self) -> bool:
        """The boot ended in a reboot (systemctl reboot), not a power-off or a power cut."""
        return any(RESTART in ln for ln in self.lines)

    def console(self, marker: str) -> list[str]:
        return [ln for ln in self.lines if marker in ln]

    def where(self) -> str:
        tail = "\n".join(self.lines[-25:])
        return f"{self.vm} boot {self.n} (transcript {self.log}):\n{tail}"


def e1000e_versions(facts: dict[str, Any]) -> dict[str, Any]:
    """What ethtool -i, /sys/module and modinfo say about e1000e, from a facts document."""
    m = (facts.get("modules") or {}).get("e1000e") or {}
    eth = (facts.get("ethtool") or {}).get("eth0") or {}
    return {"ethtool": eth.get("version"), "ethtool_driver": eth.get("driver"),
            "sys": m.get("sys_version"), "modinfo": (m.get("modinfo") or {}).get("version"),
            "file": (m.get("modinfo") or {}).get("filename"), "loaded": m.get("loaded")}
