# One EventBridge Scheduler schedule per job, in UTC (the UTC expansion of the job's cron in its
# time zone: see cronwarden.adapters.aws.schedules), targeting the trigger function with an input
# that carries <aws.scheduler.scheduled-time>; the watcher's own schedule. Failed invocations are
# retried, then kept on the schedules' dead-letter queue. The scheduler's role may invoke those
# two functions and send to that queue, nothing else.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 7.0"
    }
  }
}

variable "prefix" {
  type = string
}

variable "jobs" {
  description = "job name => { expression = \"cron(...)\", input = \"{...}\" }"
  type = map(object({
    expression = string
    input      = string
  }))
}

variable "trigger_arn" {
  description = "The trigger function (\"\" when this deployment runs no jobs here)."
  type        = string
  default     = ""
}

variable "watcher_arn" {
  type    = string
  default = ""
}

variable "with_jobs" {
  description = "Create the job schedules (known at plan time, unlike the ARNs)."
  type        = bool
  default     = true
}

variable "with_watcher" {
  type    = bool
  default = true
}

variable "watcher_expression" {
  type    = string
  default = "rate(5 minutes)"
}

variable "retry_attempts" {
  type    = number
  default = 5
}

resource "aws_scheduler_schedule_group" "jobs" {
  name = var.prefix
}

resource "aws_sqs_queue" "dead_letter" {
  name                      = "${var.prefix}-schedules-dlq"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = { "cronwarden-role" = "dead-letter" }
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "scheduler" {
  name               = "${var.prefix}-scheduler"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

data "aws_iam_policy_document" "scheduler" {
  statement {
    sid       = "Invoke"
    actions   = ["lambda:InvokeFunction"]
    resources = compact([var.trigger_arn, var.watcher_arn])
  }
  statement {
    sid       = "DeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.dead_letter.arn]
  }
}

resource "aws_iam_role_policy" "scheduler" {
  name   = "${var.prefix}-scheduler"
  role   = aws_iam_role.scheduler.id
  policy = data.aws_iam_policy_document.scheduler.json
}

resource "aws_scheduler_schedule" "job" {
  # checkov:skip=CKV_AWS_297:The schedule input is a job name and a time (no secret); AWS-owned key.
  for_each                     = var.with_jobs ? var.jobs : {}
  name                         = substr("${var.prefix}-${each.key}", 0, 64)
  group_name                   = aws_scheduler_schedule_group.jobs.name
  schedule_expression          = each.value.expression
  schedule_expression_timezone = "UTC"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = var.trigger_arn
    role_arn = aws_iam_role.scheduler.arn
    input    = each.value.input

    retry_policy {
      maximum_retry_attempts       = var.retry_attempts
      maximum_event_age_in_seconds = 3600
    }

    dead_letter_config {
      arn = aws_sqs_queue.dead_letter.arn
    }
  }
}

resource "aws_scheduler_schedule" "watcher" {
  # checkov:skip=CKV_AWS_297:The schedule input is a job name and a time (no secret); AWS-owned key.
  count                        = var.with_watcher ? 1 : 0
  name                         = "${var.prefix}-watcher"
  group_name                   = aws_scheduler_schedule_group.jobs.name
  schedule_expression          = var.watcher_expression
  schedule_expression_timezone = "UTC"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = var.watcher_arn
    role_arn = aws_iam_role.scheduler.arn
    input    = jsonencode({ source = "cronwarden.watcher" })

    retry_policy {
      maximum_retry_attempts       = 2
      maximum_event_age_in_seconds = 600
    }

    dead_letter_config {
      arn = aws_sqs_queue.dead_letter.arn
    }
  }
}

output "dead_letter_queue_name" {
  value = aws_sqs_queue.dead_letter.name
}

output "schedule_names" {
  value = sort([for s in aws_scheduler_schedule.job : s.name])
}
