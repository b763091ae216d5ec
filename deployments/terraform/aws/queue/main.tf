# The run request queue and its dead-letter queue. SQS moves a message received
# max_receive_count times without deletion to the DLQ (the backstop: the worker dead-letters
# exhausted runs itself, with the reason). The visibility timeout covers the worker function's
# timeout, as Lambda's event source mapping requires. 14 days of retention on both.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 7.0"
    }
  }
}

variable "queue_name" {
  type = string
}

variable "dead_letter_queue_name" {
  type = string
}

variable "max_receive_count" {
  description = "Receives before SQS dead-letters a message (from the jobs' retry policies)."
  type        = number
}

variable "visibility_timeout_seconds" {
  description = "At least the worker function's timeout."
  type        = number
}

variable "retention_seconds" {
  type    = number
  default = 1209600
}

resource "aws_sqs_queue" "dead_letter" {
  name                      = var.dead_letter_queue_name
  message_retention_seconds = var.retention_seconds
  sqs_managed_sse_enabled   = true
  # The checkov policies (deployments/checkov/sqs_*.yaml) tell dead-letter queues by this tag.
  tags = { "cronwarden-role" = "dead-letter" }
}

resource "aws_sqs_queue" "runs" {
  name                       = var.queue_name
  message_retention_seconds  = var.retention_seconds
  visibility_timeout_seconds = var.visibility_timeout_seconds
  sqs_managed_sse_enabled    = true
  tags                       = { "cronwarden-role" = "run-requests" }

  lifecycle {
    # The redrive policy is owned by aws_sqs_queue_redrive_policy.runs below (changes to
    # max_receive_count apply there). The queue reads the policy back as the service returns
    # it, and some implementations (moto) re-serialise the JSON with other whitespace, which
    # would show a change on every plan here.
    ignore_changes = [redrive_policy]
  }
}

resource "aws_sqs_queue_redrive_policy" "runs" {
  queue_url = aws_sqs_queue.runs.id
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letter.arn
    maxReceiveCount     = var.max_receive_count
  })
}

output "queue_url" {
  value = aws_sqs_queue.runs.url
}

output "queue_arn" {
  value = aws_sqs_queue.runs.arn
  # Nothing consumes the queue (the worker's event source mapping) before its DLQ is attached.
  depends_on = [aws_sqs_queue_redrive_policy.runs]
}

output "dead_letter_queue_url" {
  value = aws_sqs_queue.dead_letter.url
}

output "dead_letter_queue_arn" {
  value = aws_sqs_queue.dead_letter.arn
}

output "dead_letter_queue_name" {
  value = aws_sqs_queue.dead_letter.name
}
