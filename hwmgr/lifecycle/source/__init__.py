"""Where a driver's vendor package comes from, and why it is believed: one checked HTTP GET
(`http`), the download cache (`cache`), fetch and internal mirrors (`fetch`, `mirror`), the
package's signature (`signature`) and the vendor keys a site trusts (`keyfile`).

The lowest room of lifecycle/: it imports none of `builds/`, `gate/` or the plan room.
"""
