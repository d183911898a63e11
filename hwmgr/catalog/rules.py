"""The catalog's schema 2 rule data: host sysctl rules, conditional settings, netdev drivers.

Kept apart from loading and matching so the rules `hwmgr check` reads have one owner:
`Catalog` inherits these accessors, and catalog layering (later files override earlier ones)
changes only how `add_rules` merges, never how check asks.
"""

from __future__ import annotations

from hwmgr.catalog.entry import CatalogDoc, ConditionalSetting, SysctlRule


def _norm(name: object) -> str:
    return name.strip().replace("-", "_") if isinstance(name, str) else ""


class RuleData:
    """Rules merged from every loaded file, in load order; accessors answer the last word."""

    def __init__(self) -> None:
        self._sysctl: list[SysctlRule] = []
        self._conditional: list[ConditionalSetting] = []
        self._netdevs: dict[str, str] = {}  # netdev driver name -> entry name

    def add_rules(self, data: CatalogDoc) -> None:
        """Take the merged catalog's sysctl rules, conditional rules and netdev drivers (the
        layers already merged sysctl rules by name and conditional rules by id)."""
        self._sysctl = list(data.get("sysctl", []))
        self._conditional = list(data.get("conditional_settings", []))
        self._netdevs = {}
        for name, drv in data.get("drivers", {}).items():
            self._netdevs.update({_norm(n): name for n in drv.get("netdev_drivers", [])})

    def sysctl_rules(self) -> list[SysctlRule]:
        """Host sysctl rules; a later rule for the same name replaces an earlier one."""
        return list({r["name"]: r for r in self._sysctl}.values())

    def conditional_settings(self) -> list[ConditionalSetting]:
        """Enabled conditional rules; a later rule with the same id replaces an earlier one."""
        return [r for r in {r["id"]: r for r in self._conditional}.values()
                if r.get("enabled", True)]

    def netdev_entry(self, driver: str | None) -> str | None:
        """The entry that governs netdevs of this driver name by `netdev_drivers`, if any."""
        return self._netdevs.get(_norm(driver)) if driver else None

    def has_netdev_entries(self) -> bool:
        """Whether any entry governs netdevs by driver name (spares listing them otherwise)."""
        return bool(self._netdevs)
