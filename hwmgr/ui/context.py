"""The run's context, built once by `cli` and handed to the verb: arguments, the `Config`, the
host under study, this machine, the site config.

Frozen: a verb reads it, never rebinds it. What it holds is opened on first use (one cell per
run), so a verb that never looks at a host (`vercmp`, `collect-script`) never opens `--root`'s
snapshot nor fails on it, and one that looks twice gets the same `Host`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Callable

from hwmgr.config import Config, SiteConfig, config_from, load_config
from hwmgr.host.seam import Host
from hwmgr.host.snapshot import open_host


@dataclass
class _Opened:
    """The lazily opened parts of one run, and what closes them."""

    config: Config | None = None
    host: Host | None = None
    local: Host | None = None
    site: SiteConfig | None = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)


@dataclass(frozen=True)
class Context:
    """Per-invocation settings shared by the verbs (`run(args, ctx)`)."""

    args: argparse.Namespace
    _opened: _Opened = field(default_factory=_Opened, repr=False, compare=False)

    @classmethod
    def of(cls, args: argparse.Namespace, *, host: Host, config: Config) -> Context:
        """A context over a Host already open (a library caller's tree, a test fixture's):
        the caller owns it, so nothing is widened or cleaned up for it here."""
        return cls(args, _Opened(config=config, host=host))

    @property
    def config(self) -> Config:
        """Paths and switches for this run, from flags and HWMGR_* variables (read once)."""
        if self._opened.config is None:
            self._opened.config = config_from(self.args)
        return self._opened.config

    @property
    def host(self) -> Host:
        """`--root`'s snapshot or tree, else this machine (opened on first use)."""
        if self._opened.host is None:
            host, cleanup = open_host(getattr(self.args, "root", None))
            if cleanup is not None:
                self._opened.cleanup.append(cleanup)
            # the run's own dirs are the live host's writable roots besides hwmgr's host paths
            host.allow_writes(self.config.state_dir, self.config.cache_dir)
            self._opened.host = host
        return self._opened.host

    @property
    def local(self) -> Host:
        """This machine, for files the user names on the command line: the host itself when it
        is live, else `/` on the host's runner (a snapshot under `--root` never supplies
        them). Writes stay within the live host's roots."""
        if self._opened.local is None:
            host = self.host
            self._opened.local = host if host.live else Host("/", host.runner)
        return self._opened.local

    @property
    def site(self) -> SiteConfig:
        """The site config (`/etc/hwmgr/hwmgr.json` or `$HWMGR_CONFIG`), read once."""
        if self._opened.site is None:
            self._opened.site = load_config(self.host, local=self.local)
        return self._opened.site

    def close(self) -> None:
        """Remove what opening the host made (an extracted snapshot)."""
        for fn in reversed(self._opened.cleanup):
            fn()
        self._opened.cleanup.clear()
