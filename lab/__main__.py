"""`python -m lab build|info|clean|boot`: build or inspect the lab cache, or boot the guest once.

`boot` starts one throw-away guest with the host servers and runs a step (default: hwmgr
inventory), printing the transcript: the quickest way to poke at the lab by hand.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from lab import image
from lab.image import LabError


def main(argv: list[str] | None = None) -> int:
    """Run one lab subcommand; exit 0 on success, 1 with a one-line error otherwise."""
    p = argparse.ArgumentParser(prog="python -m lab", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the cached guest if missing or stale")
    b.add_argument("--rebuild", action="store_true", help="rebuild even if the cache is fresh")
    sub.add_parser("info", help="show the cached image, its sizes and build timings")
    sub.add_parser("clean", help="delete the lab cache")
    bt = sub.add_parser("boot", help="boot a throw-away guest once and run a step")
    bt.add_argument("step", nargs="?", default="show hwmgr inventory",
                    help="bash run in the guest (lab/guest/lib.sh helpers available)")
    args = p.parse_args(argv)
    try:
        if args.cmd == "build":
            img = image.ensure_image(rebuild=args.rebuild)
            print(json.dumps(image.describe(img), indent=1, default=str))
        elif args.cmd == "info":
            meta = image.cache_dir() / "image.json"
            if not meta.is_file():
                print(f"no lab image in {image.cache_dir()} (python -m lab build)")
                return 1
            img = image.ensure_image()
            print(json.dumps(image.describe(img), indent=1, default=str))
        elif args.cmd == "clean":
            shutil.rmtree(image.cache_dir(), ignore_errors=True)
            print(f"removed {image.cache_dir()}")
        elif args.cmd == "boot":
            from lab.vm import Lab

            run_dir = Path(tempfile.mkdtemp(prefix="hwmgr-lab-"))
            with Lab(run_dir) as lab:
                b = lab.vm("manual").boot(args.step)
                print(b.log.read_text())
    except LabError as exc:
        print(f"lab: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
