# Access for a liveness watcher that runs in another cloud (GCP or Azure): an IAM user allowed
# to read and write the jobs' records (the watcher writes status records) and to peek the run
# dead-letter queue, nothing else. Terraform creates no access key (it would land in the state):
# create one outside Terraform and put it in the watcher cloud's secret store (README.md); the
# watcher reads it by reference.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 7.0"
    }
  }
}

variable "name" {
  type = string
}

variable "table_arn" {
  type = string
}

variable "dead_letter_queue_arn" {
  type = string
}

resource "aws_iam_user" "watcher" {
  # checkov:skip=CKV_AWS_273:A watcher outside AWS has no AWS identity to federate here; its key lives in the watcher cloud's secret store.
  name = var.name
}

data "aws_iam_policy_document" "watcher" {
  statement {
    sid = "State"
    actions = [
      "dynamodb:GetItem",
      "dynamodb:Query",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
      "dynamodb:ConditionCheckItem",
    ]
    resources = [
      var.table_arn,
      "${var.table_arn}/index/by-kind",
      "${var.table_arn}/index/by-due-at",
      "${var.table_arn}/index/by-watch-due",
    ]
  }
  statement {
    sid = "DeadLetters"
    actions = [
      "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl",
      "sqs:ReceiveMessage",
      "sqs:ChangeMessageVisibility",
    ]
    resources = [var.dead_letter_queue_arn]
  }
}

resource "aws_iam_user_policy" "watcher" {
  # checkov:skip=CKV_AWS_40:One principal with one least-privilege policy; a group would only add a resource.
  name   = var.name
  user   = aws_iam_user.watcher.name
  policy = data.aws_iam_policy_document.watcher.json
}

output "user_name" {
  value = aws_iam_user.watcher.name
}
