"""Signed catalog updates with real gpg/gpgv over a real HTTP server on 127.0.0.1, and
`catalog trust` on real SRPMs: what is accepted, and each refusal with its reason and code,
the installed catalog untouched (byte-compared)."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import pytest
from support import run_cli
from support.lifecycle_env import serve
from support.shipped import driver_file, shipped_doc
from support.srpmfactory import build_be2net_srpm, build_srpm

# gpg signs and checks a catalog in every test (1-3 s each): make test runs them
pytestmark = pytest.mark.slow


def gpg(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["gpg", "--homedir", str(home), "--batch", "--yes",
                           "--pinentry-mode", "loopback", "--passphrase", "", *args],
                          capture_output=True, text=True, check=True, timeout=120)


def new_key(home: Path, uid: str) -> str:
    """A fresh ed25519 signing key in `home`; returns its fingerprint."""
    home.mkdir(mode=0o700)
    gpg(home, "--quick-gen-key", uid, "ed25519", "sign", "never")
    out = gpg(home, "--with-colons", "--list-keys").stdout
    return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr"))


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    tmp = tmp_path_factory.mktemp("gpg")
    good = new_key(tmp / "good", "hwmgr catalog <catalog@example.org>")
    bad = new_key(tmp / "bad", "someone else <else@example.org>")
    trusted = tmp / "trusted.gpg.d"
    trusted.mkdir()
    (trusted / "site.asc").write_text(gpg(tmp / "good", "--armor", "--export", good).stdout)
    yield {"good": (tmp / "good", good), "bad": (tmp / "bad", bad), "trusted": trusted}
    for home in (tmp / "good", tmp / "bad"):  # the gpg-agents the key homes started
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False,
                       capture_output=True)


def catalog_doc(version: str, description: str = "test") -> bytes:
    doc = shipped_doc()
    doc["catalog_version"] = version
    doc["description"] = description
    return (json.dumps(doc, indent=1) + "\n").encode()


def publish(served: Path, name: str, data: bytes, key: tuple[Path, str] | None) -> None:
    (served / name).write_bytes(data)
    if key is not None:
        home, fpr = key
        gpg(home, "--local-user", fpr, "--armor", "--detach-sign", "-o",
            str(served / f"{name}.asc"), str(served / name))


@pytest.fixture
def site(tmp_path: Path, keys: dict) -> tuple[dict[str, str], Path, str]:
    served = tmp_path / "served"
    served.mkdir()
    srv, url = serve(served)
    env = {"HWMGR_STATE_DIR": str(tmp_path / "state"), "HWMGR_TRUSTED_KEYS_DIR":
           str(keys["trusted"]), "HWMGR_SITE_CATALOG_DIR": str(tmp_path / "catalog.d"),
           "HWMGR_CATALOG_DIR": ""}
    yield env, served, url
    srv.shutdown()


def installed(env: dict[str, str]) -> Path:
    return Path(env["HWMGR_STATE_DIR"]) / "catalog" / "current.json"


def test_signed_update_accepted_then_rollback(site: tuple, keys: dict) -> None:
    env, served, url = site
    publish(served, "c.json", catalog_doc("2026.12.0"), keys["good"])
    res = run_cli("catalog", "update", f"{url}/c.json", env=env)
    assert res.returncode == 0, res.stderr
    base = shipped_doc()["catalog_version"]
    assert f"installed catalog 2026.12.0 (was {base})" in res.stdout
    assert keys["good"][1] in res.stdout
    assert installed(env).read_bytes() == (served / "c.json").read_bytes()
    # piped: one line per step, as fetch and mirror sync print them (a bar on a terminal)
    size, sig = ((served / n).stat().st_size for n in ("c.json", "c.json.asc"))
    steps = [ln.split("] ", 1)[1] for ln in res.stderr.splitlines()]
    assert [ln.split(":")[0] if ln.startswith(("downloaded", "step")) else ln
            for ln in steps] == [
        f"downloading c.json ({size} bytes)", "downloaded c.json",
        f"downloading c.json.asc ({sig} bytes)", "downloaded c.json.asc",
        "step verify", "step validate", "step install"], res.stderr
    assert steps[-1] == f"step install: catalog 2026.12.0 as {installed(env)}"
    assert "\x1b" not in res.stderr
    show = run_cli("catalog", "show", "be2net", "--json", env=env)
    assert json.loads(show.stdout)["data"]["catalog_version"] == "2026.12.0"
    publish(served, "d.json", catalog_doc("2026.12.1"), keys["good"])
    assert run_cli("catalog", "update", f"{url}/d.json", env=env).returncode == 0
    back = run_cli("catalog", "rollback", env=env)
    assert back.returncode == 0, back.stderr
    assert installed(env).read_bytes() == (served / "c.json").read_bytes()


@pytest.mark.parametrize("case", ["tampered", "wrong-key", "no-signature", "older",
                                  "same-version-changed", "invalid", "truncated"])
def test_update_refusals_change_nothing(case: str, site: tuple, keys: dict) -> None:
    env, served, url = site
    publish(served, "base.json", catalog_doc("2026.12.0"), keys["good"])
    assert run_cli("catalog", "update", f"{url}/base.json", env=env).returncode == 0
    before = installed(env).read_bytes()
    name, target = "new.json", f"{url}/new.json"
    if case == "tampered":
        publish(served, name, catalog_doc("2026.12.5"), keys["good"])
        (served / name).write_bytes(catalog_doc("2026.12.5", "tampered after signing"))
    elif case == "wrong-key":
        publish(served, name, catalog_doc("2026.12.5"), keys["bad"])
    elif case == "no-signature":
        publish(served, name, catalog_doc("2026.12.5"), None)
    elif case == "older":
        publish(served, name, catalog_doc("2026.11.3"), keys["good"])
    elif case == "same-version-changed":
        publish(served, name, catalog_doc("2026.12.0", "changed"), keys["good"])
    elif case == "invalid":
        doc = json.loads(catalog_doc("2026.12.5"))
        doc["drivers"]["be2net"]["versions"]["4.1.307r"]["status"] = "bogus"
        publish(served, name, json.dumps(doc).encode(), keys["good"])
    else:
        target = truncating_server(catalog_doc("2026.12.5"))
    res = run_cli("catalog", "update", target, env=env)
    expected = {"tampered": (9, "bad signature: the catalog does not match its signature"),
                "wrong-key": (9, "which is not in hwmgr's trusted keys"),
                "no-signature": (9, "no signature at"),
                "older": (9, "catalog_version 2026.11.3 is older than the installed 2026.12.0"),
                "same-version-changed": (9, "is the installed one but the content differs"),
                "invalid": (8, "downloaded catalog is invalid"),
                "truncated": (9, "truncated download")}[case]
    # one error line, after the progress lines of the steps that ran (piped: "hwmgr: [..s]")
    errors = [ln for ln in res.stderr.splitlines() if not ln.startswith("hwmgr: [")]
    assert (res.returncode, len(errors)) == (expected[0], 1), res.stderr
    assert res.stderr.splitlines()[-1] == errors[0]
    assert expected[1] in errors[0] and "nothing installed" in errors[0]
    assert "Traceback" not in res.stderr
    assert installed(env).read_bytes() == before
    if case == "older":  # the floor can be lowered on purpose
        res = run_cli("catalog", "update", target, "--allow-older", env=env)
        assert res.returncode == 0, res.stderr


def truncating_server(body: bytes) -> str:
    """A server announcing the full length but closing after half the body."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/c.json"


