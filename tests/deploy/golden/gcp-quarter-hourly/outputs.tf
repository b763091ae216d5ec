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
