"""Command-line options shared by the verbs (usable before or after the verb name).

Verbs take these as argparse parents; keeping them here (below `cli` and the verbs) means no
verb imports `cli` back and no verb imports another verb.
"""

from __future__ import annotations

import argparse

from hwmgr.config import DEFAULT_CACHE_DIR, DEFAULT_STATE_DIR


def common_options(json_flag: bool = True, root: bool = False) -> argparse.ArgumentParser:
    """Options shared by verbs, usable before or after the verb name."""
    p = argparse.ArgumentParser(add_help=False)
    if json_flag:
        p.add_argument("--json", action="store_true", help="print one JSON object (format 1)")
    if root:
        p.add_argument(
            "--root",
            metavar="DIR|FILE.tar.gz",
            help="analyse a host snapshot instead of this machine",
        )
    p.add_argument(
        "--catalog",
        action="append",
        metavar="FILE",
        help="catalog file(s) to use instead of the bundled/installed ones",
    )
    p.add_argument(
        "--site-catalog",
        action="append",
        metavar="FILE",
        help="a site layer over the catalog in force (repeatable; unlike --catalog it replaces "
             "nothing)",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks on internal errors")
    return p


def lifecycle_options(mutating: bool = True) -> argparse.ArgumentParser:
    """Options of the verbs that plan or change drivers (state/cache dirs, safety)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--state-dir", metavar="DIR",
                   help=f"journal, lock, backups (default $HWMGR_STATE_DIR or {DEFAULT_STATE_DIR})")
    p.add_argument("--cache-dir", metavar="DIR",
                   help=f"downloads (default $HWMGR_CACHE_DIR or {DEFAULT_CACHE_DIR})")
    if mutating:
        p.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                       help="wait this long for another hwmgr's lock (default: refuse at once)")
    return p
