# Rendered by `cronwarden deploy render --watcher-provider aws`: the liveness
# watcher of jobs running on GCP, outside their failure domain. It reaches them
# through workload identity federation from its own role (no key).
locals {
  environment = merge({
    CRONWARDEN_PROVIDER                     = "gcp"
    CRONWARDEN_GCP_PROJECT                  = var.gcp_project
    CRONWARDEN_GCP_TOPIC                    = "cronwarden-runs"
    CRONWARDEN_GCP_SUBSCRIPTION             = "cronwarden-worker"
    CRONWARDEN_GCP_DEAD_LETTER_TOPIC        = "cronwarden-runs-dead-letter"
    CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION = "cronwarden-worker-dead-letter"
    CRONWARDEN_FIRESTORE_DATABASE           = var.gcp_firestore_database
    CRONWARDEN_FIRESTORE_PREFIX             = "cw_"
    CRONWARDEN_GCP_WIF_PROVIDER             = var.gcp_workload_identity_provider
    CRONWARDEN_GCP_SERVICE_ACCOUNT          = var.gcp_watcher_service_account
    CRONWARDEN_GCP_WIF_SOURCE               = "aws"
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
  secret_arns            = []
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
