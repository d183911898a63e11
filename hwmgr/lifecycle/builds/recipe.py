"""Driver build recipes: `drivers/<driver>/recipe.json` says how to turn a vendor source (an
SRPM, or the vendor's own tarball) into DKMS.

A recipe is data, not code: which layout the vendor ships (`source.type`: an SRPM holding a
tarball, or the tarball alone), which tarball holds the sources, which directory inside it is
the module tree, which sums file in it lists the vendor's checksums, the DKMS MAKE/CLEAN
lines, the modules it builds and where they go, which kernels it applies to, and whether the
module is loaded from the initramfs.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from hwmgr import safejson
from hwmgr.config import shipped_dirs
from hwmgr.errors import BadInputError, NotFoundError
from hwmgr.lifecycle.builds.advice import no_recipe
from hwmgr.output import printable

RECIPE_FORMAT = "hwmgr-recipe"
RECIPE_VERSION = 1
RECIPE_FILE = "recipe.json"
DKMS_TEMPLATE = "dkms.conf.in"
REPO_DRIVERS_DIR = Path(__file__).resolve().parents[3] / "drivers"  # the checkout's (tests)

DRIVER_RE = re.compile(r"[a-z0-9_][a-z0-9_.-]{0,63}")
MODULE_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
# versions end up in paths (/usr/src/N-V), argv and dkms.conf (sourced by bash): keep them tame
VERSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}")
KERNEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}")
# a DKMS MAKE/CLEAN line goes inside double quotes in a bash-sourced file
SHELL_LINE_RE = re.compile(r"[A-Za-z0-9 _.,:=/+{}$@%-]{1,400}")
DEST_PREFIXES = ("/kernel", "/updates", "/extra")

_TOP_KEYS = {
    "format", "version", "driver", "description", "source", "build", "modules", "kernels",
    "initramfs",
}
_SOURCE_KEYS = {"type", "srpm_name", "tarball", "subdir", "manifest"}
SOURCE_TYPES = ("srpm", "tarball")  # an SRPM holding the tarball, or the vendor's tarball alone
TARBALL_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz")
_BUILD_KEYS = {"make", "clean"}
_MODULE_KEYS = {"name", "built_location", "dest_location", "dest_name"}
_KERNEL_KEYS = {"include", "exclude"}


@dataclass(frozen=True)
class ModuleSpec:
    """One kernel module a recipe builds (the BUILT_/DEST_MODULE_* lines of dkms.conf)."""

    name: str
    built_location: str = ""
    dest_location: str = "/updates/dkms"
    dest_name: str = ""

    @property
    def installed_name(self) -> str:
        """The module's name once installed (DEST_MODULE_NAME, default its built name)."""
        return self.dest_name or self.name


@dataclass(frozen=True)
class Recipe:
    """A validated `recipe.json` plus the directory it came from."""

    driver: str
    directory: Path
    description: str
    srpm_name: str
    tarball: str
    subdir: str
    make: str
    clean: str
    modules: tuple[ModuleSpec, ...]
    kernels_include: tuple[str, ...] = ("*",)
    kernels_exclude: tuple[str, ...] = ()
    initramfs: bool = False
    source_type: str = "srpm"
    manifest: str = ""  # sha512 sums file in the module tree ('' = none); checked when there

    @property
    def module_names(self) -> list[str]:
        """Installed names of the modules this recipe builds."""
        return [m.installed_name for m in self.modules]

    @property
    def dkms_template(self) -> Path:
        return self.directory / DKMS_TEMPLATE

    def tarball_glob(self, version: str) -> str:
        """The glob naming the source tarball inside the SRPM for `version`."""
        return self.tarball.replace("{version}", check_version(version))

    def tarball_version(self, filename: str) -> str | None:
        """The version a vendor tarball's file name says, read with `source.tarball`; None
        when the name does not have the recipe's form."""
        head, sep, tail = self.tarball.partition("{version}")
        if not sep:
            return None
        pattern = (fnmatch.translate(head)[4:-3] + r"(?P<v>[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}?)"
                   + fnmatch.translate(tail.replace("{version}", "*"))[4:-3])
        found = re.fullmatch(pattern, filename)
        return found.group("v") if found else None

    def source_subdir(self, version: str) -> str:
        """The module tree's directory inside the tarball for `version` ('' = tarball top)."""
        return self.subdir.replace("{version}", check_version(version))

    def supports_kernel(self, kver: str) -> bool:
        """True when `kver` matches an include glob and no exclude glob."""
        return any(fnmatch.fnmatchcase(kver, g) for g in self.kernels_include) and not any(
            fnmatch.fnmatchcase(kver, g) for g in self.kernels_exclude
        )


