# Rendered by `cronwarden deploy render --watcher-provider aws`: the liveness
# watcher of jobs running on Azure, outside their failure domain. It reads their credential
# from Secrets Manager at cold start, by reference (the value never enters Terraform).
locals {
  environment = merge({
    CRONWARDEN_PROVIDER                = "azure"
    CRONWARDEN_AZURE_TABLE_ACCOUNT_URL = "https://${var.azure_storage_account}.table.core.windows.net/"
    CRONWARDEN_AZURE_TABLE             = "cronwarden"
    CRONWARDEN_SERVICEBUS_NAMESPACE    = var.azure_servicebus_namespace
    CRONWARDEN_SERVICEBUS_QUEUE        = "cronwarden-runs"
    AZURE_TENANT_ID                    = var.azure_tenant_id
    AZURE_CLIENT_ID                    = var.azure_watcher_client_id
    CRONWARDEN_AWS_SECRET_ENVIRONMENT  = jsonencode({ AZURE_CLIENT_SECRET = var.azure_client_secret_arn })
  }, var.endpoint_url == "" ? {} : { CRONWARDEN_AWS_ENDPOINT_URL = var.endpoint_url })
}

module "functions" {
  source                 = "./modules/aws/functions"
  prefix                 = "cronwarden"
  functions              = ["watcher"]
  package                = var.package
  runtime                = var.lambda_runtime
  memory_mb              = var.memory_mb
  worker_timeout_seconds = 60
  environment            = local.environment
  secret_arns            = [var.azure_client_secret_arn]
  webhook_secret_arn     = var.webhook_secret_arn
  log_retention_days     = var.log_retention_days
}

module "schedules" {
  source             = "./modules/aws/schedules"
  prefix             = "cronwarden"
  jobs               = {}
  with_jobs          = false
  watcher_arn        = module.functions.function_arns["watcher"]
  watcher_expression = var.watcher_expression
}

module "monitoring" {
  source                = "./modules/aws/monitoring"
  prefix                = "cronwarden"
  dead_letter_queues    = ["cronwarden-schedules-dlq"]
  alert_email           = var.alert_email
  watcher_function_name = "cronwarden-watcher"
  watcher_log_group     = module.functions.log_group_names["watcher"]
}
