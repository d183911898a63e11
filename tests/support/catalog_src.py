"""Load a by-hand mining script of catalog-src/ as a module, for its tests (the scripts are not
a package: they sit beside the catalog data they write)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

CATALOG_SRC = Path(__file__).resolve().parent.parent.parent / "catalog-src"


def load(name: str) -> ModuleType:
    """catalog-src/<name>.py, registered in sys.modules (its dataclasses need that)."""
    spec = importlib.util.spec_from_file_location(name, CATALOG_SRC / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
