"""Layer 4, ``watch``: the watcher and everything it judges and says.

The watcher (:mod:`.watcher`) accounts for every due window of every job and raises what is
missing, failing, stuck, skipping or dead-lettered; its report types (:mod:`.health`), the run
conditions beside them (slow, suspicious, pause and snooze: :mod:`.conditions`), event consumers'
health (:mod:`.consumer_health`), the dead-letter probe (:mod:`.probe`), notifiers
(:mod:`.notify`) and alerting: channels, routing, settings and the watchdog
(:mod:`.alerting`); run metrics (:mod:`.metrics`, :mod:`.metrics_prometheus`).

May import: :mod:`cronwarden.run`, :mod:`cronwarden.jobs`, :mod:`cronwarden.model` and its own
modules.
"""
