# Access for a liveness watcher that runs on AWS (a Lambda function): the roles of an Entra ID
# service principal that you create outside Terraform, allowed to read/write job status records
# and to peek the dead-letter queue. Its client secret is created outside Terraform too and kept
# only in AWS Secrets Manager (the watcher reads it by reference at cold start), so no secret
# is ever in this module's state. (Entra ID federation needs an OIDC token a Lambda role does
# not have: see docs/deploy-aws.md.)

terraform {
  required_version = ">= 1.5"
  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = ">= 4.0, < 5.0"
    }
  }
}

variable "principal_id" {
  description = "Object id of the watcher's service principal (az ad sp show --id <appId> --query id)."
  type        = string
}

variable "storage_account_id" {
  type = string
}

variable "queue_id" {
  type = string
}

resource "azurerm_role_assignment" "table" {
  scope                            = var.storage_account_id
  role_definition_name             = "Storage Table Data Contributor"
  principal_id                     = var.principal_id
  principal_type                   = "ServicePrincipal"
  skip_service_principal_aad_check = true
}

resource "azurerm_role_assignment" "dead_letters" {
  scope                            = var.queue_id
  role_definition_name             = "Azure Service Bus Data Receiver"
  principal_id                     = var.principal_id
  principal_type                   = "ServicePrincipal"
  skip_service_principal_aad_check = true
}
