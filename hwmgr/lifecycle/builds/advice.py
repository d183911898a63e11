"""Where the user's path is written down: the docs the lifecycle errors point to.

A user who meets "not in the catalog" or "no build recipe" needs the page that says how to add
a version or write a recipe; every such error names it through these texts (one owner).
"""

from __future__ import annotations

from typing import Iterable

CATALOG_DOC = "docs/catalog.md, \"Adding a driver version to your catalog\""
RECIPE_DOC = "docs/recipes.md"


def not_in_catalog(driver: str, version: str, listed: Iterable[str]) -> str:
    """The one-line error for a version the catalog does not list, naming the doc."""
    names = ", ".join(sorted(listed)) or "none"
    return (f"{driver} {version} is not in the catalog (listed: {names}); add it in a site "
            f"catalog file: see {CATALOG_DOC}")


def no_recipe(driver: str, searched: Iterable[str]) -> str:
    """The one-line error for a driver without a build recipe, naming the doc."""
    return (f"no build recipe for driver '{driver}' (looked in {', '.join(searched)}); "
            f"to write one see {RECIPE_DOC}")
