"""`hwmgr catalog trust|update|rollback|sign`: the catalog a site can trust and extend.

All four act on the analysing machine (its /etc/hwmgr and state dir), never on a --root.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from hwmgr.catalog.entry import Source
from hwmgr.catalog.load import load_catalog
from hwmgr.catalog.update import rollback, sign, update
from hwmgr.catalog.validate import MAX_FILE_BYTES
from hwmgr.config import CatalogLocations, catalog_locations
from hwmgr.errors import HwmgrError
from hwmgr.host.seam import Host
from hwmgr.lifecycle import trust
from hwmgr.lifecycle.builds.recipe import load_recipe
from hwmgr.lifecycle.source import keyfile
from hwmgr.lifecycle.source.signature import keyring_path, verify_in_keyring
from hwmgr.output import Outcome, printable
from hwmgr.ui.lifecycle import ProgressUI, confirm

if TYPE_CHECKING:
    from hwmgr.lifecycle.source.keyfile import VendorKey, Workspace
    from hwmgr.lifecycle.trust import PackageFacts
    from hwmgr.ui.context import Context

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001

NAME = "catalog"


def add_actions(sub: SubParsers, common: Callable[[], argparse.ArgumentParser]) -> None:
    """Sub-parsers of the trust verbs."""
    t = sub.add_parser("trust", parents=[common()], help="record a vendor package's checksum",
                       description="Inspect a vendor SRPM with rpm (or a vendor tarball: members, "
                                   "MANIFEST) and, on confirmation, record its sha256/size (and "
                                   "signing key) in the site catalog and keep it in the cache.")
    t.add_argument("driver", metavar="DRIVER")
    t.add_argument("version", metavar="VERSION")
    t.add_argument("--file", required=True, metavar="PKG", help="the vendor source RPM or tarball")
    t.add_argument("--sha256", help="checksum published elsewhere (the file must match)")
    t.add_argument("--size", type=int, help="size published elsewhere (the file must match)")
    t.add_argument("--require-signature", action="store_true",
                   help="refuse an unsigned package (a signed one is always checked against "
                        "hwmgr's rpm keyring)")
    t.add_argument("--key", metavar="KEYFILE",
                   help="the vendor's OpenPGP public key (armored or binary): shown, checked "
                        "against the package's signature, imported into hwmgr's keyring on "
                        "confirmation")
    t.add_argument("--yes", "-y", action="store_true", help="record without asking")
    u = sub.add_parser("update", parents=[common()], help="install a signed catalog from a URL",
                       description="Download URL and URL.asc, verify with gpgv against "
                                   "/etc/hwmgr/trusted.gpg.d, validate, install atomically.")
    u.add_argument("url", metavar="URL")
    u.add_argument("--allow-older", action="store_true",
                   help="accept a catalog_version older than the installed one")
    sub.add_parser("rollback", parents=[common()], help="back to the previous catalog",
                   description="Swap the installed catalog with the one it replaced.")
    s = sub.add_parser("sign", parents=[common()], help="sign a catalog (writes FILE.asc)",
                       description="Validate FILE and write a detached armored signature.")
    s.add_argument("file", metavar="FILE")
    s.add_argument("--key", required=True, metavar="KEYID", help="gpg key to sign with")


def _local(ctx: Context, loc: CatalogLocations, *extra: str) -> Host:
    """The analysing machine, writable only where its catalog layers live (and `extra`)."""
    return Host("/", ctx.host.runner,
                writable=[str(loc.installed_dir), str(loc.site_dir), *extra])


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    """Dispatch trust, update, rollback, sign."""
    loc = catalog_locations(ctx.config)
    if args.action == "trust":
        return _trust(args, ctx, loc)
    if args.action == "update":
        progress = ProgressUI()  # stderr: a bar per download on a terminal, lines otherwise
        try:
            data = update(_local(ctx, loc), args.url, loc, config=ctx.config,
                          allow_older=args.allow_older, ui=progress)
        finally:
            progress.close()
        return Outcome(NAME, data=data, render=lambda c: c.print(
            f"installed catalog {data['catalog_version']} (was {data['previous_version']}), "
            f"signed by {data['signed_by']}: {data['installed']}", markup=False,
            soft_wrap=True))
    if args.action == "rollback":
        restored = rollback(_local(ctx, loc), loc)
        return Outcome(NAME, data=restored, render=lambda c: c.print(
            f"restored catalog {restored['catalog_version']}: {restored['installed']}",
            markup=False))
    out = sign(_local(ctx, loc, str(Path(args.file).absolute().parent)), Path(args.file), args.key)
    return Outcome(NAME, data={"signature": str(out)},
                   render=lambda c: c.print(f"wrote {out}", markup=False))


def _trust(args: argparse.Namespace, ctx: Context, loc: CatalogLocations) -> Outcome:
    state_dir = ctx.config.state_dir
    cache = ctx.config.cache_dir  # the trusted file is kept there for the next upgrade
    local_host = (_local(ctx, loc, state_dir, cache) if args.key
                  else _local(ctx, loc, cache))
    cat = load_catalog(getattr(args, "catalog", None), config=ctx.config)
    info = trust.version_entry(cat, args.driver, args.version)
    recipe = load_recipe(args.driver, ctx.config.drivers_dir)
    facts = trust.inspect_package(local_host, Path(args.file), recipe)
    trust.check_match(facts, args.driver, args.version,
                      recipe.srpm_name if facts.kind == "srpm" else recipe.driver)
    trust.check_published(args.sha256, args.size, facts)
    pinned = info["source"].get("signing_key")
    pinned_in = cat.provenance.of(("drivers", args.driver, "versions", args.version, "source",
                                   "signing_key")) if pinned else None
    with keyfile.Workspace(local_host, state_dir) if args.key else nullcontext() as work:
        key = keyfile.load_key(local_host, args.key, work) if work else None
        trust.check_signing(local_host, facts, f"{args.driver} {args.version}", pinned=pinned,
                            pinned_in=str(pinned_in) if pinned_in else None,
                            require=args.require_signature, state_dir=state_dir,
                            verify=key is None)
        if key is not None and work is not None:  # a key is only loaded into a workspace
            keyfile.check_package_key(local_host, facts.path, facts.signing_key, key, work)
        return _record(args, ctx, loc, local_host, facts, info["source"], key, work)


def _record(args: argparse.Namespace, ctx: Context, loc: CatalogLocations, local_host: Host,
            facts: PackageFacts, source: Source, key: VendorKey | None,
            work: Workspace | None) -> Outcome:
    """Show, ask, then import the key (if any) and record last: a rerun completes a crash."""
    ring = str(local_host.path(keyring_path(ctx.config.state_dir)))
    layer = trust.site_layer(args.driver, args.version, facts, source)
    site_file = str(loc.site_dir / trust.TRUST_FILE)
    data: dict[str, object] = {"package": facts.as_dict(), "layer": layer,
                               "site_file": site_file, "recorded": False}
    key_dict = key.as_dict() if key is not None else None
    if key is not None:
        data.update(key=key_dict, keyring=ring, key_imported=False)
    if not getattr(args, "json", False):
        _show_facts(facts, list(keyfile.key_lines(key, ring)) if key else [])
    what = f"trust {facts.path.name} as {args.driver} {args.version} "
    if key is not None and not key.in_keyring:
        what += f"(import key {key.key_id} into {ring}, record it in {site_file})"
    else:
        what += f"(record it in {site_file})"
    confirm(args, what)
    imported = False
    signer = facts.signing_key
    if key is not None and key_dict is not None and work is not None and signer is not None:
        # (a key comes with its workspace; check_package_key refused an unsigned package)
        imported = data["key_imported"] = keyfile.install_key(local_host, key, work)
        key_dict["in_keyring"] = True
        verify_in_keyring(local_host, facts.path, ctx.config.state_dir, signer)
    cached = data["cached"] = str(trust.keep_in_cache(local_host, ctx.config.cache_dir, facts,
                                                      source))
    target = str(loc.site_dir / trust.TRUST_FILE)
    before = local_host.read_bytes(target, limit=MAX_FILE_BYTES + 1)  # kept whole for the undo
    trust.record(local_host, loc.site_dir, layer)
    try:
        load_catalog(None, config=ctx.config)  # the merged result must still be valid
    except HwmgrError:
        if before is None:
            local_host.remove(target)
        else:
            local_host.write_bytes(target, before)
        raise
    data["recorded"] = True
    signed = f", signing key {facts.signing_key}" if facts.signing_key else ""
    keyed = ("" if key is None else
             f"imported key {key.key_id} into {ring}; " if imported else
             f"key {key.key_id} already in {ring}, not imported again; ")
    return Outcome(NAME, data=data, render=lambda c: c.print(
        printable(keyed) + f"recorded {args.driver} {args.version}: sha256 {facts.sha256}, "
        f"{facts.size} bytes{signed} in {printable(site_file)}; kept in the cache "
        f"as {printable(cached)}", markup=False,
        soft_wrap=True))


def _show_facts(facts: PackageFacts, key_lines: list[str]) -> None:
    """What rpm (and gpg, for --key) says, before the question (stderr: stdout keeps the
    result)."""
    pkg = "-".join(x for x in (facts.name, facts.version, facts.release) if x)
    sums = ([f"manifest:   sha512 of {facts.manifest} files match"] if facts.manifest else [])
    lines = [f"package:    {pkg} ({facts.path.name}{', vendor tarball' * (facts.kind != 'srpm')})",
             f"vendor:     {facts.vendor or '(none)'}",
             f"build host: {facts.build_host or '(none)'}",
             f"signed by:  {facts.signing_key or '(unsigned)'}",
             f"sha256:     {facts.sha256}",
             f"size:       {facts.size} bytes",
             "payload:    " + ", ".join(facts.files), *sums, *key_lines]
    sys.stderr.write("".join(printable(line) + "\n" for line in lines))
    sys.stderr.flush()
