# The pull worker on ECS/Fargate, for jobs whose max runtime is over what a Lambda invocation can
# run (900 s): a service of long-running tasks running `python -m cronwarden.hosting.pull`, which
# receives from the run queue, keeps each delivery invisible for the whole lease
# (ChangeMessageVisibility while the run renews) and settles it like the Lambda worker. The
# image is built from the rendered function/ folder (README.md). The task role may use the table
# and the queues, nothing else; credentials come from that role.

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

variable "image" {
  description = "Container image of the worker (built from function/: README.md)."
  type        = string
}

variable "jobs_module" {
  description = "The job module the worker imports."
  type        = string
}

variable "threads" {
  type    = number
  default = 2
}

variable "cpu" {
  type    = number
  default = 512
}

variable "memory_mb" {
  type    = number
  default = 1024
}

variable "desired_count" {
  description = "Running tasks; two or more for availability (a delivery is leased to one)."
  type        = number
  default     = 2
}

variable "subnet_ids" {
  description = "Private subnets of the tasks (with a route to the AWS APIs)."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the tasks (egress to the AWS APIs only; no ingress)."
  type        = list(string)
}

variable "environment" {
  description = "Settings of the provider (no secrets: credentials come from the task role)."
  type        = map(string)
}

variable "table_arn" {
  type = string
}

variable "queue_arn" {
  type = string
}

variable "dead_letter_queue_arn" {
  type = string
}

variable "log_retention_days" {
  type    = number
  default = 30
}

data "aws_region" "current" {}

resource "aws_ecs_cluster" "this" {
  name = "${var.prefix}-workers"
  setting {
    name  = "containerInsights"
    value = "enabled"
  }
}

resource "aws_cloudwatch_log_group" "worker" {
  # checkov:skip=CKV_AWS_158:The logs hold no secret (nothing secret is logged); AWS-managed encryption.
  # checkov:skip=CKV_AWS_338:Retention is var.log_retention_days; run history lives in DynamoDB.
  name              = "/ecs/${var.prefix}-pull-worker"
  retention_in_days = var.log_retention_days
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "execution" {
  name               = "${var.prefix}-pull-worker-execution"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

resource "aws_iam_role" "task" {
  name               = "${var.prefix}-pull-worker"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

data "aws_iam_policy_document" "task" {
  statement {
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
      var.table_arn,
      "${var.table_arn}/index/by-kind",
      "${var.table_arn}/index/by-due-at",
      "${var.table_arn}/index/by-watch-due",
    ]
  }
  statement {
    sid = "Queues"
    actions = [
      "sqs:SendMessage",
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
      "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl",
    ]
    resources = [var.queue_arn, var.dead_letter_queue_arn]
  }
}

resource "aws_iam_role_policy" "task" {
  name   = "${var.prefix}-pull-worker"
  role   = aws_iam_role.task.id
  policy = data.aws_iam_policy_document.task.json
}

resource "aws_ecs_task_definition" "worker" {
  family                   = "${var.prefix}-pull-worker"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory_mb
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn
  container_definitions = jsonencode([
    {
      name                   = "worker"
      image                  = var.image
      essential              = true
      readonlyRootFilesystem = true
      command = [
        "python", "-m", "cronwarden.hosting.pull",
        "--jobs", var.jobs_module, "--threads", tostring(var.threads),
      ]
      environment = [for name, value in var.environment : { name = name, value = value }]
      # SIGTERM asks running handlers to stop cooperatively; their deliveries are retried.
      stopTimeout = 120
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          "awslogs-group"         = aws_cloudwatch_log_group.worker.name
          "awslogs-region"        = data.aws_region.current.name
          "awslogs-stream-prefix" = "worker"
        }
      }
    }
  ])
}

resource "aws_ecs_service" "worker" {
  name            = "${var.prefix}-pull-worker"
  cluster         = aws_ecs_cluster.this.id
  task_definition = aws_ecs_task_definition.worker.arn
  desired_count   = var.desired_count
  launch_type     = "FARGATE"
  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = var.security_group_ids
    assign_public_ip = false
  }
}

output "cluster_name" {
  value = aws_ecs_cluster.this.name
}

output "service_name" {
  value = aws_ecs_service.worker.name
}

output "task_role_arn" {
  value = aws_iam_role.task.arn
}
