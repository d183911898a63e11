"""An upgrade's journaled build limit is read back as hostile data: only a usable number counts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hwmgr.config import DEFAULT_BUILD_TIMEOUT
from hwmgr.lifecycle import steps


@pytest.mark.parametrize("value,limit", [(2400, 2400.0), ("x", DEFAULT_BUILD_TIMEOUT),
                                         (True, DEFAULT_BUILD_TIMEOUT),
                                         (float("inf"), DEFAULT_BUILD_TIMEOUT),
                                         (-1, DEFAULT_BUILD_TIMEOUT),
                                         (None, DEFAULT_BUILD_TIMEOUT)])
def test_journaled_build_timeout(value: object, limit: float) -> None:
    ctx = SimpleNamespace(host=None, params={"build_timeout": value})
    assert steps._dkms(ctx).build_timeout == limit  # type: ignore[arg-type]
