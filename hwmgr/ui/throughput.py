"""Throughput options shared by `throughput`, `verify` and `upgrade`: flags over site config.

Lives below the verbs so that `verify` does not import the `throughput` verb.
"""

from __future__ import annotations

import argparse
from typing import Any

from hwmgr.catalog.load import Catalog, load_catalog
from hwmgr.config import Config, SiteConfig
from hwmgr.errors import HwmgrError, UsageError
from hwmgr.verify.throughput import Options

MAX_TIMEOUT_SECONDS = 86_400.0  # one day: beyond it a "limit" is none (inf, 1e308 overflow)
MAX_CONNECT_MS = 600_000  # ten minutes
MAX_FLOOR_MBPS = 1e7  # 10 Tbit/s


def hard_timeout(value: float | None) -> float | None:
    """`--timeout` checked: None, or finite seconds in (0, MAX_TIMEOUT_SECONDS]; a UsageError
    (one line) otherwise, before anything runs."""
    if value is not None and not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise UsageError(f"--timeout {value:g}: expected a positive number of seconds up to "
                         f"{MAX_TIMEOUT_SECONDS:g}")
    return value


def options_from(args: argparse.Namespace, cfg: SiteConfig, peer: str | None) -> Options:
    """throughput.Options from flags over site config over defaults; UsageError if bad."""
    def opt(name: str) -> Any:
        return getattr(args, name, None)

    duration = opt("duration") if opt("duration") is not None else cfg.throughput_duration
    if not 2 <= duration <= 600:
        raise UsageError(f"--duration {duration:g}: expected 2 to 600 seconds")
    if opt("floor") is not None and not 0 < opt("floor") <= MAX_FLOOR_MBPS:
        raise UsageError(f"--floor {opt('floor'):g}: expected a positive Mbit/s value "
                         f"up to {MAX_FLOOR_MBPS:g}")
    if opt("streams") is not None and not 1 <= opt("streams") <= 128:
        raise UsageError(f"--streams {opt('streams')}: expected 1 to 128")
    hard_timeout(opt("timeout"))
    port = opt("port") if opt("port") is not None else cfg.throughput_port
    if not 0 < port < 65536:
        raise UsageError(f"--port {port}: expected 1 to 65535")
    ct = opt("connect_timeout") if opt("connect_timeout") is not None else cfg.connect_timeout_ms
    if not 0 < ct <= MAX_CONNECT_MS:
        raise UsageError(f"--connect-timeout {ct}: expected 1 to {MAX_CONNECT_MS} ms")
    floor, source = opt("floor"), "--floor" if opt("floor") is not None else None
    if floor is None and cfg.throughput_floor_mbps is not None:
        floor, source = cfg.throughput_floor_mbps, f"throughput_floor_mbps in {cfg.source}"
    dirs = ("send", "receive") if opt("both") else (
        ("receive",) if opt("reverse") else ("send",))
    return Options(peer=peer or "", port=port, duration=duration,
                   bind_dev=opt("bind_dev") or cfg.bind_dev, directions=dirs, floor_mbps=floor,
                   floor_source=source, streams=opt("streams"), connect_timeout_ms=ct,
                   timeout=opt("timeout"), force=bool(opt("force")))


def floor_catalog(args: argparse.Namespace, config: Config) -> Catalog | None:
    """The catalog for the fraction-of-link floor (`config`: the run's Config); None (no
    floor) when none loads."""
    try:
        return load_catalog(args.catalog, config=config)
    except HwmgrError:
        if args.catalog:
            raise
        return None
