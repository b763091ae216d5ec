"""Layer 3, ``run``: the run protocol, from a delivery's claim to its finish.

The engine (:mod:`.engine`) claims a run key (:mod:`.claiming`) under a lease with an owner token
and a fence (:mod:`.lease`), hands the handler its context (:mod:`.context`) with the per-item
ledger (:mod:`.ledger`) and its quarantine (:mod:`.quarantine`), and finishes the run in one
fenced commit that also writes the job's status, duration baselines (:mod:`.baseline`) and the
dependency outbox (:mod:`.dependencies`). Window accounting (:mod:`.accounting`) and backfill
(:mod:`.backfill`) say which windows are due and in which state.

May import: :mod:`cronwarden.jobs`, :mod:`cronwarden.model` and its own modules. Whatever it
must tell a higher layer (a dependent's run to publish) it is handed as a port.
"""
