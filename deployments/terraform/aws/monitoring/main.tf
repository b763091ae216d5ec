# Alarms on the dead-letter queues (runs and schedules): any visible message is an incident,
# announced on an SNS topic (subscribe people or a chat webhook to it). With a watcher function
# named (a watcher-only deployment watching jobs in another cloud), also: the watcher's alerts
# (its `alert.fired` log lines), its errors (it cannot read the jobs' cloud) and its silence (no
# invocation for 15 minutes) each page the same topic: a watcher that cannot watch is an incident.

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

variable "watcher_function_name" {
  description = "The watcher function to alarm on (\"\": none)."
  type        = string
  default     = ""
}

variable "watcher_log_group" {
  description = "The watcher function's log group (for its alert.fired lines)."
  type        = string
  default     = ""
}

locals {
  watcher = var.watcher_function_name == "" ? {} : { (var.watcher_function_name) = var.watcher_log_group }
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

resource "aws_cloudwatch_log_metric_filter" "watcher_alerts" {
  for_each       = local.watcher
  name           = "${each.key}-alerts"
  log_group_name = each.value
  pattern        = "{ $.event = \"alert.fired\" }"

  metric_transformation {
    name          = "AlertsFired"
    namespace     = "cronwarden/${var.prefix}"
    value         = "1"
    default_value = "0"
  }
}

resource "aws_cloudwatch_metric_alarm" "watcher_alerts" {
  for_each            = local.watcher
  alarm_name          = "${each.key}-alert"
  alarm_description   = "The watcher raised an alert (a missed window, a stuck run, dead letters): see its logs and `cronwarden status`."
  namespace           = "cronwarden/${var.prefix}"
  metric_name         = "AlertsFired"
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alerts.arn]
  depends_on          = [aws_cloudwatch_log_metric_filter.watcher_alerts]
}

resource "aws_cloudwatch_metric_alarm" "watcher_errors" {
  for_each            = local.watcher
  alarm_name          = "${each.key}-errors"
  alarm_description   = "The watcher failed (it cannot read the watched cloud's state or dead letters): the jobs are unwatched until it is fixed."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = each.key }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alerts.arn]
  ok_actions          = [aws_sns_topic.alerts.arn]
}

resource "aws_cloudwatch_metric_alarm" "watcher_silent" {
  for_each            = local.watcher
  alarm_name          = "${each.key}-silent"
  alarm_description   = "The watcher was not invoked for 15 minutes (its schedule is broken or disabled): the jobs are unwatched."
  namespace           = "AWS/Lambda"
  metric_name         = "Invocations"
  dimensions          = { FunctionName = each.key }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 3
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = [aws_sns_topic.alerts.arn]
  ok_actions          = [aws_sns_topic.alerts.arn]
}

output "alerts_topic_arn" {
  value = aws_sns_topic.alerts.arn
}
