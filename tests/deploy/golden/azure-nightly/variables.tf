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

variable "alert_emails" {
  description = "Who is emailed about dead letters."
  type        = list(string)
  default     = []
}

variable "webhook_key_vault_id" {
  description = "Resource id of the Key Vault (Azure RBAC) holding the watcher's webhook URL, referenced by the app setting CRONWARDEN_WEBHOOK_URL; empty: alerts go to the logs only. Put the secret in the vault outside Terraform (README.md): the URL is a credential and never enters the state."
  type        = string
  default     = ""
  validation {
    condition     = var.webhook_key_vault_id == "" || can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.KeyVault/vaults/[^/]+$", var.webhook_key_vault_id))
    error_message = "webhook_key_vault_id is a vault's resource id (/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.KeyVault/vaults/<name>), not the URL itself."
  }
}

variable "webhook_secret_name" {
  description = "Name of the Key Vault secret holding the watcher's webhook URL."
  type        = string
  default     = "cronwarden-webhook"
}
