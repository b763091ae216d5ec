# The Linux Function App (Python, azure-functions v2 programming model) with a system-assigned
# identity, Application Insights, and its data-plane role assignments. App settings carry
# configuration only: connections are identity-based (AzureWebJobsStorage__accountName,
# ServiceBusConnection__fullyQualifiedNamespace), never keys or connection strings. A credential
# the app needs (the watcher's webhook URL) is a Key Vault reference resolved by the platform with
# the app's identity: Terraform holds only the vault and the secret's name, never the value.

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
  description = "Function app name (globally unique)."
  type        = string
}

variable "resource_group_name" {
  type = string
}

variable "location" {
  type = string
}

variable "sku_name" {
  description = "Dedicated App Service plan SKU (B1, S1, P1v3, ...)."
  type        = string
  default     = "B1"
  validation {
    condition     = !can(regex("^(Y1|EP[0-9]+|FC1)$", var.sku_name))
    error_message = "Consumption and Elastic Premium plans need a key-based content share (WEBSITE_CONTENTAZUREFILECONNECTIONSTRING) and cronwarden renders no secret: use a dedicated plan (B1, S1, P1v3, ...)."
  }
}

variable "python_version" {
  type    = string
  default = "3.11"
}

variable "storage_account_name" {
  description = "Host storage (AzureWebJobsStorage), reached with the app's identity."
  type        = string
}

variable "storage_account_id" {
  type = string
}

variable "app_settings" {
  description = "cronwarden's settings (CRONWARDEN_*): configuration only, never secrets."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for k in keys(var.app_settings) : !can(regex("(?i)(password|secret|accountkey|sharedaccesskey|connectionstring)", k))])
    error_message = "No secrets in app settings: use identity-based connections."
  }
}

variable "key_vault_secret_settings" {
  description = "App setting => Key Vault secret (vault resource id, secret name): the setting is a Key Vault reference, resolved with the app's system-assigned identity, which gets Key Vault Secrets User on that secret only (the vault must use Azure RBAC). The value never passes through Terraform."
  type = map(object({
    key_vault_id = string
    secret_name  = string
  }))
  default = {}
  validation {
    condition     = alltrue([for s in values(var.key_vault_secret_settings) : can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.KeyVault/vaults/[^/]+$", s.key_vault_id))])
    error_message = "key_vault_id is a vault's resource id: /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.KeyVault/vaults/<name>."
  }
}

variable "log_retention_days" {
  type    = number
  default = 30
}

variable "tags" {
  type    = map(string)
  default = {}
}

resource "azurerm_service_plan" "this" {
  # checkov:skip=CKV_AZURE_211:B1 is the low-cost default for a handful of scheduled jobs; set sku_name (S1, P1v3, ...) for more capacity.
  # checkov:skip=CKV_AZURE_212:One instance by default (var.sku_name, worker_count): a missed tick is caught up by the catch-up policy and alerted by the watcher.
  # checkov:skip=CKV_AZURE_225:Zone redundancy needs a premium plan with at least 3 instances; a missed tick is caught up (catch-up policy) and alerted by the watcher.
  name                = "${var.name}-plan"
  resource_group_name = var.resource_group_name
  location            = var.location
  os_type             = "Linux"
  sku_name            = var.sku_name
  tags                = var.tags
}

resource "azurerm_log_analytics_workspace" "this" {
  name                = "${var.name}-logs"
  resource_group_name = var.resource_group_name
  location            = var.location
  sku                 = "PerGB2018"
  retention_in_days   = var.log_retention_days
  tags                = var.tags
}

resource "azurerm_application_insights" "this" {
  name                = "${var.name}-insights"
  resource_group_name = var.resource_group_name
  location            = var.location
  workspace_id        = azurerm_log_analytics_workspace.this.id
  application_type    = "other"
  tags                = var.tags
}

resource "azurerm_linux_function_app" "this" {
  # checkov:skip=CKV_AZURE_221:Public network access: the app has no HTTP functions (timer and Service Bus triggers only) and deployment uses the SCM endpoint with Entra ID.
  name                          = var.name
  resource_group_name           = var.resource_group_name
  location                      = var.location
  service_plan_id               = azurerm_service_plan.this.id
  storage_account_name          = var.storage_account_name
  storage_uses_managed_identity = true
  functions_extension_version   = "~4"
  https_only                    = true
  builtin_logging_enabled       = false
  client_certificate_enabled    = false
  tags                          = var.tags

  ftp_publish_basic_authentication_enabled       = false
  webdeploy_publish_basic_authentication_enabled = false

  identity {
    type = "SystemAssigned"
  }

  site_config {
    always_on                              = true
    minimum_tls_version                    = "1.2"
    ftps_state                             = "Disabled"
    http2_enabled                          = true
    application_insights_connection_string = azurerm_application_insights.this.connection_string
    application_stack {
      python_version = var.python_version
    }
  }

  app_settings = merge(var.app_settings, local.key_vault_references, {
    AzureWebJobsFeatureFlags       = "EnableWorkerIndexing"
    SCM_DO_BUILD_DURING_DEPLOYMENT = "true"
    ENABLE_ORYX_BUILD              = "true"
  })
}

locals {
  # @Microsoft.KeyVault(VaultName=...;SecretName=...): versionless, so a new secret version is
  # picked up when the platform refreshes references (within 24 h, or on restart).
  key_vault_references = {
    for setting, s in var.key_vault_secret_settings :
    setting => "@Microsoft.KeyVault(VaultName=${element(split("/", s.key_vault_id), 8)};SecretName=${s.secret_name})"
  }
}

resource "azurerm_role_assignment" "key_vault_secret" {
  for_each             = var.key_vault_secret_settings
  scope                = "${each.value.key_vault_id}/secrets/${each.value.secret_name}"
  role_definition_name = "Key Vault Secrets User"
  principal_id         = azurerm_linux_function_app.this.identity[0].principal_id
}

# The host keeps timer-trigger locks and leases in blobs and queues of its storage account;
# cronwarden's store uses the table.
resource "azurerm_role_assignment" "storage" {
  for_each = toset([
    "Storage Blob Data Owner",
    "Storage Queue Data Contributor",
    "Storage Table Data Contributor",
  ])
  scope                = var.storage_account_id
  role_definition_name = each.value
  principal_id         = azurerm_linux_function_app.this.identity[0].principal_id
}

output "name" {
  value = azurerm_linux_function_app.this.name
}

output "principal_id" {
  value = azurerm_linux_function_app.this.identity[0].principal_id
}

output "application_insights_id" {
  value = azurerm_application_insights.this.id
}
