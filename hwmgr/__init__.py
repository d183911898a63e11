"""hwmgr: vendor-aware hardware inventory and driver lifecycle manager."""

__version__ = "0.2.0"
