# Alarms on the dead-letter queues (runs and schedules): any visible message is an incident,
# announced on an SNS topic (subscribe people or a chat webhook to it).

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

variable "dead_letter_queues" {
  description = "Names of the dead-letter queues to watch."
  type        = set(string)
}

variable "alert_email" {
  type    = string
  default = ""
}

resource "aws_sns_topic" "alerts" {
  name              = "${var.prefix}-alerts"
  kms_master_key_id = "alias/aws/sns"
}

resource "aws_sns_topic_subscription" "email" {
  count     = var.alert_email == "" ? 0 : 1
  topic_arn = aws_sns_topic.alerts.arn
  protocol  = "email"
  endpoint  = var.alert_email
}

resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  for_each            = var.dead_letter_queues
  alarm_name          = "${each.key}-not-empty"
  alarm_description   = "Messages in ${each.key}: see `cronwarden dlq list --provider aws`, fix the cause, then `cronwarden dlq redrive`."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = each.key }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alerts.arn]
  ok_actions          = [aws_sns_topic.alerts.arn]
}

output "alerts_topic_arn" {
  value = aws_sns_topic.alerts.arn
}
