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

variable "aws_watcher_principal_id" {
  description = "Object id of the Entra ID service principal the AWS watcher signs in as (created outside Terraform: README.md)."
  type        = string
}
