# A topic and our own push subscription to a function, with a dead-letter policy, a retry policy,
# an ack deadline and OIDC push authentication. (Eventarc's own subscription for a function
# trigger cannot carry a dead-letter policy: DESIGN §4.) Without a push endpoint the subscription
# is a pull subscription, read by the `subscribers` (the pull worker), with the same policies.

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

variable "push_endpoint" {
  description = "The function's HTTPS URL; null: a pull subscription."
  type        = string
  default     = null
}

variable "push_service_account_email" {
  description = "Identity whose OIDC token Pub/Sub attaches to each push (must hold run.invoker on the function)."
  type        = string
  default     = null
}

variable "dead_letter_topic_id" {
  type = string
}

variable "max_delivery_attempts" {
  type = number
  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub dead-letter policies allow 5..100 delivery attempts."
  }
}

variable "ack_deadline_seconds" {
  type = number
  validation {
    condition     = var.ack_deadline_seconds >= 10 && var.ack_deadline_seconds <= 600
    error_message = "Pub/Sub ack deadlines are 10..600 seconds."
  }
}

variable "minimum_backoff" {
  type    = string
  default = "10s"
}

variable "maximum_backoff" {
  type    = string
  default = "600s"
}

variable "pubsub_service_agent" {
  description = "service-<project number>@gcp-sa-pubsub.iam.gserviceaccount.com"
  type        = string
}

variable "publishers" {
  description = "Label => member allowed to publish to the topic."
  type        = map(string)
  default     = {}
}

variable "subscribers" {
  description = "Label => member that pulls from the subscription (the pull worker)."
  type        = map(string)
  default     = {}
}

variable "labels" {
  type    = map(string)
  default = {}
}

resource "google_pubsub_topic" "this" {
  # checkov:skip=CKV_GCP_83:Run requests carry a job name and a window, nothing sensitive; Google-managed encryption applies.
  project = var.project
  name    = var.topic_name
  labels  = var.labels
}

resource "google_pubsub_subscription" "this" {
  project                    = var.project
  name                       = var.subscription_name
  topic                      = google_pubsub_topic.this.id
  labels                     = var.labels
  ack_deadline_seconds       = var.ack_deadline_seconds
  message_retention_duration = "604800s"

  dynamic "push_config" {
    for_each = var.push_endpoint == null ? [] : [var.push_endpoint]
    content {
      push_endpoint = push_config.value
      oidc_token {
        service_account_email = var.push_service_account_email
        audience              = push_config.value
      }
    }
  }

  dead_letter_policy {
    dead_letter_topic     = var.dead_letter_topic_id
    max_delivery_attempts = var.max_delivery_attempts
  }

  retry_policy {
    minimum_backoff = var.minimum_backoff
    maximum_backoff = var.maximum_backoff
  }

  expiration_policy {
    ttl = ""
  }
}

# The Pub/Sub service agent acknowledges forwarded messages on the source subscription.
resource "google_pubsub_subscription_iam_member" "service_agent_subscriber" {
  project      = var.project
  subscription = google_pubsub_subscription.this.name
  role         = "roles/pubsub.subscriber"
  member       = "serviceAccount:${var.pubsub_service_agent}"
}

resource "google_pubsub_subscription_iam_member" "subscriber" {
  for_each     = var.subscribers
  project      = var.project
  subscription = google_pubsub_subscription.this.name
  role         = "roles/pubsub.subscriber"
  member       = each.value
}

resource "google_pubsub_topic_iam_member" "publisher" {
  for_each = var.publishers
  project  = var.project
  topic    = google_pubsub_topic.this.name
  role     = "roles/pubsub.publisher"
  member   = each.value
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
