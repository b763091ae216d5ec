"""Local emulators for tests and development: launchers for the official GCP emulators and
Azurite, and cronwarden's own Service Bus emulator. Nothing here is imported by the core."""
