"""Which catalog files a run loads: explicit paths, $HWMGR_CATALOG_DIR, the installed or
shipped base catalog, then the site layers (catalog.d/*.json), in that order; and the refusal
when there is none at all (a compliance check with nothing to compare with must not pass)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence, Union

from hwmgr.config import Config, catalog_locations, shipped_dirs
from hwmgr.errors import NotFoundError

PathLike = Union[str, "os.PathLike[str]"]

ENV_DIR = "HWMGR_CATALOG_DIR"
DRIVERS_SUBDIR = "drivers"  # per-driver files of a catalog directory
WHAT_TO_DO = ("install hwmgr's catalog, name one with --catalog FILE, or install a signed one "
              "with 'hwmgr catalog update URL'")


def default_dirs(config: Config) -> list[Path]:
    """Catalog directories in search order: $HWMGR_CATALOG_DIR, then where hwmgr ships its
    catalogs (checkout, wheel prefix, system: `config.shipped_dirs`)."""
    dirs = []
    env = config.catalog_dir
    if env:
        dirs.append(Path(env))
    dirs += shipped_dirs("catalogs")
    return dirs


def discover(paths: Sequence[PathLike] | None, config: Config) -> list[Path]:
    """The catalog files to load. Explicit paths (files, or dirs of *.json) must exist; else
    $HWMGR_CATALOG_DIR alone if set; else the first default directory holding *.json wins.
    All files of the chosen set are merged; a driver or device rule defined twice is an error."""
    if paths:
        files: list[Path] = []
        for p in map(Path, paths):
            if p.is_dir():
                files += dir_files(p)
            elif p.exists() or _loops(p):
                files.append(p)  # a FIFO, device or link loop: the loader says what it is
            else:
                raise NotFoundError(f"catalog file {p} does not exist")
        return files
    env = config.catalog_dir
    if env:  # an explicit directory is used alone, even when it holds no catalog
        if not Path(env).is_dir():
            raise NotFoundError(f"{ENV_DIR}={env} is not a directory")
        return dir_files(Path(env))
    for d in default_dirs(config):
        found = dir_files(d) if d.is_dir() else []
        if found:
            return found
    return []


def dir_files(d: Path) -> list[Path]:
    """A catalog directory's files in layering order: its *.json (the catalog header with its
    version, sysctl and conditional rules first), then one file per driver in drivers/*.json."""
    return sorted(d.glob("*.json")) + sorted((d / DRIVERS_SUBDIR).glob("*.json"))


def _loops(p: Path) -> bool:
    """A name that is there but cannot be resolved (a symlink loop), unlike a missing one."""
    try:
        p.stat()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


def base_files(config: Config) -> list[Path]:
    """The base layer: $HWMGR_CATALOG_DIR when set; else the installed catalog (`hwmgr catalog
    update`) when present; else the shipped catalog (checkout, then the system dir)."""
    if config.catalog_dir:
        return discover(None, config)
    installed = catalog_locations(config).installed
    if installed.is_file():
        return [installed]
    return discover(None, config)


def site_files(config: Config) -> list[Path]:
    """The site layers: catalog.d/*.json of the analysing machine, in lexical order."""
    d = catalog_locations(config).site_dir
    return sorted(d.glob("*.json")) if d.is_dir() else []


def in_force_beneath(layers: Sequence[PathLike], config: Config) -> list[Path]:
    """The catalog in force (base, then site layers) without the `layers` being checked: what
    `hwmgr catalog validate LAYER` puts beneath a layer, so it is judged where it will apply."""
    def same(a: Path, b: Path) -> bool:
        try:
            return a.samefile(b)
        except OSError:
            return False

    given = [Path(p) for p in layers]
    return [f for f in base_files(config) + site_files(config)
            if not any(same(f, g) for g in given)]


def catalog_files(paths: Sequence[PathLike] | None, config: Config) -> list[Path]:
    """The files a run loads: `paths` in order when given, else the base catalog then the site
    layers; then the run's `--site-catalog` layers (`config.extra_layers`). NotFoundError
    (exit 3) naming every place looked in when there is no base at all."""
    files = discover(paths, config) if paths else base_files(config) + site_files(config)
    if files:
        return files + (discover(config.extra_layers, config) if config.extra_layers else [])
    if paths:
        looked = [str(p) for p in paths]
    elif config.catalog_dir:
        looked = [f"{ENV_DIR}={config.catalog_dir}"]
    else:
        looked = [str(catalog_locations(config).installed), *map(str, default_dirs(config))]
    if not paths:
        looked.append(str(catalog_locations(config).site_dir))
    raise NotFoundError(f"no catalog found (looked in {', '.join(looked)}): {WHAT_TO_DO}")
