# Access for a liveness watcher that runs in another cloud (GCP): a user-assigned identity that
# trusts the watcher's Google service account through workload identity federation (no secret
# crosses clouds), allowed to read/write job status records and to peek the dead-letter queue.

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
  type = string
}

variable "resource_group_name" {
  type = string
}

variable "location" {
  type = string
}

variable "google_service_account_unique_id" {
  description = "The numeric unique id (sub claim) of the watcher's Google service account."
  type        = string
}

variable "storage_account_id" {
  type = string
}

variable "queue_id" {
  type = string
}

resource "azurerm_user_assigned_identity" "this" {
  name                = var.name
  resource_group_name = var.resource_group_name
  location            = var.location
}

resource "azurerm_federated_identity_credential" "google" {
  name                = "${var.name}-google"
  resource_group_name = var.resource_group_name
  parent_id           = azurerm_user_assigned_identity.this.id
  issuer              = "https://accounts.google.com"
  subject             = var.google_service_account_unique_id
  audience            = ["api://AzureADTokenExchange"]
}

resource "azurerm_role_assignment" "table" {
  scope                = var.storage_account_id
  role_definition_name = "Storage Table Data Contributor"
  principal_id         = azurerm_user_assigned_identity.this.principal_id
}

resource "azurerm_role_assignment" "dead_letters" {
  scope                = var.queue_id
  role_definition_name = "Azure Service Bus Data Receiver"
  principal_id         = azurerm_user_assigned_identity.this.principal_id
}

output "client_id" {
  value = azurerm_user_assigned_identity.this.client_id
}

output "tenant_id" {
  value = azurerm_user_assigned_identity.this.tenant_id
}
