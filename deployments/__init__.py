"""Deployments: render Terraform root modules and function packages for GCP and Azure from the
job definitions (:mod:`cronwarden.deploy.render`), and check them offline
(:mod:`cronwarden.deploy.check`).

Only the CLI imports this package (``cronwarden deploy ...``); ``import cronwarden`` never does.
"""
