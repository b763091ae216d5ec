# Rendered by `cronwarden deploy render --provider gcp` from the job definitions.
# Re-render after changing a job; edit the modules under modules/ only to change the
# shape of the deployment.
locals {
  jobs = {
    "quarter-hourly-sync" = {
      cron                = "*/15 * * * *"
      time_zone           = "UTC"
      ncrontab_utc        = ""
      max_runtime_seconds = 120
      max_attempts        = 8
      min_backoff_seconds = 5
      max_backoff_seconds = 120
      schedule_setting    = "CRONWARDEN_SCHEDULE_QUARTER_HOURLY_SYNC"
    }
  }
  descriptions = {
    "quarter-hourly-sync" = "Pull the latest changes and record how many there were."
  }
  apis = [
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
    "artifactregistry.googleapis.com",
  ]
  package              = "${path.module}/function.zip"
  pubsub_service_agent = "service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  environment = {
    CRONWARDEN_PROVIDER                     = "gcp"
    CRONWARDEN_GCP_PROJECT                  = var.project
    CRONWARDEN_GCP_TOPIC                    = "cronwarden-runs"
    CRONWARDEN_GCP_SUBSCRIPTION             = "cronwarden-worker"
    CRONWARDEN_GCP_DEAD_LETTER_TOPIC        = "cronwarden-runs-dead-letter"
    CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION = "cronwarden-worker-dead-letter"
    CRONWARDEN_GCP_MAX_DELIVERIES           = tostring(module.settings.pubsub.max_delivery_attempts)
    CRONWARDEN_GCP_ACK_DEADLINE             = tostring(module.settings.pubsub.ack_deadline_seconds)
    CRONWARDEN_GCP_CREATE_MISSING           = "false"
    CRONWARDEN_FIRESTORE_DATABASE           = module.state.database
    CRONWARDEN_FIRESTORE_PREFIX             = "cw_"
  }
  trigger_environment = {
    CRONWARDEN_GCP_DEAD_LETTER_TOPIC        = "cronwarden-schedule-dead-letter"
    CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION = "cronwarden-trigger-dead-letter"
  }
}

module "settings" {
  source = "./modules/common/settings"
  jobs   = local.jobs
}

data "google_project" "this" {
  project_id = var.project
}

resource "google_project_service" "apis" {
  for_each           = toset(local.apis)
  project            = var.project
  service            = each.value
  disable_on_destroy = false
}

resource "google_storage_bucket" "source" {
  # checkov:skip=CKV_GCP_62:The bucket holds only the function package; Cloud Audit Logs record access.
  name                        = "${var.project}-cronwarden-source"
  project                     = var.project
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels
  versioning {
    enabled = true
  }
}

resource "google_storage_bucket_object" "source" {
  name   = "function-${filemd5(local.package)}.zip"
  bucket = google_storage_bucket.source.name
  source = local.package
}

# Identity of Pub/Sub pushes (OIDC) and of the watcher's scheduler job.
resource "google_service_account" "push" {
  project      = var.project
  account_id   = "cronwarden-push"
  display_name = "cronwarden Pub/Sub push (OIDC)"
}

resource "google_service_account" "scheduler" {
  project      = var.project
  account_id   = "cronwarden-scheduler"
  display_name = "cronwarden watcher schedule (OIDC)"
}

# The Pub/Sub service agent mints the OIDC tokens of push subscriptions (needed in
# projects created before April 2021, harmless after).
resource "google_service_account_iam_member" "push_token_creator" {
  service_account_id = google_service_account.push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:${local.pubsub_service_agent}"
}

