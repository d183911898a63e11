"""The kernel gate fails closed on a site config it cannot read (issue 41 §7): it used to
exit 8 before holding anything, and the hooks (which always exit 0) then let the new kernel
boot as the default. Now it builds nothing, holds the boot default on the running kernel and
says why (exit 12), for every kind of bad config; a good config still gates as before."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from test_kernel_gate import NEW, STATE, fixture_root, manage, needs_editenv

from hwmgr.commands import kernel_gate
from hwmgr.config import config_from
from hwmgr.host.seam import Host
from hwmgr.lifecycle.gate import bootloader, gaterecord
from hwmgr.output import Outcome
from hwmgr.transaction.state import StateDir
from hwmgr.ui.context import Context

BAD_CONFIGS = {
    "not-json": b"{bad",
    "a-list": b"[1]",
    "deep": b"[" * 5000,
    "huge-int": b'{"build_timeout_seconds": ' + b"9" * 5000 + b"}",
    "wrong-type": b'{"build_timeout_seconds": "x"}',
    "unknown-key": b'{"no_such_key": 1}',
    "not-utf8": b'{"state_dir": "\xff"}',
    "a-directory": None,
}


def _gate(host: Host, env_config: Path, monkeypatch: pytest.MonkeyPatch,
          allow_unready: bool = False) -> Outcome:
    monkeypatch.setenv("HWMGR_CONFIG", str(env_config))
    args = argparse.Namespace(kernel=NEW, wait=None, allow_unready=allow_unready)
    ctx = Context.of(args, host=host, config=config_from(argparse.Namespace(state_dir=STATE)))
    return kernel_gate.run(args, ctx)


@needs_editenv
@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_a_bad_site_config_holds_the_boot_default(name: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    host = fixture_root(tmp_path, "grub")
    manage(host)
    config = tmp_path / "hwmgr.json"
    raw = BAD_CONFIGS[name]
    config.mkdir() if raw is None else config.write_bytes(raw)
    out = _gate(host, config, monkeypatch)
    assert out.exit_code == 12, out.errors
    (err,) = out.errors
    assert "site config" in err and "boot default held on" in err and "\n" not in err
    assert str(config) in err
    data = out.data
    assert data["ready"] is False and data["held"]["backend"] == "grub"
    assert data["site_config_error"] and data["drivers"] == {}
    json.dumps(data)
    hold = gaterecord.read_hold(host, StateDir(host, STATE))
    assert hold is not None and NEW in hold["kernels"]
    assert "GRUB_DEFAULT=saved" in (host.read_text(bootloader.GRUB_DEFAULTS) or "")
    # the record says so (check must not show an earlier run's "ready: yes" under a hold)
    (item,) = gaterecord.check_items(host, STATE, "6.1.0-56-amd64")
    assert item["status"] == "drift" and "site config cannot be read" in item["reason"]


@needs_editenv
def test_allow_unready_with_a_bad_config_warns_and_holds_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = fixture_root(tmp_path, "grub")
    manage(host)
    config = tmp_path / "hwmgr.json"
    config.write_bytes(b"{bad")
    out = _gate(host, config, monkeypatch, allow_unready=True)
    assert out.exit_code == 0
    assert any("site config" in e for e in out.errors)
    assert gaterecord.read_hold(host, StateDir(host, STATE)) is None
