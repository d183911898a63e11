"""A VM whose boots several lab scenarios share, in order, foreground or in a background thread.

Used by tests/lab: a failure marks the chain broken so later scenarios say why they cannot run.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

CHAINS_ENV = "HWMGR_LAB_CHAINS"  # comma list of the forked chains to start (unset: all)
Plan = list[tuple[str, dict[str, Any]]]
# forked chains that scenario modules other than test_lab.py add: fork point ("a1": chain
# a's disk after its boot 1, "a2": after boot 2) -> [(chain, VM keywords, plan from the lab)];
# test_lab.py starts them where it forks chains b and c
FORKS: dict[str, list[tuple[str, dict[str, Any], Callable[[Any], Plan]]]] = {}


def wanted(name: str) -> bool:
    """Whether this run starts forked chain `name` ($HWMGR_LAB_CHAINS, e.g. "g,h" to run only
    the kernel gate's chains beside chain a; unset: every chain)."""
    only = os.environ.get(CHAINS_ENV, "").strip()
    return not only or name in {n.strip() for n in only.split(",")}


def start_forks(lab: Any, chains: dict[str, Chain], point: str, parent: Any) -> None:
    """Fork and start, in the background, every registered chain of fork point `point`."""
    for name, kw, plan in FORKS.get(point, []):
        if wanted(name):
            c = chains.setdefault(name, Chain(name))
            c.vm = lab.vm(name, fork_of=parent, **kw)
            c.start(plan(lab))


class Chain:
    """A VM whose boots several scenarios share, in order; a failure stops the later ones.

    A forked chain runs its scripted boots in a background thread (`start`), so its DKMS
    build overlaps chain a's; the scenario test then `wait`s for each boot and asserts.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.vm: Any = None
        self.broken: str | None = None
        self.data: dict[str, Any] = {}
        self.boots: list[Any] = []
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self._held: Any = None

    def hold(self, lab: Any) -> None:
        """Keep one of the lab's slots for this (foreground) chain between its boots."""
        if self._held is None:
            lab.slots.acquire()
            self._held = lab.slots

    def release(self) -> None:
        if self._held is not None:
            self._held.release()
            self._held = None

    def need(self) -> None:
        if self.broken:
            raise AssertionError(f"chain {self.name} is unusable: {self.broken}")

    def start(self, plan: list[tuple[str, dict[str, Any]]]) -> None:
        """Boot `plan` (step script, boot() keywords) in order, in the background."""

        def body() -> None:
            try:
                for step, kw in plan:
                    b = self.vm.boot(step, **kw)
                    with self._cond:
                        self.boots.append(b)
                        self._cond.notify_all()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting test
                with self._cond:
                    self._error = exc
                    self._cond.notify_all()
            finally:
                with self._cond:
                    self._thread = None
                    self._cond.notify_all()

        self._thread = threading.Thread(target=body, name=f"lab-chain-{self.name}",
                                        daemon=True)
        self._thread.start()

    def wait(self, n: int) -> Any:
        """Boot number `n` (1-based) of a started chain, once it has ended."""
        with self._cond:
            while len(self.boots) < n and self._error is None and self._thread is not None:
                self._cond.wait(timeout=5)
            if len(self.boots) >= n:
                return self.boots[n - 1]
            if self._error is not None:
                raise AssertionError(f"chain {self.name} failed before its boot {n}: "
                                     f"{self._error}") from self._error
            raise AssertionError(f"chain {self.name} was never started or ended early")
