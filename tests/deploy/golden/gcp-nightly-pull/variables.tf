variable "project" {
  description = "GCP project id."
  type        = string
}

variable "region" {
  description = "Region of the functions and scheduler jobs."
  type        = string
  default     = "europe-west1"
}

variable "firestore_location" {
  description = "Firestore location (e.g. eur3, nam5)."
  type        = string
  default     = "eur3"
}

variable "firestore_database" {
  description = "Firestore database id."
  type        = string
  default     = "(default)"
}

variable "create_firestore_database" {
  description = "Create the Firestore database (false if it exists)."
  type        = bool
  default     = true
}

variable "notification_channels" {
  description = "Cloud Monitoring notification channels for the dead-letter alert."
  type        = list(string)
  default     = []
}

variable "watcher_schedule" {
  description = "How often the liveness watcher runs (cron, UTC)."
  type        = string
  default     = "*/5 * * * *"
}

variable "labels" {
  description = "Labels on every resource that takes them."
  type        = map(string)
  default     = {}
}

variable "webhook_secret" {
  description = "Secret Manager secret id (in var.project) holding the watcher's webhook URL, exposed to the watcher as CRONWARDEN_WEBHOOK_URL; empty: alerts go to the logs only. Create the secret and its version outside Terraform (README.md): the URL is a credential and never enters the state."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{0,255}$", var.webhook_secret))
    error_message = "webhook_secret is the id of a Secret Manager secret (e.g. cronwarden-webhook), not the URL itself."
  }
}
