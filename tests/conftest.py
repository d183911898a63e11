"""Shared pytest fixtures; plain helpers live in tests/support.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import HOSTS


@pytest.fixture
def hosts_dir() -> Path:
    return HOSTS


@pytest.fixture
def copy_host(tmp_path: Path):
    """Copy a bundled snapshot to a temp dir so a test may damage it."""

    def _copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(HOSTS / name, dest, symlinks=True)
        return dest

    return _copy
