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

variable "gcp_project" {
  description = "GCP project running the jobs."
  type        = string
}

variable "gcp_firestore_database" {
  description = "Firestore database id of the jobs."
  type        = string
  default     = "(default)"
}

variable "gcp_workload_identity_provider" {
  description = "Workload identity provider trusting this app (output external_watcher_provider of the GCP root module)."
  type        = string
}

variable "gcp_watcher_service_account" {
  description = "Service account the watcher impersonates (output external_watcher_service_account)."
  type        = string
}
