"""Tests for hwmgr.lifecycle.builds.recipe and the drivers/ folder: loading, validation,
conformance."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hwmgr.config import config_from
from hwmgr.errors import BadInputError, NotFoundError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.lifecycle.builds.dkms import render_dkms_conf
from hwmgr.lifecycle.builds.recipe import (
    REPO_DRIVERS_DIR,
    check_version,
    load_recipe,
)

README_HEADINGS = ["What it drives", "Source", "Build", "Verify", "Rollback", "Known issues"]


def _valid() -> dict:
    return json.loads((REPO_DRIVERS_DIR / "be2net" / "recipe.json").read_text())


def _write(tmp_path: Path, data: object, driver: str = "be2net", raw: str | None = None) -> Path:
    d = tmp_path / driver
    d.mkdir(parents=True, exist_ok=True)
    (d / "recipe.json").write_text(raw if raw is not None else json.dumps(data))
    (d / "dkms.conf.in").write_text((REPO_DRIVERS_DIR / "be2net" / "dkms.conf.in").read_text())
    return tmp_path


def test_be2net_recipe_fields() -> None:
    r = load_recipe("be2net")
    assert r.driver == "be2net"
    assert r.srpm_name == "be2net"
    assert r.module_names == ["be2net"]
    assert r.tarball_glob("10.2.470.14") == "be2net-10.2.470.14.tar.gz"
    assert r.source_subdir("10.2.470.14") == "be2net-10.2.470.14"
    assert r.modules[0].built_location == ""
    assert r.modules[0].dest_location == "/updates/dkms"
    assert r.initramfs is False
    assert r.supports_kernel("2.6.32-279.el6.x86_64")
    assert r.directory == REPO_DRIVERS_DIR / "be2net"


def test_search_order_drivers_dir_then_shipped(tmp_path: Path) -> None:
    data = _valid()
    data["description"] = "from the site's dir"
    _write(tmp_path, data)
    drivers_dir = config_from(None, {"HWMGR_DRIVERS_DIR": str(tmp_path)}).drivers_dir
    assert load_recipe("be2net", drivers_dir).description == "from the site's dir"
    assert load_recipe("be2net").directory == REPO_DRIVERS_DIR / "be2net"
    # a driver only the shipped dirs have is still found after the site's dir
    assert load_recipe("hwmgrtest", drivers_dir).directory == REPO_DRIVERS_DIR / "hwmgrtest"


def test_unknown_and_bad_driver_names(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no build recipe for driver 'nosuchdrv'"):
        load_recipe("nosuchdrv", drivers_dir=tmp_path)
    for bad in ("../etc", "be2net/..", "", "A B"):
        with pytest.raises(BadInputError, match="driver name"):
            load_recipe(bad)


def _set(data: dict, path: str, value: object) -> None:
    *parents, leaf = path.split(".")
    cur = data
    for p in parents:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    if value is _DELETE:
        del cur[leaf]
    elif isinstance(cur, list):
        cur[int(leaf)] = value
    else:
        cur[leaf] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("format", "other", "field 'format'"),
        ("version", 2, "unsupported recipe version"),
        ("driver", "ixgbe", "does not match its folder"),
        ("surprise", 1, "unknown key(s) surprise"),
        ("source.type", "git", "unsupported source type"),
        ("source.tarball", _DELETE, "field 'source.tarball': is required"),
        ("source.tarball", "sub/be2net-{version}.tar.gz", "not a path"),
        ("source.tarball", "be2net-{release}.tar.gz", "only the {version} placeholder"),
        ("source.subdir", "../be2net-{version}", "without '..'"),
        ("source.subdir", "/abs", "must be relative"),
        ("build.make", "make `id`", "field 'build.make'"),
        ("build.make", "make $(id)", "no quotes, backticks"),
        ("build.make", "make; reboot", "field 'build.make'"),
        ("build.make", 'make "x"', "field 'build.make'"),
        ("build.clean", "make\nclean", "field 'build.clean'"),
        ("modules", [], "non-empty list"),
        ("modules.0.name", "be2net.ko", "field 'modules[0].name'"),
        ("modules.0.dest_location", "/tmp", "under /kernel, /updates or /extra"),
        ("modules.0.dest_location", "/updates/../../etc", "under /kernel, /updates or /extra"),
        ("modules.0.extra", 1, "field 'modules[0]': unknown key(s) extra"),
        ("kernels.include", "6.1.*", "kernel release globs"),
        ("kernels.include", [], "at least one glob"),
        ("initramfs", "yes", "expected true or false"),
    ],
)
def test_validation_names_the_field(tmp_path: Path, path: str, value: object, message: str) -> None:
    data = copy.deepcopy(_valid())
    _set(data, path, value)
    _write(tmp_path, data)
    with pytest.raises(BadInputError) as exc:
        load_recipe("be2net", drivers_dir=tmp_path)
    text = str(exc.value)
    assert message in text
    assert str(tmp_path / "be2net" / "recipe.json") in text
    assert "\n" not in text


def test_duplicate_modules_and_bad_json(tmp_path: Path) -> None:
    data = _valid()
    data["modules"].append(dict(data["modules"][0]))
    _write(tmp_path, data)
    with pytest.raises(BadInputError, match="module names must be unique"):
        load_recipe("be2net", drivers_dir=tmp_path)
    _write(tmp_path, None, raw="{not json")
    with pytest.raises(BadInputError, match="not valid JSON"):
        load_recipe("be2net", drivers_dir=tmp_path)
    _write(tmp_path, None, raw="[1, 2]")
    with pytest.raises(BadInputError, match="expected an object"):
        load_recipe("be2net", drivers_dir=tmp_path)


def test_kernel_globs(tmp_path: Path) -> None:
    data = _valid()
    data["kernels"] = {"include": ["2.6.32-*.el6.*", "6.1.*"], "exclude": ["6.1.0-1-*"]}
    _write(tmp_path, data)
    r = load_recipe("be2net", drivers_dir=tmp_path)
    assert r.supports_kernel("2.6.32-279.el6.x86_64")
    assert r.supports_kernel("6.1.0-56-amd64")
    assert not r.supports_kernel("6.1.0-1-amd64")
    assert not r.supports_kernel("3.10.0-1160.el7.x86_64")


@pytest.mark.parametrize("bad", ["", "1.0; rm -rf /", "../1", "1 0", "-1", "1.0\n", "x" * 65, 3])
def test_check_version_rejects(bad: object) -> None:
    with pytest.raises(BadInputError, match="driver version"):
        check_version(bad)
    r = load_recipe("be2net")
    if isinstance(bad, str):
        with pytest.raises(BadInputError):
            r.tarball_glob(bad)


def test_render_dkms_conf_is_valid_bash(tmp_path: Path) -> None:
    r = load_recipe("be2net")
    text = render_dkms_conf(r, "10.2.470.14")
    assert "@" not in text.replace("#", "")
    conf = tmp_path / "dkms.conf"
    conf.write_text(text)
    script = (
        f'kernelver=6.1.0-56-amd64; kernel_source_dir=/k; dkms_tree=/d; source "{conf}"; '
        'echo "$PACKAGE_NAME|$PACKAGE_VERSION|${BUILT_MODULE_NAME[0]}|'
        '${DEST_MODULE_LOCATION[0]}|${MAKE[0]}|$AUTOINSTALL"'
    )
    res = SubprocessRunner().run(["bash", "-c", script])
    assert res.ok, res.describe()
    assert res.stdout.strip() == (
        "be2net|10.2.470.14|be2net|/updates/dkms|"
        "make -C /k M=/d/be2net/10.2.470.14/build modules|yes"
    )


def test_render_dkms_conf_template_errors(tmp_path: Path) -> None:
    _write(tmp_path, _valid())
    tpl = tmp_path / "be2net" / "dkms.conf.in"
    tpl.write_text('PACKAGE_NAME="@PACKAGE_NAME@"\nPACKAGE_VERSION="@PACKAGE_VERSION@"\n'
                   'MAKE[0]="@MAKE@"\nX="@NOPE@"\n')
    r = load_recipe("be2net", drivers_dir=tmp_path)
    with pytest.raises(BadInputError, match="unknown placeholder.*@NOPE@"):
        render_dkms_conf(r, "1.0")
    tpl.write_text('PACKAGE_NAME="@PACKAGE_NAME@"\n')
    with pytest.raises(BadInputError, match="missing placeholder @PACKAGE_VERSION@"):
        render_dkms_conf(r, "1.0")
    tpl.unlink()
    with pytest.raises(NotFoundError, match="cannot read DKMS template"):
        render_dkms_conf(r, "1.0")
    with pytest.raises(BadInputError, match="driver version"):
        render_dkms_conf(load_recipe("be2net"), '1"; reboot; "')


def test_every_driver_folder_conforms() -> None:
    """Conformance walk (as sos does for plugins): every recipe loads, renders and is documented."""
    drivers = sorted(d.name for d in REPO_DRIVERS_DIR.iterdir() if (d / "recipe.json").is_file())
    assert {"be2net", "hwmgrtest"} <= set(drivers)
    index = (REPO_DRIVERS_DIR / "README.md").read_text()
    for heading in README_HEADINGS:
        assert heading in index
    for drv in drivers:
        r = load_recipe(drv, drivers_dir=REPO_DRIVERS_DIR)
        conf = render_dkms_conf(r, "1.0")
        assert f'PACKAGE_NAME="{drv}"' in conf
        for i, m in enumerate(r.modules):
            assert f'BUILT_MODULE_NAME[{i}]="{m.name}"' in conf
        readme = REPO_DRIVERS_DIR / drv / "README.md"
        assert readme.is_file(), f"{readme} missing"
        found = [
            line[3:].strip()
            for line in readme.read_text().splitlines()
            if line.startswith("## ")
        ]
        assert found == README_HEADINGS, f"{readme}: headings {found}"
