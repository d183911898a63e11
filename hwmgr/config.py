"""Site configuration: `/etc/hwmgr/hwmgr.json` (or `$HWMGR_CONFIG`), read through the host seam.

It holds the site's choices the lifecycle verbs need unattended: what `verify` does on a
failure, how the runner reboots (the QEMU lab plugs its own command), the iperf3 peer and the
throughput floor. Unknown keys are refused so a typo never silently falls back to a default.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from hwmgr import safejson
from hwmgr.errors import BadInputError
from hwmgr.host.seam import Host

DEFAULT_CONFIG = "/etc/hwmgr/hwmgr.json"
DEFAULT_STATE_DIR = "/var/lib/hwmgr"
DEFAULT_CACHE_DIR = "/var/cache/hwmgr"
DEFAULT_SITE_CATALOG_DIR = "/etc/hwmgr/catalog.d"
DEFAULT_TRUSTED_KEYS_DIR = "/etc/hwmgr/trusted.gpg.d"
# seconds one `dkms build` may take before hwmgr stops it (site key build_timeout_seconds):
# a vendor driver builds in 1-3 min on a server; an emulated or busy machine needs more
DEFAULT_BUILD_TIMEOUT = 600.0
INSTALLED_CATALOG = "catalog/current.json"  # under the state dir (`hwmgr catalog update`)
ON_FAILURE = ("report", "rollback")


@dataclass
class Config:
    """Where hwmgr keeps state and downloads and how it may fetch; built once per run from
    flags, then HWMGR_* environment variables, then defaults (see `config_from`)."""

    state_dir: str = DEFAULT_STATE_DIR
    cache_dir: str = DEFAULT_CACHE_DIR
    offline: bool = False
    mirror: str | None = None
    drivers_dir: str | None = None
    sign_key: str | None = None
    sign_cert: str | None = None
    build_timeout: float = DEFAULT_BUILD_TIMEOUT  # the site config's build_timeout_seconds
    site_catalog_dir: str = DEFAULT_SITE_CATALOG_DIR
    trusted_keys_dir: str = DEFAULT_TRUSTED_KEYS_DIR
    catalog_dir: str | None = None  # HWMGR_CATALOG_DIR: a base catalog dir used alone
    specs_dir: str | None = None  # HWMGR_SPECS_DIR: the DKMS RPM spec template's dir
    user_cache_dir: str = ""  # $XDG_CACHE_HOME/hwmgr or ~/.cache/hwmgr (catalog caches)
    source_date_epoch: str | None = None  # SOURCE_DATE_EPOCH: reproducible report times
    # --site-catalog FILE...: layers over the run's catalog (its --catalog list, or the base
    # and catalog.d), never instead of it
    extra_layers: tuple[str, ...] = ()


def shipped_dirs(kind: str) -> list[Path]:
    """Where the data hwmgr ships (kind "catalogs" or "drivers") may live, in search order: a
    checkout beside the package, the installing prefix's share/hwmgr (a wheel's data files,
    e.g. a venv), then the system's /usr/share/hwmgr (the RPM). Only existing dirs."""
    candidates = [Path(__file__).resolve().parent.parent / kind,
                  Path(sys.prefix) / "share" / "hwmgr" / kind,
                  Path("/usr/share/hwmgr") / kind]
    seen: list[Path] = []
    for d in candidates:
        if d not in seen and d.is_dir():
            seen.append(d)
    return seen


@dataclass(frozen=True)
class CatalogLocations:
    """Where the analysing machine keeps its catalog layers (never under --root)."""

    site_dir: Path
    installed: Path
    trusted_keys: Path

    @property
    def installed_dir(self) -> Path:
        return self.installed.parent


def catalog_locations(config: Config | None = None) -> CatalogLocations:
    """The site catalog dir, the installed (updated) catalog and the catalog keyring dir."""
    cfg = config if config is not None else config_from(None)
    return CatalogLocations(Path(cfg.site_catalog_dir),
                            Path(cfg.state_dir) / INSTALLED_CATALOG,
                            Path(cfg.trusted_keys_dir))


def config_from(args: argparse.Namespace | None,
                env: Mapping[str, str] | None = None) -> Config:
    """The one place flags and HWMGR_* variables become a `Config` (paths made absolute)."""
    env = env if env is not None else os.environ
    state = getattr(args, "state_dir", None) or env.get("HWMGR_STATE_DIR") or DEFAULT_STATE_DIR
    cache = getattr(args, "cache_dir", None) or env.get("HWMGR_CACHE_DIR") or DEFAULT_CACHE_DIR
    return Config(
        state_dir=os.path.abspath(state),  # host paths are absolute; ./x means here
        cache_dir=os.path.abspath(cache),
        offline=bool(getattr(args, "offline", False)),
        mirror=getattr(args, "mirror", None),
        drivers_dir=env.get("HWMGR_DRIVERS_DIR"),
        catalog_dir=env.get("HWMGR_CATALOG_DIR") or None,
        specs_dir=env.get("HWMGR_SPECS_DIR") or None,
        user_cache_dir=os.path.join(
            env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
            "hwmgr"),
        source_date_epoch=env.get("SOURCE_DATE_EPOCH"),
        sign_key=env.get("HWMGR_SIGN_KEY"),
        sign_cert=env.get("HWMGR_SIGN_CERT"),
        site_catalog_dir=os.path.abspath(
            env.get("HWMGR_SITE_CATALOG_DIR") or DEFAULT_SITE_CATALOG_DIR),
        trusted_keys_dir=os.path.abspath(
            env.get("HWMGR_TRUSTED_KEYS_DIR") or DEFAULT_TRUSTED_KEYS_DIR),
        extra_layers=tuple(getattr(args, "site_catalog", None) or ()),
    )


