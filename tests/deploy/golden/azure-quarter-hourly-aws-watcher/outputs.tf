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
