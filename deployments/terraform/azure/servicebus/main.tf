# The Service Bus namespace and the run-request queue: bounded deliveries then the dead-letter
# sub-queue ($DeadLetterQueue), expired messages dead-lettered too, duplicate detection on the
# run key. Local (SAS) auth is disabled: senders and receivers are managed identities.

terraform {
  required_version = ">= 1.5"
  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = ">= 4.0, < 5.0"
    }
  }
}

variable "name" {
  description = "Namespace name (globally unique, 6-50 characters)."
  type        = string
}

variable "resource_group_name" {
  type = string
}

variable "location" {
  type = string
}

variable "sku" {
  type    = string
  default = "Standard"
  validation {
    condition     = contains(["Standard", "Premium"], var.sku)
    error_message = "Duplicate detection needs the Standard or Premium tier."
  }
}

variable "queue_name" {
  type    = string
  default = "cronwarden-runs"
}

variable "max_delivery_count" {
  type = number
  validation {
    condition     = var.max_delivery_count >= 1 && var.max_delivery_count <= 2000
    error_message = "max_delivery_count is 1..2000."
  }
}

variable "lock_duration" {
  description = "Peek-lock duration, ISO 8601, at most PT5M (the worker renews the lock for longer runs)."
  type        = string
  validation {
    condition     = try(tonumber(regex("^PT([0-9]+)S$", var.lock_duration)[0]) <= 300, can(regex("^PT([1-4]M([0-5]?[0-9]S)?|5M)$", var.lock_duration)))
    error_message = "lock_duration must be an ISO 8601 duration of at most PT5M."
  }
}

variable "duplicate_detection_window" {
  type    = string
  default = "P1D"
}

variable "senders" {
  description = "Label => principal id that sends run requests (Azure Service Bus Data Sender)."
  type        = map(string)
  default     = {}
}

variable "receivers" {
  description = "Label => principal id that receives and settles them, dead-letter queue included (Azure Service Bus Data Receiver)."
  type        = map(string)
  default     = {}
}

variable "tags" {
  type    = map(string)
  default = {}
}

resource "azurerm_servicebus_namespace" "this" {
  # checkov:skip=CKV_AZURE_201:Customer-managed keys need the Premium tier; Microsoft-managed encryption is on.
  # checkov:skip=CKV_AZURE_199:Double encryption needs the Premium tier.
  # checkov:skip=CKV_AZURE_204:Public network access: a consumption-plan function app has no private endpoint; access needs Entra ID (local auth is disabled).
  name                = var.name
  resource_group_name = var.resource_group_name
  location            = var.location
  sku                 = var.sku
  local_auth_enabled  = false
  minimum_tls_version = "1.2"
  tags                = var.tags

  identity {
    type = "SystemAssigned"
  }
}

resource "azurerm_servicebus_queue" "this" {
  name                                    = var.queue_name
  namespace_id                            = azurerm_servicebus_namespace.this.id
  max_delivery_count                      = var.max_delivery_count
  lock_duration                           = var.lock_duration
  requires_duplicate_detection            = true
  duplicate_detection_history_time_window = var.duplicate_detection_window
  dead_lettering_on_message_expiration    = true
  default_message_ttl                     = "P14D"
  partitioning_enabled                    = false
}

resource "azurerm_role_assignment" "sender" {
  for_each             = var.senders
  scope                = azurerm_servicebus_queue.this.id
  role_definition_name = "Azure Service Bus Data Sender"
  principal_id         = each.value
}

resource "azurerm_role_assignment" "receiver" {
  for_each             = var.receivers
  scope                = azurerm_servicebus_queue.this.id
  role_definition_name = "Azure Service Bus Data Receiver"
  principal_id         = each.value
}

output "namespace_id" {
  value = azurerm_servicebus_namespace.this.id
}

output "namespace_fqdn" {
  value = "${azurerm_servicebus_namespace.this.name}.servicebus.windows.net"
}

output "queue_id" {
  value = azurerm_servicebus_queue.this.id
}

output "queue_name" {
  value = azurerm_servicebus_queue.this.name
}
