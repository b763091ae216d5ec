"""Azure Functions app, rendered by `cronwarden deploy render`.

Timer triggers read each job's schedule from the app setting
CRONWARDEN_SCHEDULE_<JOB_NAME_UPPER_UNDERSCORED> (NCRONTAB, UTC); the worker is
triggered by the Service Bus queue CRONWARDEN_SERVICEBUS_QUEUE through the
identity-based connection ServiceBusConnection__fullyQualifiedNamespace.
"""

from cronwarden.adapters.azure.functions import build_app

import quarter_hourly as jobs_module

app = build_app(jobs_module)
