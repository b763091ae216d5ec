variable "project" {
  description = "GCP project id of the watcher."
  type        = string
}

variable "region" {
  description = "Region of the watcher function."
  type        = string
  default     = "europe-west1"
}

variable "watcher_schedule" {
  description = "How often the liveness watcher runs (cron, UTC)."
  type        = string
  default     = "*/5 * * * *"
}

variable "azure_tenant_id" {
  description = "Entra ID tenant of the jobs' subscription."
  type        = string
}

variable "azure_watcher_client_id" {
  description = "Client id of the federated identity (output external_watcher_client_id of the Azure root module)."
  type        = string
}

variable "azure_storage_account" {
  description = "Storage account holding the job records."
  type        = string
}

variable "azure_servicebus_namespace" {
  description = "Fully qualified Service Bus namespace (<name>.servicebus.windows.net)."
  type        = string
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
