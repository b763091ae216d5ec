output "worker_url" {
  value = module.worker.uri
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

output "external_watcher_service_account" {
  value = module.external_watcher.service_account_email
}

output "external_watcher_provider" {
  value = module.external_watcher.provider_name
}

output "external_watcher_credential_config" {
  value = module.external_watcher.credential_config
}
