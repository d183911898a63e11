"""How a transaction's run or recovery ended: what the verbs show and the journal's callers read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class TxnResult:
    """How a run or recovery ended."""

    id: Optional[int]
    kind: str
    target: str
    state: str
    direction: str = "forward"
    error: Optional[str] = None
    recovered: bool = False
    steps: list[dict[str, str]] = field(default_factory=list)
    signal: Optional[str] = None  # the signal (SIGINT, SIGTERM, SIGHUP) that stopped it

    @property
    def ok(self) -> bool:
        """True when the transaction committed (the new state is in place)."""
        return self.state == "committed"

    @property
    def closed(self) -> bool:
        """True when the host is in exactly the old or the new state."""
        return self.state in ("committed", "rolled-back")

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "state": self.state,
            "direction": self.direction,
            "error": self.error,
            "recovered": self.recovered,
            "steps": self.steps,
            "signal": self.signal,
        }
