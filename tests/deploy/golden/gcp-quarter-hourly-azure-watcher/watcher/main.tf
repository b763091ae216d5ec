# Rendered by `cronwarden deploy render --watcher-provider azure`: the liveness
# watcher of jobs running on GCP, outside their failure domain. It reaches Firestore
# and the dead-letter subscription through workload identity federation (no key).
locals {
  storage_account = "${replace(var.name, "-", "")}${var.suffix}"
  function_app    = "${var.name}-${var.suffix}"
  servicebus      = "${var.name}-${var.suffix}"
  servicebus_fqdn = "${var.name}-${var.suffix}.servicebus.windows.net"
  app_settings = {
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
    CRONWARDEN_GCP_WIF_AUDIENCE             = var.gcp_watcher_audience
    CRONWARDEN_FUNCTIONS                    = "watcher"
    CRONWARDEN_WATCHER_SCHEDULE             = var.watcher_schedule
  }
}

module "base" {
  source                = "./modules/azure/base"
  name                  = var.name
  location              = var.location
  resource_group_name   = var.resource_group_name
  create_resource_group = var.create_resource_group
  storage_account_name  = local.storage_account
  tags                  = var.tags
}

module "app" {
  source                    = "./modules/azure/function-app"
  name                      = local.function_app
  resource_group_name       = module.base.resource_group_name
  location                  = var.location
  sku_name                  = var.sku_name
  storage_account_name      = module.base.storage_account_name
  storage_account_id        = module.base.storage_account_id
  app_settings              = local.app_settings
  key_vault_secret_settings = { for setting, vault in { CRONWARDEN_WEBHOOK_URL = var.webhook_key_vault_id } : setting => { key_vault_id = vault, secret_name = var.webhook_secret_name } if vault != "" }
  tags                      = var.tags
}
