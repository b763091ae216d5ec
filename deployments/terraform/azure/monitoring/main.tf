# Azure Monitor metric alert: any message in the run queue's dead-letter sub-queue
# (Microsoft.ServiceBus/namespaces DeadletteredMessages > 0, for this queue's EntityName).

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

variable "namespace_id" {
  type = string
}

variable "queue_name" {
  type = string
}

variable "alert_emails" {
  description = "Addresses notified by the action group (may be empty)."
  type        = list(string)
  default     = []
}

variable "tags" {
  type    = map(string)
  default = {}
}

resource "azurerm_monitor_action_group" "this" {
  name                = "${var.name}-dead-letters"
  resource_group_name = var.resource_group_name
  short_name          = "cw-dlq"
  tags                = var.tags

  dynamic "email_receiver" {
    for_each = { for i, address in var.alert_emails : tostring(i) => address }
    content {
      name                    = "email-${email_receiver.key}"
      email_address           = email_receiver.value
      use_common_alert_schema = true
    }
  }
}

resource "azurerm_monitor_metric_alert" "dead_letters" {
  name                = "${var.name}-dead-letters"
  resource_group_name = var.resource_group_name
  scopes              = [var.namespace_id]
  description         = "Run requests were dead-lettered: inspect with 'cronwarden dlq list --provider azure', fix the cause, then redrive."
  severity            = 2
  frequency           = "PT1M"
  window_size         = "PT5M"
  auto_mitigate       = true
  tags                = var.tags

  criteria {
    metric_namespace = "Microsoft.ServiceBus/namespaces"
    metric_name      = "DeadletteredMessages"
    aggregation      = "Maximum"
    operator         = "GreaterThan"
    threshold        = 0
    dimension {
      name     = "EntityName"
      operator = "Include"
      values   = [var.queue_name]
    }
  }

  action {
    action_group_id = azurerm_monitor_action_group.this.id
  }
}
