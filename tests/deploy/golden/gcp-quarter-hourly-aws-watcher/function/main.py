"""Cloud Functions (2nd gen) entry points, rendered by `cronwarden deploy render`.

Targets (functions-framework, HTTP):
  trigger  pushed from the schedule topic (one Cloud Scheduler job per cronwarden job)
  worker   pushed from the run-request topic (our own subscription, with a DLQ policy)
  watcher  called by its own Cloud Scheduler job (liveness)
"""

from cronwarden.adapters.gcp.functions import make_functions

import quarter_hourly as jobs_module

trigger, worker, watcher = make_functions(jobs_module)
