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
  description = "Function app plan: Y1 (consumption, runs up to 10 min) or EP1.. (premium)."
  type        = string
  default     = "EP1"
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

variable "alert_emails" {
  description = "Who is emailed about dead letters."
  type        = list(string)
  default     = []
}
