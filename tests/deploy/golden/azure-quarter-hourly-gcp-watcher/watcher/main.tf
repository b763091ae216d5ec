# Rendered by `cronwarden deploy render --watcher-provider gcp`: the liveness watcher
# of jobs running on Azure, outside their failure domain. It reaches Table Storage and
# the dead-letter queue through workload identity federation (no key).
locals {
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
  package = "${path.module}/function.zip"
  environment = {
    CRONWARDEN_PROVIDER                = "azure"
    CRONWARDEN_FUNCTIONS               = "watcher"
    CRONWARDEN_AZURE_TABLE_ACCOUNT_URL = "https://${var.azure_storage_account}.table.core.windows.net/"
    CRONWARDEN_AZURE_TABLE             = "cronwarden"
    CRONWARDEN_SERVICEBUS_NAMESPACE    = var.azure_servicebus_namespace
    CRONWARDEN_SERVICEBUS_QUEUE        = "cronwarden-runs"
    AZURE_TENANT_ID                    = var.azure_tenant_id
    AZURE_CLIENT_ID                    = var.azure_watcher_client_id
    CRONWARDEN_AZURE_FEDERATION        = "google"
  }
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

resource "google_service_account" "scheduler" {
  project      = var.project
  account_id   = "cronwarden-scheduler"
  display_name = "cronwarden watcher schedule (OIDC)"
}

module "watcher" {
  source             = "./modules/gcp/function"
  project            = var.project
  region             = var.region
  name               = "cronwarden-watcher"
  description        = "cronwarden liveness watcher (jobs on Azure)"
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
