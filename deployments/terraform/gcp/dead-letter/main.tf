# The dead-letter topic and its subscription (kept for `retention`, read by the watcher and by
# `cronwarden dlq`). The Pub/Sub service agent must be allowed to publish here, or the broker's
# dead-lettering fails silently; the functions that dead-letter explicitly publish here too (the
# worker: malformed requests, exhausted attempts; the trigger, on its own tick dead-letter topic:
# malformed ticks).

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

variable "topic_name" {
  type = string
}

variable "subscription_name" {
  type = string
}

variable "retention" {
  description = "How long dead letters are kept (Pub/Sub allows up to 7 days: 604800s)."
  type        = string
  default     = "604800s"
}

variable "pubsub_service_agent" {
  description = "service-<project number>@gcp-sa-pubsub.iam.gserviceaccount.com"
  type        = string
}

variable "publishers" {
  description = "Label => member that publishes dead letters itself (the worker, or the trigger)."
  type        = map(string)
  default     = {}
}

variable "readers" {
  description = "Label => member that peeks and redrives dead letters (the watcher)."
  type        = map(string)
  default     = {}
}

variable "labels" {
  type    = map(string)
  default = {}
}

resource "google_pubsub_topic" "this" {
  # checkov:skip=CKV_GCP_83:Dead letters are run requests and schedule ticks (a job name and a window), nothing sensitive; Google-managed encryption applies.
  project                    = var.project
  name                       = var.topic_name
  labels                     = var.labels
  message_retention_duration = var.retention
}

resource "google_pubsub_subscription" "this" {
  # checkov:skip=CKV2_CW_1:This is the dead-letter subscription itself, the end of the line (kept for inspection and redrive); a dead-letter policy here would loop.
  project                    = var.project
  name                       = var.subscription_name
  topic                      = google_pubsub_topic.this.id
  labels                     = var.labels
  message_retention_duration = var.retention
  retain_acked_messages      = false
  ack_deadline_seconds       = 60

  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_topic_iam_member" "service_agent_publisher" {
  project = var.project
  topic   = google_pubsub_topic.this.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${var.pubsub_service_agent}"
}

resource "google_pubsub_topic_iam_member" "publisher" {
  for_each = var.publishers
  project  = var.project
  topic    = google_pubsub_topic.this.name
  role     = "roles/pubsub.publisher"
  member   = each.value
}

resource "google_pubsub_subscription_iam_member" "reader" {
  for_each     = var.readers
  project      = var.project
  subscription = google_pubsub_subscription.this.name
  role         = "roles/pubsub.subscriber"
  member       = each.value
}

resource "google_pubsub_subscription_iam_member" "viewer" {
  for_each     = var.readers
  project      = var.project
  subscription = google_pubsub_subscription.this.name
  role         = "roles/pubsub.viewer"
  member       = each.value
}

output "topic_id" {
  value = google_pubsub_topic.this.id
}

output "topic_name" {
  value = google_pubsub_topic.this.name
}

output "subscription_name" {
  value = google_pubsub_subscription.this.name
}