def check_version(version: object, what: str = "driver version") -> str:
    """Return `version` if it is safe to use in paths, argv and dkms.conf; else BadInputError."""
    if not isinstance(version, str) or not VERSION_RE.fullmatch(version):
        raise BadInputError(
            f"{what} {version!r} is not valid (letters, digits and ._+~- only, at most 64)"
        )
    return version


def check_kernel(kver: object) -> str:
    """Return `kver` if it looks like a kernel release string; else BadInputError."""
    if not isinstance(kver, str) or not KERNEL_RE.fullmatch(kver):
        raise BadInputError(f"kernel release {kver!r} is not valid")
    return kver


def check_name(name: object, what: str = "module name") -> str:
    """Return `name` if it is a valid kernel module / DKMS package name; else BadInputError."""
    if not isinstance(name, str) or not MODULE_RE.fullmatch(name):
        raise BadInputError(f"{what} {name!r} is not valid (letters, digits, _ and - only)")
    return name


def drivers_dirs(drivers_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Where recipes are looked up, in order: `drivers_dir` (the config's: $HWMGR_DRIVERS_DIR)
    first, then the dirs hwmgr ships recipes in (checkout, wheel prefix, system:
    `config.shipped_dirs`; drivers/README.md)."""
    dirs = [Path(drivers_dir)] if drivers_dir else []
    dirs += shipped_dirs("drivers")
    return dirs


def load_recipe(driver: str, drivers_dir: str | os.PathLike[str] | None = None) -> Recipe:
    """Find, read and validate `<drivers dir>/<driver>/recipe.json`."""
    if not isinstance(driver, str) or not DRIVER_RE.fullmatch(driver):
        raise BadInputError(f"driver name {driver!r} is not valid")
    searched = drivers_dirs(drivers_dir)
    for d in searched:
        path = d / driver / RECIPE_FILE
        if path.is_file():
            return parse_recipe(path, driver)
    raise NotFoundError(no_recipe(driver, [str(d) for d in searched]))


def list_recipes(drivers_dir: str | os.PathLike[str] | None = None
                 ) -> list[dict[str, object]]:
    """Every recipe found, in search order; a driver shadowed by an earlier dir is marked."""
    seen: set[str] = set()
    out: list[dict[str, object]] = []
    for d in drivers_dirs(drivers_dir):
        if not d.is_dir():
            continue
        for sub in sorted(d.iterdir()):
            path = sub / RECIPE_FILE
            if not path.is_file():
                continue
            row: dict[str, object] = {"driver": sub.name, "dir": str(d),
                                      "used": sub.name not in seen, "description": "",
                                      "error": None}
            try:
                row["description"] = parse_recipe(path).description
            except BadInputError as exc:
                row["error"] = str(exc)
            seen.add(sub.name)
            out.append(row)
    return out


def parse_recipe(path: Path, driver: str | None = None) -> Recipe:
    """Read and validate one recipe file; `driver` (default: its folder name) must match."""
    driver = driver or path.parent.name
    raw = safejson.load_file(path, str(path))  # regular files; depth, digits bounded
    return _Validator(path).recipe(raw, driver)


class _Validator:
    """Checks a decoded recipe, naming the file and field in every error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, field: str, msg: str) -> BadInputError:
        return BadInputError(printable(f"{self.path}: field '{field}': {msg}"))

    def obj(self, value: object, field: str, keys: set[str],
            required: Iterable[str]) -> dict[str, object]:
        if not isinstance(value, dict):
            raise self.fail(field, "expected an object")
        unknown = sorted(set(value) - keys)
        if unknown:
            raise self.fail(field, f"unknown key(s) {', '.join(unknown)}")
        for key in required:
            if key not in value:
                raise self.fail(f"{field}.{key}".lstrip("."), "is required")
        return value

    def string(self, value: object, field: str, pattern: re.Pattern[str] | None = None) -> str:
        if not isinstance(value, str):
            raise self.fail(field, "expected a string")
        if pattern is not None and not pattern.fullmatch(value):
            raise self.fail(field, f"{value!r} has characters that are not allowed")
        return value

    def rel_pattern(self, value: object, field: str, allow_empty: bool) -> str:
        """A relative file name/glob with an optional {version} placeholder."""
        text = self.string(value, field)
        if not text and allow_empty:
            return text
        probe = text.replace("{version}", "1.0")
        if "{" in probe or "}" in probe:
            raise self.fail(field, f"{text!r}: only the {{version}} placeholder is known")
        if not re.fullmatch(r"[A-Za-z0-9_.*?\[\]+~/-]+", probe):
            raise self.fail(field, f"{text!r} has characters that are not allowed")
        if probe.startswith("/") or ".." in probe.split("/"):
            raise self.fail(field, f"{text!r} must be relative, without '..'")
        return text

    def shell_line(self, value: object, field: str) -> str:
        text = self.string(value, field)
        if not SHELL_LINE_RE.fullmatch(text) or "$(" in text:
            raise self.fail(
                field, "must be a plain command (no quotes, backticks, $(...), ; or newlines)"
            )
        return text

    def globs(self, value: object, field: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(
            isinstance(g, str) and re.fullmatch(r"[A-Za-z0-9_.*?\[\]!+~-]+", g) for g in value
        ):
            raise self.fail(field, "expected a list of kernel release globs")
        return tuple(value)

    def module(self, value: object, field: str) -> ModuleSpec:
        m = self.obj(value, field, _MODULE_KEYS, ["name"])
        name = self.string(m["name"], f"{field}.name", MODULE_RE)
        built = self.rel_pattern(m.get("built_location", ""), f"{field}.built_location", True)
        dest = self.string(m.get("dest_location", "/updates/dkms"), f"{field}.dest_location")
        if (
            not re.fullmatch(r"(/[A-Za-z0-9_.+-]+)+", dest)
            or not dest.startswith(DEST_PREFIXES)
            or ".." in dest.split("/")
        ):
            raise self.fail(
                f"{field}.dest_location",
                f"{dest!r} must be an absolute path under /kernel, /updates or /extra",
            )
        given = m.get("dest_name", "")
        dest_name = self.string(given, f"{field}.dest_name", MODULE_RE) if given else ""
        return ModuleSpec(name, built.strip("/"), dest, dest_name)

    def recipe(self, raw: object, driver: str) -> Recipe:
        top = self.obj(
            raw, "", _TOP_KEYS, ["format", "version", "driver", "source", "build", "modules"]
        )
        if top["format"] != RECIPE_FORMAT:
            raise self.fail("format", f"expected {RECIPE_FORMAT!r}")
        if top["version"] != RECIPE_VERSION:
            raise self.fail("version", f"unsupported recipe version {top['version']!r}")
        name = self.string(top["driver"], "driver", DRIVER_RE)
        if name != driver:
            raise self.fail("driver", f"{name!r} does not match its folder {driver!r}")
        description = self.string(top.get("description", ""), "description")

        src = self.obj(top["source"], "source", _SOURCE_KEYS, ["type", "tarball"])
        source_type = src["type"]
        if not isinstance(source_type, str) or source_type not in SOURCE_TYPES:
            raise self.fail("source.type", f"unsupported source type {source_type!r} "
                                           f"(one of {', '.join(SOURCE_TYPES)})")
        if source_type == "tarball" and "srpm_name" in src:
            raise self.fail("source.srpm_name", "only for source.type 'srpm'")
        srpm_name = self.string(src.get("srpm_name", name), "source.srpm_name", MODULE_RE)
        tarball = self.rel_pattern(src["tarball"], "source.tarball", False)
        if "/" in tarball:
            raise self.fail("source.tarball", "must be a file name, not a path")
        if source_type == "tarball" and (tarball.count("{version}") != 1
                                         or not tarball.endswith(TARBALL_SUFFIXES)):
            raise self.fail("source.tarball", "a vendor tarball's name holds {version} once "
                                              f"and ends with {', '.join(TARBALL_SUFFIXES)}")
        subdir = self.rel_pattern(src.get("subdir", ""), "source.subdir", True).strip("/")
        manifest = self.rel_pattern(src.get("manifest", ""), "source.manifest", True)
        if manifest and ("{version}" in manifest or any(c in manifest for c in "*?[")):
            raise self.fail("source.manifest", "a file name in the module tree, no pattern")

        build = self.obj(top["build"], "build", _BUILD_KEYS, ["make"])
        make = self.shell_line(build["make"], "build.make")
        clean = self.shell_line(build.get("clean", "make clean"), "build.clean")

        mods = top["modules"]
        if not isinstance(mods, list) or not mods:
            raise self.fail("modules", "expected a non-empty list")
        modules = tuple(self.module(m, f"modules[{i}]") for i, m in enumerate(mods))
        dests = [m.installed_name for m in modules]
        if len(set(dests)) != len(dests):
            raise self.fail("modules", "module names must be unique")

        kernels = self.obj(top.get("kernels", {}), "kernels", _KERNEL_KEYS, [])
        include = self.globs(kernels.get("include", ["*"]), "kernels.include")
        exclude = self.globs(kernels.get("exclude", []), "kernels.exclude")
        if not include:
            raise self.fail("kernels.include", "must name at least one glob")

        initramfs = top.get("initramfs", False)
        if not isinstance(initramfs, bool):
            raise self.fail("initramfs", "expected true or false")
        return Recipe(
            driver=name,
            directory=self.path.parent,
            description=description,
            srpm_name=srpm_name,
            tarball=tarball,
            subdir=subdir,
            make=make,
            clean=clean,
            modules=modules,
            kernels_include=include,
            kernels_exclude=exclude,
            initramfs=initramfs,
            source_type=source_type,
            manifest=manifest.strip("/"),
        )
