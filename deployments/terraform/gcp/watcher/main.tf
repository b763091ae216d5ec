# The liveness watcher's own Cloud Scheduler job: an authenticated HTTP call (OIDC) to the watcher
# function, on its own schedule, with its own invoker identity.

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
  type = string
}

variable "schedule" {
  description = "How often the watcher checks (cron, UTC)."
  type        = string
  default     = "*/5 * * * *"
}

variable "uri" {
  description = "The watcher function's HTTPS URL."
  type        = string
}

variable "invoker_email" {
  description = "Service account whose OIDC token Cloud Scheduler sends."
  type        = string
}

resource "google_cloud_scheduler_job" "this" {
  project          = var.project
  region           = var.region
  name             = var.name
  description      = "cronwarden liveness watcher"
  schedule         = var.schedule
  time_zone        = "Etc/UTC"
  attempt_deadline = "120s"

  http_target {
    uri         = var.uri
    http_method = "POST"
    oidc_token {
      service_account_email = var.invoker_email
      audience              = var.uri
    }
  }

  retry_config {
    retry_count = 1
  }
}
