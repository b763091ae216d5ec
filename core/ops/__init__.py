"""Layer 6, ``ops``: operator actions that more than one face uses.

``doctor`` (:mod:`.doctor`: is this deployment able to run and alert?), the alert drill
(:mod:`.drill`), actions on one window (:mod:`.windows`: resolve, redrive a dead-lettered window)
and runs started by hand (:mod:`.manual`).

May import: :mod:`cronwarden.hosting` and every layer below it. The faces
(:mod:`cronwarden.cli`, :mod:`cronwarden.dashboard`) use it; it never imports them.
"""
