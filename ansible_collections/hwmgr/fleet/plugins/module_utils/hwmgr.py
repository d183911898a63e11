# -*- coding: utf-8 -*-
# GNU General Public License v2.0+ (see https://www.gnu.org/licenses/old-licenses/gpl-2.0.txt)
"""Run the hwmgr CLI from a module and read its JSON envelope (shared by the modules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import sys

# BEGIN exit codes: made by scripts/gen-exit-codes from hwmgr/errors.py and the verbs
# (the modules run on managed hosts, maybe without hwmgr importable)
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_NOTHING_TO_DO = 4
EXIT_DRIFT = 5
EXIT_PARTIAL = 6
EXIT_REBOOT_PENDING = 7
EXIT_BAD_INPUT = 8
EXIT_REFUSED = 9
EXIT_LOCKED = 10
EXIT_UNKNOWN = 11
EXIT_NOT_READY = 12
EXIT_PERMISSION = 13
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_NAMES = {
    0: 'ok',
    1: 'failed',
    2: 'usage error',
    3: 'not found',
    4: 'nothing to do',
    5: 'drift',
    6: 'partial',
    7: 'reboot pending',
    8: 'bad input data',
    9: 'refused',
    10: 'locked by another hwmgr',
    11: 'unknown',
    12: 'not ready',
    13: 'permission denied',
    70: 'internal error',
    130: 'interrupted',
}
# verb -> the exit codes its help documents
VERB_EXIT_CODES = {
    'inventory': (0, 2, 3, 8, 70, 130),
    'check': (0, 2, 3, 5, 6, 7, 8, 11, 70, 130),
    'snapshot': (0, 2, 3, 8, 70, 130),
    'catalog': (0, 1, 2, 3, 8, 9, 70, 130),
    'vercmp': (0, 2, 8, 70, 130),
    'plan': (0, 2, 3, 4, 8, 9, 11, 70, 130),
    'fetch': (0, 1, 2, 3, 8, 9, 70, 130),
    'upgrade': (0, 1, 2, 3, 4, 8, 9, 10, 13, 70, 130),
    'rollback': (0, 1, 2, 3, 4, 8, 9, 10, 13, 70, 130),
    'apply': (0, 1, 2, 3, 4, 8, 9, 10, 13, 70, 130),
    'revert': (0, 1, 2, 3, 4, 10, 13, 70, 130),
    'recover': (0, 1, 2, 8, 10, 70, 130),
    'history': (0, 2, 3, 8, 70, 130),
    'verify': (0, 1, 2, 3, 4, 7, 8, 11, 70, 130),
    'throughput': (0, 1, 2, 3, 9, 11, 70, 130),
    'mirror': (0, 1, 2, 3, 8, 9, 70, 130),
    'package': (0, 1, 2, 3, 8, 9, 70, 130),
    'recipe': (0, 1, 2, 3, 8, 9, 13, 70, 130),
    'fleet-report': (0, 2, 5, 6, 7, 8, 11, 70, 130),
    'collect-script': (0, 2, 3, 8, 70, 130),
    'kernel-gate': (0, 1, 2, 3, 8, 9, 10, 12, 13, 70, 130),
    'gate': (0, 1, 2, 3, 8, 9, 70, 130),
    'rollout': (0, 1, 2, 3, 6, 8, 9, 70, 130),
}
# END exit codes
# a check's exit code -> the host status of the fleet-report input format
CHECK_STATUS = {EXIT_OK: "compliant", EXIT_DRIFT: "drift",
                EXIT_REBOOT_PENDING: "reboot-pending", EXIT_UNKNOWN: "unknown"}
MAX_MSG = 400


def one_line(text, limit=MAX_MSG):
    """`text` as one line (control characters and newlines become spaces), shortened."""
    out = "".join(c if c.isprintable() else " " for c in str(text))
    out = " ".join(out.split())
    return out if len(out) <= limit else out[:limit - 3] + "..."


def find_hwmgr(module, executable):
    """The hwmgr executable: an absolute path as given, else a search of PATH and the usual
    sbin/bin dirs; fails the module (one line, no rc) when there is none."""
    if os.path.sep in executable:
        if os.access(executable, os.X_OK) and os.path.isfile(executable):
            return executable
        module.fail_json(msg="hwmgr not found: %s is not an executable file" % executable,
                         rc=None)
    found = module.get_bin_path(executable, required=False,
                                opt_dirs=["/usr/local/sbin", "/usr/local/bin", "/usr/sbin"])
    if not found:
        module.fail_json(msg="hwmgr not found on this host (no '%s' in PATH); install it or "
                             "set the module's executable option" % executable, rc=None)
    return found


# the options every hwmgr module takes: which hwmgr, and the catalog layers it reads
COMMON_ARGUMENT_SPEC = dict(
    catalogs=dict(type="list", elements="path", default=[]),
    catalog_content=dict(type="dict", default={}),
    executable=dict(type="str", default="hwmgr"),
)


def base_argv(module, verb, executable=None):
    """`hwmgr VERB --json` plus one --site-catalog per layer (files, then inline content):
    layers over the host's own catalog (shipped or installed, and its catalog.d), never
    instead of it, so a partial site file is enough and the base's verdicts still apply.
    `executable` is argv[0] as given (an in-process run needs no hwmgr command at all)."""
    p = module.params
    argv = [executable or find_hwmgr(module, p["executable"]), verb, "--json"]
    for path in p["catalogs"] + write_catalogs(module, p["catalog_content"]):
        argv += ["--site-catalog", path]
    return argv


def write_catalogs(module, contents):
    """Inline catalog layers ({name: JSON text}, in order) as private files under the
    module's temporary directory; returns their paths for repeated --site-catalog."""
    if not contents:
        return []
    base = os.path.join(module.tmpdir, "hwmgr-catalogs")
    os.mkdir(base, 0o700)
    paths = []
    for i, (name, text) in enumerate(contents.items()):
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in os.path.basename(name))
        path = os.path.join(base, "%02d-%s" % (i, safe or "catalog.json"))
        with open(path, "w") as fh:
            fh.write(text if isinstance(text, str) else json.dumps(text))
        paths.append(path)
    return paths


