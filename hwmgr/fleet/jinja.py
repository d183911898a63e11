"""The one door to Jinja2, which only the HTML pages need (`fleet-report`, `rollout report`):
on a host without it those verbs fail in one line naming the package, not with a traceback,
and the other verbs never import it (the EL8 RPM does not require it: docs/install.md)."""

from __future__ import annotations

from types import ModuleType

from hwmgr.errors import NotFoundError

MISSING = ("writing the HTML page needs the Python module jinja2 (2.11 or later), which is not "
           "installed here: install python3-jinja2 (dnf or apt) or `pip install jinja2`, or "
           "run this on the Ansible control node (ansible-core brings it)")


def jinja2() -> ModuleType:
    """The jinja2 module, or NotFoundError (exit 3) saying how to get it."""
    try:
        import jinja2 as module  # the pages only: see the module docstring
    except ImportError as exc:
        raise NotFoundError(MISSING) from exc
    return module


def markup(text: str) -> object:
    """`text` marked as markup the template must not escape (the page's own CSS, script and
    escaped JSON); MarkupSafe comes with every Jinja2."""
    jinja2()
    from markupsafe import Markup  # installed with jinja2, checked just above
    return Markup(text)
