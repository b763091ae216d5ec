"""Deployments: render Terraform root modules and function packages from the job definitions
(:mod:`cronwarden.deploy.render`, a cloud-neutral driver; each cloud's renderer lives with its
adapter and is found through :mod:`cronwarden.deploy.renderers`), and check them offline
(:mod:`cronwarden.deploy.check`). The Terraform modules, schema pins and checkov policies are
this package's data.

Only the CLI imports this package (``cronwarden deploy ...``); ``import cronwarden`` never does.
"""
