"""``python -m cronwarden.emulators.servicebus`` — same as ``cronwarden emulators servicebus``."""

from .cli import main

main()