def test_sign_then_update(site: tuple, keys: dict, tmp_path: Path) -> None:
    env, served, url = site
    home, fpr = keys["good"]
    (served / "own.json").write_bytes(catalog_doc("2027.1.0"))
    res = run_cli("catalog", "sign", str(served / "own.json"), "--key", fpr,
                  env={**env, "GNUPGHOME": str(home)})
    assert res.returncode == 0, res.stderr
    assert (served / "own.json.asc").read_text().startswith("-----BEGIN PGP SIGNATURE")
    assert run_cli("catalog", "update", f"{url}/own.json", env=env).returncode == 0


# ------------------------------------------------------------------------------ trust
def test_trust_records_and_refuses(tmp_path: Path) -> None:
    site_dir = tmp_path / "catalog.d"
    env = {"HWMGR_SITE_CATALOG_DIR": str(site_dir), "HWMGR_STATE_DIR": str(tmp_path / "st"),
           "HWMGR_CATALOG_DIR": ""}
    good = build_be2net_srpm(tmp_path / "pkgs")
    wrong_version = build_srpm("be2net", "10.2.470.15", tmp_path / "pkgs")
    wrong_name = build_srpm("benet", "10.2.470.14", tmp_path / "pkgs")
    corrupt = tmp_path / "pkgs" / "corrupt" / good.name
    corrupt.parent.mkdir()
    raw = bytearray(good.read_bytes())
    raw[-200] ^= 0xFF
    corrupt.write_bytes(bytes(raw))
    cases = [(wrong_version, "package version is '10.2.470.15', not the catalog's be2net"),
             (wrong_name, "package name is 'benet', but the be2net recipe expects 'be2net'"),
             (corrupt, "digest check failed")]
    for pkg, why in cases:
        res = run_cli("catalog", "trust", "be2net", "10.2.470.14", "--file", str(pkg), "--yes",
                      env=env)
        assert res.returncode == 9 and why in res.stderr, res.stderr
        assert not site_dir.exists()
    res = run_cli("catalog", "trust", "be2net", "10.2.470.14", "--file", str(good),
                  "--sha256", "0" * 64, "--yes", env=env)
    assert res.returncode == 9 and "published checksum" in res.stderr
    res = run_cli("catalog", "trust", "be2net", "10.2.470.14", "--file", str(good), env=env)
    assert res.returncode == 2 and "add --yes" in res.stderr  # no TTY, no --yes: nothing
    assert "payload:    be2net-10.2.470.14.tar.gz, be2net.spec" in res.stderr
    assert not site_dir.exists()
    res = run_cli("catalog", "trust", "be2net", "10.2.470.14", "--file", str(good), "--yes",
                  env=env)
    assert res.returncode == 0, res.stderr
    layer = json.loads((site_dir / "50-trusted.json").read_text())
    src = layer["drivers"]["be2net"]["versions"]["10.2.470.14"]["source"]
    assert src["size"] == good.stat().st_size and src["verified"] is True
    eff = run_cli("catalog", "show", "be2net", "--effective", "--json", env=env)
    rows = {r["path"]: r for r in json.loads(eff.stdout)["data"]["effective"]}
    sha = rows["$.drivers.be2net.versions['10.2.470.14'].source.sha256"]
    assert sha["value"] == src["sha256"] and sha["file"] == str(site_dir / "50-trusted.json")
    url = rows["$.drivers.be2net.versions['10.2.470.14'].source.url"]
    assert url["file"] == str(driver_file("be2net"))


