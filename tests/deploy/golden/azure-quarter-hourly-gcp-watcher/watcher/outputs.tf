output "watcher_url" {
  value = module.watcher.uri
}

output "watcher_service_account_unique_id" {
  value = module.watcher.service_account_unique_id
}
