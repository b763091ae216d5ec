output "pull_worker_service_account" {
  value = google_service_account.pull_worker.email
}

output "pull_worker_environment" {
  description = "The pull worker's environment (configuration only)."
  value       = local.environment
}

output "trigger_url" {
  value = module.trigger.uri
}

output "dead_letter_subscription" {
  value = module.dead_letter.subscription_name
}

output "project_number" {
  value = data.google_project.this.number
}
