"""Journaled transactions: the state dir layout, the host lock, the journal, the engine.

Generic: it knows steps with do / undo / check and nothing of drivers or settings, so driver
upgrades and settings changes share one lock and one recovery. May import `hwmgr.host`,
`hwmgr.config` and `hwmgr.errors`.
"""
