"""A real lifecycle test bed: test-module SRPMs on a local HTTP server, a catalog naming them
with sha256/size, and private state/cache/signing-key dirs. Cleans DKMS up afterwards."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.dkms import Dkms
from hwmgr.lifecycle.builds.headers import kernels_with_headers
from support.srpmfactory import build_srpm

MODULE = "hwmgrtest"


@dataclass
class Bed:
    root: Path
    url: str
    kver: str
    catalog: Path
    env: dict[str, str] = field(default_factory=dict)
    srpms: dict[str, Path] = field(default_factory=dict)
    mok_cn: str = ""  # the module-signing key's subject CN and serial (mok_pair)
    mok_serial: str = ""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(directory))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def write_catalog(path: Path, url: str, srpms: dict[str, Path], **extra: dict) -> Path:
    versions = {}
    for ver, p in srpms.items():
        data = p.read_bytes()
        versions[ver] = {
            "status": "known-good", "reason": "test build", "evidence": "tests/kmod",
            "source": {"type": "srpm", "url": f"{url}/{p.name}", "allow_http": True,
                       "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)},
        }
        versions[ver].update(extra.get(ver, {}))
    doc = {
        "schema_version": 1, "catalog_version": "2026.11.99", "released": "2026-11-21",
        "drivers": {MODULE: {
            "version_scheme": "driver", "description": "hwmgr test module",
            "devices": [{"vendor": "1d0f", "device": "ffff", "name": "no such device"}],
            "versions": versions}},
    }
    path.write_text(json.dumps(doc, indent=1))
    return path


def newest_kernels_first(kernels: list[str]) -> list[str]:
    """Kernel releases by their numbers, newest first (6.1.0-56-amd64 before 5.10.0-32-amd64)."""
    return sorted(kernels, key=lambda k: [int(n) for n in re.findall(r"\d+", k)], reverse=True)


def headers_kernel() -> str | None:
    """The newest kernel with headers: the distribution's own (make test also installs Debian
    11's 5.10 for the vendor igb tests; the other tests keep building for Debian 12's)."""
    ks = newest_kernels_first(kernels_with_headers(Host("/", SubprocessRunner())))
    return ks[0] if ks else None


def cleanup_dkms(kver: str) -> None:
    """Remove every hwmgrtest trace from DKMS, /usr/src and the kernel's module dir."""
    host = Host("/", SubprocessRunner())
    d = Dkms(host)
    for e in d.status(MODULE):
        d.remove(MODULE, e.version, "all", delete_source=True, depmod=False)
    for p in Path("/usr/src").glob(f"{MODULE}-*"):
        shutil.rmtree(p, ignore_errors=True)
    for p in Path(f"/lib/modules/{kver}").rglob(f"{MODULE}.ko*"):
        p.unlink()
    shutil.rmtree(f"/var/lib/dkms/{MODULE}", ignore_errors=True)
    if Path(f"/lib/modules/{kver}/modules.dep").exists():
        host.run(["depmod", "-a", kver])  # forget the files just deleted


def mok_pair(tmp: Path, cn: str) -> tuple[Path, Path, str]:
    """A module-signing key pair made by openssl as a MOK is (RSA, self-signed X.509, DER):
    (key, certificate, the certificate's serial in hex)."""
    key, cert = tmp / "mok.key", tmp / "mok.der"
    subprocess.run(["openssl", "req", "-new", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-days", "2", "-subj", f"/CN={cn}", "-keyout", str(key), "-outform", "DER",
                    "-out", str(cert)], check=True, capture_output=True, timeout=120)
    serial = subprocess.run(["openssl", "x509", "-inform", "DER", "-in", str(cert), "-noout",
                             "-serial"], check=True, capture_output=True, text=True,
                            timeout=60).stdout.strip().split("=", 1)[1]
    return key, cert, serial


def same_serial(a: str, b: str) -> bool:
    """modinfo's sig_key (AA:BB:...) and openssl's serial (AABB...) name the same number."""
    return int(a.replace(":", ""), 16) == int(b.replace(":", ""), 16)


def make_bed(tmp: Path, versions: tuple[str, ...] = ("1.0", "1.1")) -> tuple[Bed, object]:
    kver = headers_kernel()
    assert kver, "linux-headers-amd64 must be installed (make test installs it)"
    served = tmp / "served"
    served.mkdir()
    srpms = {v: build_srpm(MODULE, v, served) for v in versions}
    srv, url = serve(served)
    bed = Bed(root=tmp, url=url, kver=kver, catalog=tmp / "catalog.json", srpms=srpms)
    write_catalog(bed.catalog, url, srpms)
    keys = tmp / "keys"
    keys.mkdir()
    bed.mok_cn = f"hwmgr test MOK {os.getpid()}"
    key, cert, bed.mok_serial = mok_pair(keys, bed.mok_cn)
    bed.env = {
        "HWMGR_STATE_DIR": str(tmp / "state"), "HWMGR_CACHE_DIR": str(tmp / "cache"),
        "HWMGR_SIGN_KEY": str(key), "HWMGR_SIGN_CERT": str(cert),
        "SSH_CONNECTION": "",
    }
    os.environ.pop("HWMGR_TEST_CRASH_AT", None)
    return bed, srv
