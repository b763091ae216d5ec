# Cloud Monitoring alert: any message waiting in the dead-letter subscription
# (pubsub.googleapis.com/subscription/num_undelivered_messages > 0).

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

variable "dead_letter_subscription" {
  description = "Name (not id) of the dead-letter subscription."
  type        = string
}

variable "notification_channels" {
  description = "Cloud Monitoring notification channel ids to alert."
  type        = list(string)
  default     = []
}

variable "documentation" {
  description = "What the alert tells the person paged (markdown)."
  type        = string
  default     = "Run requests were dead-lettered. Inspect them with `cronwarden dlq list --provider gcp`, fix the cause, then `cronwarden dlq redrive --provider gcp`."
}

resource "google_monitoring_alert_policy" "dead_letters" {
  project               = var.project
  display_name          = "cronwarden: dead letters waiting in ${var.dead_letter_subscription}"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "num_undelivered_messages > 0"
    condition_threshold {
      filter          = "resource.type = \"pubsub_subscription\" AND resource.labels.subscription_id = \"${var.dead_letter_subscription}\" AND metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "60s"
      aggregations {
        alignment_period   = "60s"
        per_series_aligner = "ALIGN_MAX"
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = var.documentation
  }
}
