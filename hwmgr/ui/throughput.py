"""Throughput options shared by `throughput`, `verify` and `upgrade`: flags over site config.

Lives below the verbs so that `verify` does not import the `throughput` verb.
"""

from __future__ import annotations

import argparse
from typing import Any

from hwmgr.catalog.load import Catalog, load_catalog
from hwmgr.errors import HwmgrError, UsageError
from hwmgr.verify.throughput import Options


def options_from(args: argparse.Namespace, cfg: Any, peer: str | None) -> Options:
    """throughput.Options from flags over site config over defaults; UsageError if bad."""
    def opt(name: str) -> Any:
        return getattr(args, name, None)

    duration = opt("duration") if opt("duration") is not None else cfg.throughput_duration
    if not 2 <= duration <= 600:
        raise UsageError(f"--duration {duration:g}: expected 2 to 600 seconds")
    if opt("floor") is not None and not opt("floor") > 0:
        raise UsageError(f"--floor {opt('floor'):g}: expected a positive Mbit/s value")
    if opt("streams") is not None and not 1 <= opt("streams") <= 128:
        raise UsageError(f"--streams {opt('streams')}: expected 1 to 128")
    if opt("timeout") is not None and not opt("timeout") > 0:
        raise UsageError(f"--timeout {opt('timeout'):g}: expected a positive number of seconds")
    port = opt("port") if opt("port") is not None else cfg.throughput_port
    if not 0 < port < 65536:
        raise UsageError(f"--port {port}: expected 1 to 65535")
    ct = opt("connect_timeout") if opt("connect_timeout") is not None else cfg.connect_timeout_ms
    if not ct > 0:
        raise UsageError(f"--connect-timeout {ct}: expected a positive number of ms")
    floor, source = opt("floor"), "--floor" if opt("floor") is not None else None
    if floor is None and cfg.throughput_floor_mbps is not None:
        floor, source = cfg.throughput_floor_mbps, f"throughput_floor_mbps in {cfg.source}"
    dirs = ("send", "receive") if opt("both") else (
        ("receive",) if opt("reverse") else ("send",))
    return Options(peer=peer or "", port=port, duration=duration,
                   bind_dev=opt("bind_dev") or cfg.bind_dev, directions=dirs, floor_mbps=floor,
                   floor_source=source, streams=opt("streams"), connect_timeout_ms=ct,
                   timeout=opt("timeout"), force=bool(opt("force")))


def floor_catalog(args: argparse.Namespace, config: Any) -> Catalog | None:
    """The catalog for the fraction-of-link floor (`config`: the run's Config); None (no
    floor) when none loads."""
    try:
        return load_catalog(args.catalog, config=config)
    except HwmgrError:
        if args.catalog:
            raise
        return None