@dataclass
class SiteConfig:
    """The site's settings, with the defaults used when the file or a key is absent."""

    on_failure: str = "report"
    reboot_command: list[str] = field(default_factory=lambda: ["systemctl", "reboot"])
    throughput_peer: str | None = None
    throughput_floor_mbps: float | None = None
    throughput_port: int = 5201
    throughput_duration: float = 3.0
    connect_timeout_ms: int = 3000
    bind_dev: str | None = None
    max_boot_attempts: int = 3
    link_wait_seconds: float = 20.0
    build_timeout_seconds: float = DEFAULT_BUILD_TIMEOUT
    mirror: str | None = None  # internal mirror base URL (or directory) for vendor packages
    source: str | None = None  # the file these settings came from (None: defaults only)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check(key: str, value: Any, where: str) -> Any:
    """Validate one key; BadInputError naming the file and key otherwise. (`Any`: the one
    JSON edge of the site config; each key's value is checked here for SiteConfig(**values).)"""

    def bad(expected: str) -> BadInputError:
        return BadInputError(f"{where}: '{key}' must be {expected}, not {json.dumps(value)}")

    if key == "on_failure":
        if value not in ON_FAILURE:
            raise bad("one of " + ", ".join(ON_FAILURE))
    elif key == "reboot_command":
        if (not isinstance(value, list) or not value
                or not all(isinstance(a, str) and a for a in value)):
            raise bad("a non-empty list of strings (an argv, no shell)")
    elif key in ("throughput_peer", "bind_dev"):
        if value is not None and (not isinstance(value, str) or not value.strip()
                                  or any(c.isspace() for c in value)):
            raise bad("a host name/address or interface without spaces, or null")
    elif key == "throughput_floor_mbps":
        if value is not None and not (_is_num(value) and value > 0):
            raise bad("a positive number of Mbit/s, or null")
    elif key == "throughput_port":
        if not (isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536):
            raise bad("a TCP port number")
    elif key == "throughput_duration":
        if not (_is_num(value) and 2 <= value <= 600):
            raise bad("a number of seconds between 2 and 600")
    elif key == "connect_timeout_ms":
        if not (isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 600000):
            raise bad("a positive number of milliseconds")
    elif key == "max_boot_attempts":
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise bad("an integer >= 1")
    elif key == "mirror":
        if value is not None and not (isinstance(value, str) and (
                value.startswith(("http://", "https://", "file:///", "/")))
                and not any(c.isspace() for c in value)):
            raise bad("an http(s) URL, a file:/// URL or an absolute directory, or null")
    elif key == "link_wait_seconds" and not (_is_num(value) and 0 <= value <= 600):
        raise bad("a number of seconds between 0 and 600")
    elif key == "build_timeout_seconds" and not (_is_num(value) and 60 <= value <= 86400):
        raise bad("a number of seconds between 60 and 86400")
    return value


KNOWN_KEYS = tuple(k for k in (f.name for f in fields(SiteConfig)) if k != "source")


def parse_config(raw: bytes, where: str) -> SiteConfig:
    """Parse and validate a config document (one JSON object)."""
    doc = safejson.load(raw, where)  # a snapshot's config is untrusted: bounded depth
    if not isinstance(doc, dict):
        raise BadInputError(f"{where}: expected a JSON object")
    unknown = sorted(set(doc) - set(KNOWN_KEYS) - {"comment"})
    if unknown:
        raise BadInputError(
            f"{where}: unknown key '{unknown[0]}' (known: {', '.join(KNOWN_KEYS)})")
    values = {k: _check(k, v, where) for k, v in doc.items() if k != "comment"}
    return SiteConfig(**values, source=where)


def with_site(config: Config, site: SiteConfig) -> Config:
    """The run's settings with the site config's share in them: its mirror (unless --mirror
    named one) and its DKMS build timeout. The one place the two join; plans journal it."""
    return replace(config, mirror=config.mirror or site.mirror,
                   build_timeout=float(site.build_timeout_seconds))


def config_path(env: Mapping[str, str] | None = None) -> str:
    """The config file in effect: `$HWMGR_CONFIG`, else /etc/hwmgr/hwmgr.json."""
    env = env if env is not None else os.environ
    return env.get("HWMGR_CONFIG") or DEFAULT_CONFIG


def load_config(host: Host, env: Mapping[str, str] | None = None, *,
                local: Host | None = None) -> SiteConfig:
    """Read the site config through `host`; defaults when the file does not exist.

    `$HWMGR_CONFIG` names a file on the machine running hwmgr (read through `local`, this
    machine, by default a live Host on the same runner), so a snapshot under `--root` never
    supplies a config by accident.
    """
    path = config_path(env)
    reader = host
    if path != DEFAULT_CONFIG and not host.live:
        reader = local if local is not None else Host("/", host.runner)
    if not path.startswith("/"):
        raise BadInputError(f"HWMGR_CONFIG={path}: expected an absolute path")
    raw = reader.read_bytes(path)
    if raw is None:
        if path != DEFAULT_CONFIG and not reader.exists(path):
            raise BadInputError(f"{path}: config file named by HWMGR_CONFIG does not exist")
        if reader.exists(path):
            raise BadInputError(f"{path}: config file is not readable")
        return SiteConfig()
    return parse_config(raw, path)
