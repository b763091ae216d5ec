"""AWS Lambda entry points, rendered by `cronwarden deploy render --provider aws`.

Handlers: handler.trigger (EventBridge Scheduler), handler.worker (SQS event source
mapping, partial batch responses), handler.watcher (its own schedule).
"""

from cronwarden.adapters.aws.functions import make_handlers

import quarter_hourly as jobs_module

trigger, worker, watcher = make_handlers(jobs_module)
