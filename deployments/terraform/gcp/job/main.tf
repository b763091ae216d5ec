# One Cloud Scheduler job per cronwarden job: the schedule in the job's own time zone, publishing
# {"job": name} to the schedule topic, with a retry config. Cloud Scheduler can fire twice: both
# ticks map to the same run key (DESIGN §4), so a duplicate is harmless.

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
  description = "The cronwarden job name."
  type        = string
}

variable "scheduler_name" {
  type = string
}

variable "cron" {
  type = string
}

variable "time_zone" {
  type = string
}

variable "topic_id" {
  description = "The schedule topic the trigger function is pushed from."
  type        = string
}

variable "description" {
  type    = string
  default = ""
}

variable "retry_count" {
  type    = number
  default = 3
}

resource "google_cloud_scheduler_job" "this" {
  project     = var.project
  region      = var.region
  name        = var.scheduler_name
  description = var.description
  schedule    = var.cron
  time_zone   = var.time_zone

  pubsub_target {
    topic_name = var.topic_id
    data       = base64encode(jsonencode({ job = var.name }))
    attributes = {
      job    = var.name
      reason = "schedule"
    }
  }

  retry_config {
    retry_count          = var.retry_count
    min_backoff_duration = "10s"
    max_backoff_duration = "300s"
    max_doublings        = 3
  }
}

output "name" {
  value = google_cloud_scheduler_job.this.name
}