def importable_hwmgr():
    """hwmgr's CLI entry point when hwmgr is installed for this module's own Python (the
    RPM or deb puts it there), else None: an older Python, no hwmgr or a broken one."""
    try:
        from hwmgr.cli import main  # pylint: disable=import-outside-toplevel
    except Exception:  # noqa: BLE001 - SyntaxError on an old Python too: use the command
        return None
    return main


def run_in_process(main, argv):
    """`hwmgr ARGV[1:]` run by `main` in this process, its stdout and stderr captured:
    (rc, out, err) as run_command gives them, without a second interpreter's start-up and
    imports. hwmgr's own runner still runs every tool it reads (ethtool, ip) as a command."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        rc = main(list(argv[1:]))
    finally:
        sys.stdout, sys.stderr = saved
    return rc, out.getvalue(), err.getvalue()


def run_hwmgr(module, argv, ok_codes, main=None):
    """Run hwmgr (in this process with `main`, else as the command argv[0]); returns (rc,
    envelope). Any exit not in `ok_codes`, or output that is not one JSON envelope, fails
    the module with a one-line msg and hwmgr's exit code as rc."""
    if main is not None:
        rc, out, err = run_in_process(main, argv)
    else:
        # LC_ALL=C: hwmgr's parsers read tool output in the C locale; no terminal, no colour
        rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C",
                                                                "NO_COLOR": "1"})
    envelope = None
    try:
        envelope = json.loads(out) if out.strip() else None
    except ValueError:
        envelope = None
    verb = argv[1] if len(argv) > 1 else "hwmgr"
    if rc not in ok_codes:
        known = VERB_EXIT_CODES.get(verb, ())
        name = EXIT_NAMES.get(rc, "unexpected exit") if rc in known else (
            "an exit code hwmgr %s does not document" % verb)
        reason = ""
        if isinstance(envelope, dict) and envelope.get("errors"):
            reason = "; ".join(str(e) for e in envelope["errors"])
        if not reason:
            lines = err.strip().splitlines()
            reason = lines[-1] if lines else ""
        module.fail_json(
            msg=one_line("hwmgr %s failed (exit %s, %s)%s" % (
                verb, rc, name,
                ": " + reason if reason else "")),
            rc=rc, cmd=argv, stdout=out[-4000:], stderr=err[-4000:])
    if rc == EXIT_NOTHING_TO_DO and isinstance(envelope, dict) and envelope.get("data") is None:
        envelope["data"] = {}  # nothing to do: hwmgr says so in errors[], with no data
    if not isinstance(envelope, dict) or not isinstance(envelope.get("data"), dict):
        module.fail_json(msg="hwmgr %s (exit %s) printed no JSON envelope with a data object"
                             % (verb, rc), rc=rc, cmd=argv, stdout=out[-4000:],
                         stderr=err[-4000:])
    return rc, envelope
