variable "region" {
  description = "AWS region."
  type        = string
  default     = "us-east-1"
}

variable "package" {
  description = "The Lambda package zip (requirements installed into it: see README.md)."
  type        = string
  default     = "function.zip"
}

variable "lambda_runtime" {
  description = "Lambda Python runtime."
  type        = string
  default     = "python3.11"
}

variable "memory_mb" {
  description = "Memory of each function."
  type        = number
  default     = 512
}

variable "log_retention_days" {
  description = "CloudWatch Logs retention."
  type        = number
  default     = 30
}

variable "alert_email" {
  description = "Subscribed to the alerts topic (the watcher's alerts, errors and silence) when set."
  type        = string
  default     = ""
}

variable "webhook_secret_arn" {
  description = "Secrets Manager secret holding the watcher's webhook URL (optional)."
  type        = string
  default     = ""
}

variable "watcher_expression" {
  description = "How often the watcher runs (EventBridge Scheduler expression)."
  type        = string
  default     = "rate(5 minutes)"
}

variable "endpoint_url" {
  description = "One endpoint for every AWS API, for local stacks only (empty on AWS)."
  type        = string
  default     = ""
}

variable "azure_tenant_id" {
  description = "Entra ID tenant of the jobs' subscription."
  type        = string
}

variable "azure_watcher_client_id" {
  description = "Application (client) id of the watcher's service principal (README.md)."
  type        = string
}

variable "azure_storage_account" {
  description = "Storage account holding the job records."
  type        = string
}

variable "azure_servicebus_namespace" {
  description = "Fully qualified Service Bus namespace (<name>.servicebus.windows.net)."
  type        = string
}

variable "azure_client_secret_arn" {
  description = "ARN of the Secrets Manager secret holding the service principal's client secret (created outside Terraform: README.md)."
  type        = string
  validation {
    condition     = can(regex("^arn:aws[a-z-]*:secretsmanager:", var.azure_client_secret_arn))
    error_message = "azure_client_secret_arn is the ARN of a Secrets Manager secret, not the secret itself."
  }
}
