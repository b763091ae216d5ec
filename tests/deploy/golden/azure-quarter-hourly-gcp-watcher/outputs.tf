output "function_app_name" {
  value = module.app.name
}

output "function_app_principal_id" {
  value = module.app.principal_id
}

output "resource_group_name" {
  value = module.base.resource_group_name
}

output "servicebus_namespace" {
  value = local.servicebus_fqdn
}

output "external_watcher_client_id" {
  value = module.external_watcher.client_id
}

output "external_watcher_tenant_id" {
  value = module.external_watcher.tenant_id
}