# a trusted-keys entry that is no regular file (issue 41 §5a): gpg opened a FIFO and blocked
NOT_FILES = {
    "fifo.gpg": lambda p: __import__("os").mkfifo(p),
    "fifo.asc": lambda p: __import__("os").mkfifo(p),
    "null.gpg": lambda p: p.symlink_to("/dev/null"),
    "zero.asc": lambda p: p.symlink_to("/dev/zero"),
    "dir.gpg": lambda p: p.mkdir(),
}


@pytest.mark.parametrize("name", sorted(NOT_FILES))
def test_a_key_that_is_no_regular_file_is_refused_without_blocking(
        name: str, site: tuple, keys: dict, tmp_path: Path) -> None:
    import shutil

    env, served, url = site
    trusted = tmp_path / "trusted"
    shutil.copytree(keys["trusted"], trusted)
    NOT_FILES[name](trusted / name)
    publish(served, "c.json", catalog_doc("2026.12.0"), keys["good"])
    res = run_cli("catalog", "update", f"{url}/c.json",
                  env={**env, "HWMGR_TRUSTED_KEYS_DIR": str(trusted)}, timeout=60)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("hwmgr catalog: ")]
    assert res.returncode == 8, res.stderr
    assert len(lines) == 1 and name in lines[0] and "not a key file" in lines[0], lines
    assert "Traceback" not in res.stderr
    assert not installed(env).exists()
