# The three Lambda functions (trigger, worker, watcher) from one package, their log groups, one
# execution role with least privilege (the state table and its index, the two queues, its own
# log groups), and the worker's SQS event source mapping with partial batch responses.
# A watcher-only deployment (jobs in another cloud) has no table nor queue here: its role reads
# only the secrets it is given (secret_arns) and writes its logs.

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

variable "package" {
  description = "The function package zip (job module, handler.py and installed requirements)."
  type        = string
}

variable "runtime" {
  type    = string
  default = "python3.11"
}

variable "memory_mb" {
  type    = number
  default = 512
}

variable "worker_timeout_seconds" {
  description = "The longest max runtime plus the margin (at most 900)."
  type        = number
}

variable "functions" {
  description = "Which functions to deploy: trigger, worker, watcher."
  type        = set(string)
  default     = ["trigger", "worker", "watcher"]
}

variable "environment" {
  description = "Settings of the provider (no secrets: credentials come from the role)."
  type        = map(string)
}

variable "table_arn" {
  description = "\"\" when the state lives in another cloud (a watcher-only deployment)."
  type        = string
  default     = ""
}

variable "queue_arn" {
  description = "\"\" when the state lives in another cloud (a watcher-only deployment)."
  type        = string
  default     = ""
}

variable "dead_letter_queue_arn" {
  description = "\"\" when the state lives in another cloud (a watcher-only deployment)."
  type        = string
  default     = ""
}

variable "webhook_secret_arn" {
  description = "Secrets Manager secret holding the watcher's webhook URL (read by reference)."
  type        = string
  default     = ""
}

variable "secret_arns" {
  description = "Secrets Manager secrets the functions read at cold start (another cloud's credential)."
  type        = list(string)
  default     = []
}

variable "log_retention_days" {
  type    = number
  default = 30
}

variable "batch_size" {
  description = "Records per worker invocation; 1 gives each run the function's whole timeout."
  type        = number
  default     = 1
}

locals {
  timeouts = {
    trigger = 60
    worker  = var.worker_timeout_seconds
    watcher = 120
  }
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "functions" {
  name               = "${var.prefix}-functions"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

data "aws_iam_policy_document" "functions" {
  dynamic "statement" {
    for_each = var.table_arn == "" ? [] : [var.table_arn]
    content {
      sid = "State"
      actions = [
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
      ]
      resources = [
        statement.value,
        "${statement.value}/index/by-kind",
        "${statement.value}/index/by-due-at",
        "${statement.value}/index/by-watch-due",
      ]
    }
  }
  dynamic "statement" {
    for_each = var.queue_arn == "" ? [] : [var.queue_arn]
    content {
      sid = "Queues"
      actions = [
        "sqs:SendMessage",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
      ]
      resources = [statement.value, var.dead_letter_queue_arn]
    }
  }
  dynamic "statement" {
    for_each = length(var.secret_arns) == 0 ? [] : [var.secret_arns]
    content {
      sid       = "WatchedCloudCredential"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = statement.value
    }
  }
  dynamic "statement" {
    for_each = var.webhook_secret_arn == "" ? [] : [var.webhook_secret_arn]
    content {
      sid       = "WebhookSecret"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = [statement.value]
    }
  }
  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = [for name in var.functions : "${aws_cloudwatch_log_group.function[name].arn}:*"]
  }
}

resource "aws_iam_role_policy" "functions" {
  name   = "${var.prefix}-functions"
  role   = aws_iam_role.functions.id
  policy = data.aws_iam_policy_document.functions.json
}

resource "aws_cloudwatch_log_group" "function" {
  # checkov:skip=CKV_AWS_158:The logs hold no secret (nothing secret is logged); AWS-managed encryption.
  # checkov:skip=CKV_AWS_338:Retention is var.log_retention_days; run history lives in DynamoDB.
  for_each          = var.functions
  name              = "/aws/lambda/${var.prefix}-${each.key}"
  retention_in_days = var.log_retention_days
}

resource "aws_lambda_function" "function" {
  # checkov:skip=CKV_AWS_116:Failures are dead-lettered by the SQS redrive policy (worker) and the schedules' own DLQ (trigger, watcher).
  # checkov:skip=CKV_AWS_117:The functions call AWS APIs only; no VPC resource to reach.
  # checkov:skip=CKV_AWS_115:The event source mapping bounds the worker's concurrency; reserved concurrency is an account-wide choice.
  # checkov:skip=CKV_AWS_272:Code signing needs a signing profile the user owns; the package is built from the rendered folder.
  # checkov:skip=CKV_AWS_173:The environment holds configuration only; secrets are read by reference (Secrets Manager).
  # checkov:skip=CKV_AWS_50:X-Ray tracing is optional; cronwarden exports OpenTelemetry when configured.
  for_each         = var.functions
  function_name    = "${var.prefix}-${each.key}"
  role             = aws_iam_role.functions.arn
  runtime          = var.runtime
  handler          = "handler.${each.key}"
  filename         = var.package
  source_code_hash = filebase64sha256(var.package)
  memory_size      = var.memory_mb
  timeout          = local.timeouts[each.key]

  environment {
    variables = merge(
      var.environment,
      { CRONWARDEN_FUNCTIONS = each.key },
      var.webhook_secret_arn == "" ? {} : { CRONWARDEN_WEBHOOK_SECRET_ARN = var.webhook_secret_arn },
    )
  }

  depends_on = [aws_cloudwatch_log_group.function, aws_iam_role_policy.functions]
}

resource "aws_lambda_event_source_mapping" "worker" {
  count                   = contains(var.functions, "worker") ? 1 : 0
  event_source_arn        = var.queue_arn
  function_name           = aws_lambda_function.function["worker"].arn
  batch_size              = var.batch_size
  function_response_types = ["ReportBatchItemFailures"]
}

output "function_arns" {
  value = { for name, fn in aws_lambda_function.function : name => fn.arn }
}

output "role_arn" {
  value = aws_iam_role.functions.arn
}

output "role_name" {
  value = aws_iam_role.functions.name
}

output "log_group_names" {
  value = { for name, group in aws_cloudwatch_log_group.function : name => group.name }
}
