"""Download a driver's vendor package into the cache and verify size and sha256."""

from __future__ import annotations

import argparse

from hwmgr.catalog.load import load_catalog
from hwmgr.catalog.verdict import source_refusal
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
    NotFoundError,
    RefusedError,
)
from hwmgr.lifecycle.builds.advice import not_in_catalog
from hwmgr.lifecycle.source.fetch import Source
from hwmgr.lifecycle.source.mirror import fetch_mirrored, source_mirrors
from hwmgr.lifecycle.source.signature import check_signature
from hwmgr.output import Outcome
from hwmgr.ui import lifecycle as ui
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

NAME = "fetch"
EXAMPLES = (
    Example("hwmgr fetch be2net --to 10.2.470.14", "into /var/cache/hwmgr"),
    Example("hwmgr fetch be2net --to 10.2.470.14 --offline --mirror /srv/mirror"),
    Example("hwmgr fetch be2net --to 9.9", "a version the catalog lacks", EXIT_NOT_FOUND),
)
EXIT_CODES = {
    EXIT_OK: "verified file in the cache",
    EXIT_FAILED: "the download failed (network error, server error)",
    EXIT_NOT_FOUND: "not found (404, not in the catalog, offline miss)",
    EXIT_BAD_INPUT: "a bad catalog or signing key (named)",
    EXIT_REFUSED: "refused (checksum/size mismatch, unverified source, insecure URL or "
                  "redirect)",
}


def option_parents() -> list[argparse.ArgumentParser]:
    return ui.parents(mutating=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("driver")
    p.add_argument("--to", metavar="VERSION", required=True)
    p.add_argument("--offline", action="store_true", help="use only the cache or --mirror")
    p.add_argument("--mirror", metavar="DIR|URL",
                   help="internal mirror (directory or http(s) URL) tried before the vendor URL")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    settings = ctx.config
    entry = load_catalog(args.catalog, config=ctx.config).entry(args.driver)
    info = entry.get("versions", {}).get(args.to)
    if info is None:
        raise NotFoundError(not_in_catalog(args.driver, args.to, entry.get("versions", {})))
    why = source_refusal(info.get("source"))
    if why:
        raise RefusedError(f"{args.driver} {args.to}: {why}")
    src = Source.from_catalog(info["source"])
    progress = ui.ProgressUI()  # stderr: a bar on a terminal, a line per step otherwise
    try:
        res = fetch_mirrored(ctx.host, src, settings.cache_dir, offline=args.offline,
                             mirror=args.mirror or ctx.site.mirror,
                             per_source=source_mirrors(info["source"]),
                             progress=progress.download(src.name(), src.size),
                             on_retry=progress.retry, who=f"{args.driver} {args.to}")
    finally:
        progress.close()
    data = {"path": str(res.path), "sha256": res.sha256, "size": res.size,
            "origin": res.origin, "from_cache": res.from_cache, "seconds": res.seconds,
            "signed_by": None}
    if info["source"].get("signing_key"):
        data["signed_by"] = check_signature(ctx.host, res.path, settings.state_dir,
                                            info["source"]["signing_key"])
    return Outcome(NAME, data=data, render=lambda c: c.print(
        f"{res.path} ({res.size} bytes, sha256 ok, {res.origin})", markup=False,
        soft_wrap=True))  # a path stays one line to paste
