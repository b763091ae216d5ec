# Provider-free module: checks and normalises the per-job settings that `cronwarden deploy render`
# derived from the job definitions, so that a hand-edited root module cannot push an out-of-range
# value to a cloud API. `terraform validate` runs on it offline (it needs no provider).

terraform {
  required_version = ">= 1.5"
}

variable "jobs" {
  description = "Per job: schedule (5-field cron), time zone, max runtime and retry settings, as rendered from the job module."
  type = map(object({
    cron                = string
    time_zone           = string
    ncrontab_utc        = string
    max_runtime_seconds = number
    max_attempts        = number
    min_backoff_seconds = number
    max_backoff_seconds = number
    schedule_setting    = string
  }))

  validation {
    condition     = alltrue([for name, job in var.jobs : can(regex("^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$", name))])
    error_message = "Job names use 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit."
  }
  validation {
    condition     = alltrue([for job in var.jobs : length(split(" ", job.cron)) == 5])
    error_message = "Every cron expression has 5 fields (minute hour day month weekday)."
  }
  validation {
    condition     = alltrue([for job in var.jobs : job.ncrontab_utc == "" || length(split(" ", job.ncrontab_utc)) == 6])
    error_message = "Every NCRONTAB expression (Azure only; empty otherwise) has 6 fields (second minute hour day month weekday)."
  }
  validation {
    condition     = alltrue([for job in var.jobs : job.max_attempts >= 1 && job.max_attempts <= 100])
    error_message = "retry.max_attempts must be between 1 and 100."
  }
  validation {
    condition     = alltrue([for job in var.jobs : job.max_runtime_seconds > 0])
    error_message = "max_runtime must be positive."
  }
  validation {
    condition     = alltrue([for job in var.jobs : 0 <= job.min_backoff_seconds && job.min_backoff_seconds <= job.max_backoff_seconds])
    error_message = "Backoff must satisfy 0 <= min_backoff <= max_backoff."
  }
}

variable "ack_margin_seconds" {
  description = "Added to the longest max runtime for the Pub/Sub ack deadline (capped at 600 s)."
  type        = number
  default     = 30
}

locals {
  longest_runtime = max(concat([60], [for job in var.jobs : job.max_runtime_seconds])...)
  most_attempts   = max(concat([1], [for job in var.jobs : job.max_attempts])...)
  min_backoff     = min(concat([600], [for job in var.jobs : job.min_backoff_seconds])...)
  max_backoff     = max(concat([0], [for job in var.jobs : job.max_backoff_seconds])...)
}

output "jobs" {
  description = "The validated per-job settings."
  value       = var.jobs
}

output "pubsub" {
  description = "Settings of the shared Pub/Sub worker subscription, within Pub/Sub's limits: deadLetterPolicy attempts 5..100, ack deadline 10..600 s, backoff 0..600 s."
  value = {
    max_delivery_attempts = min(100, max(5, local.most_attempts))
    ack_deadline_seconds  = min(600, max(10, local.longest_runtime + var.ack_margin_seconds))
    minimum_backoff       = "${min(600, local.min_backoff)}s"
    maximum_backoff       = "${min(600, max(local.min_backoff, local.max_backoff))}s"
  }
}

output "servicebus" {
  description = "Settings of the shared Service Bus queue: max delivery count, lock duration (at most PT5M; the worker renews longer runs)."
  value = {
    max_delivery_count = local.most_attempts
    lock_duration      = "PT${min(300, max(30, local.longest_runtime))}S"
  }
}

output "function_timeout_seconds" {
  description = "The longest max runtime plus a margin: the host timeout of the worker."
  value       = local.longest_runtime + var.ack_margin_seconds
}

output "schedule_settings" {
  description = "App setting name => NCRONTAB (UTC) per job, for Azure timer triggers."
  value       = { for name, job in var.jobs : job.schedule_setting => job.ncrontab_utc }
}
