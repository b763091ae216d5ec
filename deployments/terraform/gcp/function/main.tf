# One Cloud Functions (2nd gen) HTTP function with its own service account. Nobody may invoke
# it except the identities in `invokers` (Pub/Sub push and Cloud Scheduler OIDC identities):
# there is no allUsers / allAuthenticatedUsers binding, and ingress is internal-only by default
# (Pub/Sub push and Cloud Scheduler in the same project count as internal traffic).
# Credentials (the watcher's webhook URL) come from Secret Manager as secret environment
# variables: Terraform holds only the secret's id, never its value.

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

variable "region" {
  type = string
}

variable "name" {
  description = "Function name; also the service account id (6-30 characters)."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.name))
    error_message = "Use 6-30 lowercase letters, digits and '-', starting with a letter."
  }
}

variable "description" {
  type    = string
  default = ""
}

variable "entry_point" {
  description = "The functions-framework target in main.py: trigger, worker or watcher."
  type        = string
}

variable "source_bucket" {
  type = string
}

variable "source_object" {
  type = string
}

variable "runtime" {
  type    = string
  default = "python311"
}

variable "memory" {
  type    = string
  default = "512M"
}

variable "timeout_seconds" {
  type    = number
  default = 60
}

variable "max_instances" {
  type    = number
  default = 10
}

variable "ingress_settings" {
  type    = string
  default = "ALLOW_INTERNAL_ONLY"
  validation {
    condition     = contains(["ALLOW_INTERNAL_ONLY", "ALLOW_INTERNAL_AND_GCLB", "ALLOW_ALL"], var.ingress_settings)
    error_message = "ingress_settings must be ALLOW_INTERNAL_ONLY, ALLOW_INTERNAL_AND_GCLB or ALLOW_ALL."
  }
}

variable "environment" {
  description = "Environment variables (configuration only: never secrets)."
  type        = map(string)
  default     = {}
}

variable "secret_environment" {
  description = "Environment variable => Secret Manager secret (id in var.project) and version, read by the function's own service account (granted roles/secretmanager.secretAccessor on that secret). The value never passes through Terraform."
  type = map(object({
    secret  = string
    version = string
  }))
  default = {}
}

variable "invokers" {
  description = "Label => IAM member allowed to invoke the function (roles/run.invoker); labels are static so members may be unknown until apply."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for m in values(var.invokers) : !contains(["allUsers", "allAuthenticatedUsers"], m)])
    error_message = "The function must not be public."
  }
}

variable "labels" {
  type    = map(string)
  default = {}
}

resource "google_service_account" "this" {
  project      = var.project
  account_id   = var.name
  display_name = "cronwarden ${var.entry_point}"
  description  = "Runs the cronwarden ${var.entry_point} function (least privilege)."
}

resource "google_cloudfunctions2_function" "this" {
  project     = var.project
  location    = var.region
  name        = var.name
  description = var.description
  labels      = var.labels

  build_config {
    runtime     = var.runtime
    entry_point = var.entry_point
    source {
      storage_source {
        bucket = var.source_bucket
        object = var.source_object
      }
    }
  }

  service_config {
    available_memory               = var.memory
    timeout_seconds                = var.timeout_seconds
    max_instance_count             = var.max_instances
    ingress_settings               = var.ingress_settings
    all_traffic_on_latest_revision = true
    service_account_email          = google_service_account.this.email
    environment_variables          = var.environment

    dynamic "secret_environment_variables" {
      for_each = var.secret_environment
      content {
        key        = secret_environment_variables.key
        project_id = var.project
        secret     = secret_environment_variables.value.secret
        version    = secret_environment_variables.value.version
      }
    }
  }

  depends_on = [google_secret_manager_secret_iam_member.secret_accessor]
}

# Only this function's identity may read its secrets (granted before the function deploys, so
# its first instance can resolve them).
resource "google_secret_manager_secret_iam_member" "secret_accessor" {
  for_each  = var.secret_environment
  project   = var.project
  secret_id = each.value.secret
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.this.member
}

resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = var.invokers
  project  = var.project
  location = var.region
  name     = google_cloudfunctions2_function.this.name
  role     = "roles/run.invoker"
  member   = each.value
}

output "name" {
  value = google_cloudfunctions2_function.this.name
}

output "uri" {
  value = google_cloudfunctions2_function.this.service_config[0].uri
}

output "service_account_email" {
  value = google_service_account.this.email
}

output "service_account_member" {
  value = google_service_account.this.member
}

output "service_account_unique_id" {
  value = google_service_account.this.unique_id
}
