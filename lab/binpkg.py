"""Binary driver packages for the lab, built once on the host: the rollout's build-once path.

`hwmgr package DRIVER --version V --binary deb --kernel K` runs here on the host, as on a
site's build host: the lab catalog, the lab's HTTP server as the site mirror, the host's
headers of the guest's kernel (the image is built for the kernel whose headers the host has,
lab/image.py), modules signed with a lab site key made for the run. The guests then install
the .deb with `hwmgr upgrade DRIVER --to V --package FILE`, with no compiler work under TCG:
the storage scenario (megaraid_sas) and the rollout's second guest (a build of e1000e made to
fail its gate). The build runs in a background thread from the lab's start; the first boot
that needs the packages waits for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from lab import raidsrpm, srpms
from lab.image import LabError, log

BROKEN = next(lv.version for lv in srpms.VERSIONS if lv.broken)
# (driver, catalog version): what the guests install from packages
PACKAGES = (("e1000e", BROKEN), ("megaraid_sas", raidsrpm.VERSION))
SIGNER = "hwmgr lab site key"  # the CN of the run's module-signing certificate
BUILD_TIMEOUT = 1200  # seconds per package: a DKMS build on the host, beside the guests


@dataclass(frozen=True)
class Built:
    """What the host built: one .deb per driver version, and the catalog layer naming them."""

    debs: dict[str, Path]  # catalog version -> the .deb
    layers: list[Path]  # catalog layer fragments with the packages' sha256 (for catalog.d)
    seconds: float


class Builder:
    """Builds PACKAGES in a background thread; `result()` waits for it (or raises its error)."""

    def __init__(self, run_dir: Path, catalog: Path, mirror: str, kver: str) -> None:
        self.dir = run_dir / "binpkg"
        self.catalog, self.mirror, self.kver = catalog, mirror, kver
        self._built: Built | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lab-binpkg", daemon=True)

    def start(self) -> Builder:
        self._thread.start()
        return self

    def result(self, timeout: float = 2 * BUILD_TIMEOUT) -> Built:
        self._thread.join(timeout)
        if self._built is not None:
            return self._built
        raise LabError(f"the lab's binary packages were not built: {self._error or 'timeout'}")

    def _run(self) -> None:
        try:
            self._built = self._build()
        except BaseException as exc:  # noqa: BLE001 - handed to result()
            self._error = exc

    def _key(self) -> tuple[Path, Path]:
        key, cert = self.dir / "site.key", self.dir / "site.der"
        _run(["openssl", "req", "-new", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
              "-subj", f"/CN={SIGNER}", "-keyout", str(key), "-outform", "DER", "-out",
              str(cert)], "openssl req (the lab's module-signing key)", 120)
        return key, cert

    def _build(self) -> Built:
        import time

        t0 = time.monotonic()
        out = self.dir / "out"
        out.mkdir(parents=True, exist_ok=True)
        key, cert = self._key()
        config = self.dir / "hwmgr.json"  # the build host's site config: the mirror, as here
        config.write_text(json.dumps({"mirror": self.mirror}) + "\n")
        env = {**os.environ, "HWMGR_CONFIG": str(config),
               "HWMGR_STATE_DIR": str(self.dir / "state"),
               "HWMGR_CACHE_DIR": str(self.dir / "cache"),
               "HWMGR_SIGN_KEY": str(key), "HWMGR_SIGN_CERT": str(cert)}
        debs: dict[str, Path] = {}
        for driver, version in PACKAGES:
            before = set(out.glob("*.deb"))
            _run([sys.executable, "-m", "hwmgr", "package", driver, "--version", version,
                  "--binary", "deb", "--kernel", self.kver, "--out", str(out),
                  "--catalog", str(self.catalog)],
                 f"hwmgr package {driver} {version} --binary deb", BUILD_TIMEOUT, env=env)
            new = sorted(set(out.glob("*.deb")) - before)
            if len(new) != 1:
                raise LabError(f"hwmgr package {driver} {version}: expected one new .deb in "
                               f"{out}, found {[p.name for p in new]}")
            debs[version] = new[0]
        layers = sorted(out.glob("*.json"))
        if not layers:
            raise LabError(f"hwmgr package wrote no catalog layer into {out}")
        took = round(time.monotonic() - t0, 1)
        log(f"binary packages built on the host in {took} s: "
            f"{', '.join(p.name for p in debs.values())}")
        return Built(debs=debs, layers=layers, seconds=took)


def _run(argv: list[str], what: str, timeout: float,
         env: dict[str, str] | None = None) -> None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise LabError(f"{what}: no result after {timeout:.0f} s") from None
    if p.returncode != 0:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-15:])
        raise LabError(f"{what} exited {p.returncode}:\n{tail}")
