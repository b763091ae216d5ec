# Access for a liveness watcher that runs in another cloud (Azure): a workload identity pool
# trusting the watcher app's Entra ID tokens, and a service account it may impersonate, allowed
# to read/write job status records (Firestore) and to peek the dead-letter subscription. No key
# is ever created.

terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
  }
}

variable "project" {
  type = string
}

variable "project_number" {
  type = string
}

variable "name" {
  description = "Pool and service account id (6-30 characters)."
  type        = string
}

variable "azure_tenant_id" {
  type = string
}

variable "azure_principal_id" {
  description = "Object id of the watcher function app's managed identity (the token's sub claim)."
  type        = string
}

variable "audience" {
  description = "Audience of the Entra ID token the watcher requests (an app id URI)."
  type        = string
}

variable "dead_letter_subscription" {
  type = string
}

resource "google_iam_workload_identity_pool" "this" {
  project                   = var.project
  workload_identity_pool_id = var.name
  display_name              = "cronwarden external watcher"
}

resource "google_iam_workload_identity_pool_provider" "azure" {
  project                            = var.project
  workload_identity_pool_id          = google_iam_workload_identity_pool.this.workload_identity_pool_id
  workload_identity_pool_provider_id = "azure"
  attribute_mapping = {
    "google.subject" = "assertion.sub"
  }
  attribute_condition = "assertion.sub == \"${var.azure_principal_id}\""
  oidc {
    issuer_uri        = "https://sts.windows.net/${var.azure_tenant_id}/"
    allowed_audiences = [var.audience]
  }
}

resource "google_service_account" "this" {
  project      = var.project
  account_id   = var.name
  display_name = "cronwarden external watcher"
}

resource "google_service_account_iam_member" "federation" {
  service_account_id = google_service_account.this.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principal://iam.googleapis.com/projects/${var.project_number}/locations/global/workloadIdentityPools/${google_iam_workload_identity_pool.this.workload_identity_pool_id}/subject/${var.azure_principal_id}"
}

resource "google_project_iam_member" "firestore" {
  project = var.project
  role    = "roles/datastore.user"
  member  = google_service_account.this.member
}

resource "google_pubsub_subscription_iam_member" "dead_letters" {
  for_each     = toset(["roles/pubsub.subscriber", "roles/pubsub.viewer"])
  project      = var.project
  subscription = var.dead_letter_subscription
  role         = each.value
  member       = google_service_account.this.member
}

output "service_account_email" {
  value = google_service_account.this.email
}

output "provider_name" {
  value = google_iam_workload_identity_pool_provider.azure.name
}
