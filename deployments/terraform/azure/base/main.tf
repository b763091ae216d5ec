# Resource group, and the storage account + table that hold cronwarden's records. Shared keys
# are disabled: every client (the function host, cronwarden's store) authenticates with a managed
# identity and a data-plane role assignment.

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
  description = "Prefix of every resource name."
  type        = string
}

variable "location" {
  type = string
}

variable "create_resource_group" {
  type    = bool
  default = true
}

variable "resource_group_name" {
  type = string
}

variable "storage_account_name" {
  description = "Globally unique, 3-24 lowercase letters and digits."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9]{3,24}$", var.storage_account_name))
    error_message = "Storage account names are 3-24 lowercase letters and digits."
  }
}

variable "table_name" {
  type    = string
  default = "cronwarden"
}

variable "tags" {
  type    = map(string)
  default = {}
}

resource "azurerm_resource_group" "this" {
  count    = var.create_resource_group ? 1 : 0
  name     = var.resource_group_name
  location = var.location
  tags     = var.tags
}

locals {
  resource_group_name = var.create_resource_group ? azurerm_resource_group.this[0].name : var.resource_group_name
}

resource "azurerm_storage_account" "this" {
  # checkov:skip=CKV_AZURE_33:Queue service logging: cronwarden uses no storage queues (the function host's own use is internal).
  # checkov:skip=CKV_AZURE_59:Public network access stays on: a consumption-plan function app reaches its storage over public endpoints; access needs Entra ID (shared keys are disabled).
  # checkov:skip=CKV_AZURE_206:Replication is the user's choice (var.replication); LRS is the low-cost default for job state.
  # checkov:skip=CKV2_AZURE_1:Customer-managed keys are optional hardening; Microsoft-managed encryption is on.
  # checkov:skip=CKV2_AZURE_33:Private endpoints need a VNet-integrated plan; out of scope for the default consumption deployment.
  # checkov:skip=CKV2_AZURE_38:Soft delete applies to blobs/files; cronwarden keeps its state in a table.
  name                            = var.storage_account_name
  resource_group_name             = local.resource_group_name
  location                        = var.location
  account_tier                    = "Standard"
  account_replication_type        = "LRS"
  min_tls_version                 = "TLS1_2"
  https_traffic_only_enabled      = true
  shared_access_key_enabled       = false
  default_to_oauth_authentication = true
  allow_nested_items_to_be_public = false
  tags                            = var.tags
}

# Shared keys are disabled, so Terraform creates the table through the data plane with its own
# Entra ID identity (provider setting storage_use_azuread): grant it the data role first.
data "azurerm_client_config" "current" {}

resource "azurerm_role_assignment" "deployer_table" {
  scope                = azurerm_storage_account.this.id
  role_definition_name = "Storage Table Data Contributor"
  principal_id         = data.azurerm_client_config.current.object_id
}

resource "azurerm_storage_table" "this" {
  # checkov:skip=CKV2_AZURE_20:Storage analytics logging of table reads is optional (cost); cronwarden logs every run transition itself.
  name                 = var.table_name
  storage_account_name = azurerm_storage_account.this.name
  depends_on           = [azurerm_role_assignment.deployer_table]
}

output "resource_group_name" {
  value = local.resource_group_name
}

output "storage_account_id" {
  value = azurerm_storage_account.this.id
}

output "storage_account_name" {
  value = azurerm_storage_account.this.name
}

output "table_endpoint" {
  value = azurerm_storage_account.this.primary_table_endpoint
}

output "table_name" {
  value = azurerm_storage_table.this.name
}
