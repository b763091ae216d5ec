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

variable "aws_account_id" {
  description = "12-digit AWS account running the watcher."
  type        = string
}

variable "aws_watcher_role_name" {
  description = "Execution role of the AWS watcher function (output watcher_role_name of the watcher root module)."
  type        = string
  default     = "cronwarden-functions"
}
