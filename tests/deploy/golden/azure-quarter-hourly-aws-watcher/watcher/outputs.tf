output "watcher_function_arn" {
  description = "The watcher."
  value       = module.functions.function_arns["watcher"]
}

output "watcher_role_name" {
  description = "Its execution role (what the jobs' cloud trusts)."
  value       = module.functions.role_name
}

output "watcher_role_arn" {
  description = "The same, as an ARN."
  value       = module.functions.role_arn
}

output "alerts_topic_arn" {
  description = "Watcher alarms."
  value       = module.monitoring.alerts_topic_arn
}