module "trigger" {
  source          = "./modules/gcp/function"
  project         = var.project
  region          = var.region
  name            = "cronwarden-trigger"
  description     = "cronwarden trigger: schedule tick -> run requests"
  entry_point     = "trigger"
  source_bucket   = google_storage_bucket.source.name
  source_object   = google_storage_bucket_object.source.name
  timeout_seconds = 60
  environment     = merge(local.environment, local.trigger_environment)
  invokers = {
    pubsub = google_service_account.push.member
  }
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

module "worker" {
  source          = "./modules/gcp/function"
  project         = var.project
  region          = var.region
  name            = "cronwarden-worker"
  description     = "cronwarden worker: runs one window of a job"
  entry_point     = "worker"
  source_bucket   = google_storage_bucket.source.name
  source_object   = google_storage_bucket_object.source.name
  timeout_seconds = module.settings.function_timeout_seconds
  environment     = local.environment
  invokers = {
    pubsub = google_service_account.push.member
  }
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

module "watcher" {
  source             = "./modules/gcp/function"
  project            = var.project
  region             = var.region
  name               = "cronwarden-watcher"
  description        = "cronwarden liveness watcher"
  entry_point        = "watcher"
  source_bucket      = google_storage_bucket.source.name
  source_object      = google_storage_bucket_object.source.name
  timeout_seconds    = 120
  environment        = local.environment
  secret_environment = { for key, id in { CRONWARDEN_WEBHOOK_URL = var.webhook_secret } : key => { secret = id, version = "latest" } if id != "" }
  invokers = {
    scheduler = google_service_account.scheduler.member
  }
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

module "dead_letter" {
  source               = "./modules/gcp/dead-letter"
  project              = var.project
  topic_name           = "cronwarden-runs-dead-letter"
  subscription_name    = "cronwarden-worker-dead-letter"
  pubsub_service_agent = local.pubsub_service_agent
  publishers = {
    worker = module.worker.service_account_member
  }
  readers = {
    watcher = module.watcher.service_account_member
  }
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

# Dead ticks: the trigger's subscription dead-letters here, and the trigger publishes
# malformed ticks here itself (MalformedTick). Not redriven: a lost tick is recovered
# by catch-up, `cronwarden trigger --window` or `cronwarden backfill` (README.md).
module "tick_dead_letter" {
  source               = "./modules/gcp/dead-letter"
  project              = var.project
  topic_name           = "cronwarden-schedule-dead-letter"
  subscription_name    = "cronwarden-trigger-dead-letter"
  pubsub_service_agent = local.pubsub_service_agent
  publishers = {
    trigger = module.trigger.service_account_member
  }
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

module "schedule" {
  source                     = "./modules/gcp/push"
  project                    = var.project
  topic_name                 = "cronwarden-schedule"
  subscription_name          = "cronwarden-trigger"
  push_endpoint              = module.trigger.uri
  push_service_account_email = google_service_account.push.email
  dead_letter_topic_id       = module.tick_dead_letter.topic_id
  max_delivery_attempts      = 5
  ack_deadline_seconds       = 90
  minimum_backoff            = "10s"
  maximum_backoff            = "60s"
  pubsub_service_agent       = local.pubsub_service_agent
  publishers                 = {}
  labels                     = var.labels
  depends_on                 = [google_project_service.apis]
}

module "runs" {
  source                     = "./modules/gcp/push"
  project                    = var.project
  topic_name                 = "cronwarden-runs"
  subscription_name          = "cronwarden-worker"
  push_endpoint              = module.worker.uri
  push_service_account_email = google_service_account.push.email
  dead_letter_topic_id       = module.dead_letter.topic_id
  max_delivery_attempts      = module.settings.pubsub.max_delivery_attempts
  ack_deadline_seconds       = module.settings.pubsub.ack_deadline_seconds
  minimum_backoff            = module.settings.pubsub.minimum_backoff
  maximum_backoff            = module.settings.pubsub.maximum_backoff
  pubsub_service_agent       = local.pubsub_service_agent
  publishers = {
    trigger = module.trigger.service_account_member
    worker  = module.worker.service_account_member
  }
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

resource "google_project_iam_member" "firestore" {
  for_each = {
    trigger = module.trigger.service_account_member
    worker  = module.worker.service_account_member
    watcher = module.watcher.service_account_member
  }
  project = var.project
  role    = "roles/datastore.user"
  member  = each.value
}

module "job" {
  source         = "./modules/gcp/job"
  for_each       = module.settings.jobs
  project        = var.project
  region         = var.region
  name           = each.key
  scheduler_name = "cronwarden-${each.key}"
  cron           = each.value.cron
  time_zone      = each.value.time_zone
  topic_id       = module.schedule.topic_id
  description    = local.descriptions[each.key]
  depends_on     = [google_project_service.apis]
}

module "watcher_schedule" {
  source        = "./modules/gcp/watcher"
  project       = var.project
  region        = var.region
  name          = "cronwarden-watcher"
  schedule      = var.watcher_schedule
  uri           = module.watcher.uri
  invoker_email = google_service_account.scheduler.email
  depends_on    = [google_project_service.apis]
}

module "state" {
  source          = "./modules/gcp/state"
  project         = var.project
  location        = var.firestore_location
  database        = var.firestore_database
  create_database = var.create_firestore_database
  indexes = [
    {
      collection = "cw_run"
      fields = [
        {
          field_path = "job"
          order      = "ASCENDING"
        },
        {
          field_path = "id"
          order      = "ASCENDING"
        },
      ]
    },
    {
      collection = "cw_lock"
      fields = [
        {
          field_path = "job"
          order      = "ASCENDING"
        },
        {
          field_path = "id"
          order      = "ASCENDING"
        },
      ]
    },
    {
      collection = "cw_status"
      fields = [
        {
          field_path = "job"
          order      = "ASCENDING"
        },
        {
          field_path = "id"
          order      = "ASCENDING"
        },
      ]
    },
    {
      collection = "cw_item"
      fields = [
        {
          field_path = "job"
          order      = "ASCENDING"
        },
        {
          field_path = "id"
          order      = "ASCENDING"
        },
      ]
    },
    {
      collection = "cw_outbox"
      fields = [
        {
          field_path = "job"
          order      = "ASCENDING"
        },
        {
          field_path = "id"
          order      = "ASCENDING"
        },
      ]
    },
  ]
  field_overrides = [
    {
      collection = "cw_run"
      field      = "d"
      ttl        = false
      order      = ""
    },
    {
      collection = "cw_run"
      field      = "rev"
      ttl        = false
      order      = ""
    },
    {
      collection = "cw_run"
      field      = "expire_at"
      ttl        = true
      order      = ""
    },
    {
      collection = "cw_lock"
      field      = "d"
      ttl        = false
      order      = ""
    },
    {
      collection = "cw_lock"
      field      = "rev"
      ttl        = false
      order      = ""
    },
    {
      collection = "cw_status"
      field      = "d"
      ttl        = false
      order      = ""
    },
    {
      collection = "cw_status"
      field      = "rev"
      ttl        = false
      order      = ""
    },
    {
      collection = "cw_status"
      field      = "due_at"
      ttl        = false
      order      = "ASCENDING"
    },
    {
      collection = "cw_status"
      field      = "watch_due"
      ttl        = false
      order      = "ASCENDING"
    },
    {
      collection = "cw_item"
      field      = "d"
      ttl        = false
      order      = ""
    },
    {
      collection = "cw_item"
      field      = "rev"
      ttl        = false
      order      = ""
    },
    {
      collection = "cw_item"
      field      = "expire_at"
      ttl        = true
      order      = ""
    },
    {
      collection = "cw_outbox"
      field      = "d"
      ttl        = false
      order      = ""
    },
    {
      collection = "cw_outbox"
      field      = "rev"
      ttl        = false
      order      = ""
    },
  ]
  depends_on = [google_project_service.apis]
}

module "monitoring" {
  source                   = "./modules/gcp/monitoring"
  project                  = var.project
  dead_letter_subscription = module.dead_letter.subscription_name
  notification_channels    = var.notification_channels
  depends_on               = [google_project_service.apis]
}

module "tick_monitoring" {
  source                   = "./modules/gcp/monitoring"
  project                  = var.project
  dead_letter_subscription = module.tick_dead_letter.subscription_name
  notification_channels    = var.notification_channels
  documentation            = "Schedule ticks were dead-lettered: the trigger failed on every attempt (Pub/Sub or Firestore trouble), or a tick was malformed (reason MalformedTick: check the Cloud Scheduler job's message). Do not redrive them: a tick is not a run request. Recover a lost window with the job's catch-up policy (its next tick), `cronwarden trigger JOB --window WINDOW --no-wait --provider gcp` or `cronwarden backfill`. Read them with `CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION=cronwarden-trigger-dead-letter cronwarden dlq list --provider gcp`, then clear them with `gcloud pubsub subscriptions seek cronwarden-trigger-dead-letter --time=\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"`."
  depends_on               = [google_project_service.apis]
}
