variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "cronwarden"
}

variable "suffix" {
  description = "Short lowercase letters/digits making the global names unique (storage account, function app, Service Bus namespace)."
  type        = string
}

variable "location" {
  description = "Azure region."
  type        = string
  default     = "westeurope"
}

variable "resource_group_name" {
  description = "Resource group (created unless it exists)."
  type        = string
  default     = "cronwarden"
}

variable "create_resource_group" {
  description = "Create the resource group."
  type        = bool
  default     = true
}

variable "sku_name" {
  description = "Dedicated App Service plan SKU (B1, S1, P1v3, ...); Always On keeps timers firing."
  type        = string
  default     = "B1"
}

variable "watcher_schedule" {
  description = "How often the liveness watcher runs (NCRONTAB, UTC)."
  type        = string
  default     = "0 */5 * * * *"
}

variable "tags" {
  description = "Tags on every resource that takes them."
  type        = map(string)
  default     = {}
}

variable "gcp_project" {
  description = "GCP project running the jobs."
  type        = string
}

variable "gcp_firestore_database" {
  description = "Firestore database id of the jobs."
  type        = string
  default     = "(default)"
}

variable "gcp_workload_identity_provider" {
  description = "Workload identity provider trusting this app (output external_watcher_provider of the GCP root module)."
  type        = string
}

variable "gcp_watcher_service_account" {
  description = "Service account the watcher impersonates (output external_watcher_service_account)."
  type        = string
}

variable "gcp_watcher_audience" {
  description = "Audience of the Entra ID token presented to GCP."
  type        = string
  default     = "api://cronwarden-watcher"
}
