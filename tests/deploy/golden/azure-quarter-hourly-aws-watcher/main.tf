# Rendered by `cronwarden deploy render --provider azure` from the job definitions.
# Re-render after changing a job; edit the modules under modules/ only to change the
# shape of the deployment.
locals {
  jobs = {
    "quarter-hourly-sync" = {
      cron                = "*/15 * * * *"
      time_zone           = "UTC"
      ncrontab_utc        = "0 */15 * * * *"
      max_runtime_seconds = 120
      max_attempts        = 8
      min_backoff_seconds = 5
      max_backoff_seconds = 120
      schedule_setting    = "CRONWARDEN_SCHEDULE_QUARTER_HOURLY_SYNC"
    }
  }
  storage_account = "${replace(var.name, "-", "")}${var.suffix}"
  function_app    = "${var.name}-${var.suffix}"
  servicebus      = "${var.name}-${var.suffix}"
  servicebus_fqdn = "${var.name}-${var.suffix}.servicebus.windows.net"
  app_settings = {
    CRONWARDEN_PROVIDER                           = "azure"
    CRONWARDEN_FUNCTIONS                          = "trigger,worker"
    CRONWARDEN_AZURE_TABLE_ACCOUNT_URL            = module.base.table_endpoint
    CRONWARDEN_AZURE_TABLE                        = module.base.table_name
    CRONWARDEN_SERVICEBUS_NAMESPACE               = local.servicebus_fqdn
    CRONWARDEN_SERVICEBUS_QUEUE                   = "cronwarden-runs"
    CRONWARDEN_SERVICEBUS_MAX_DELIVERIES          = tostring(module.settings.servicebus.max_delivery_count)
    ServiceBusConnection__fullyQualifiedNamespace = local.servicebus_fqdn
    CRONWARDEN_WATCHER_SCHEDULE                   = var.watcher_schedule
  }
}

module "settings" {
  source = "./modules/common/settings"
  jobs   = local.jobs
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

# Per job: CRONWARDEN_SCHEDULE_<JOB> = NCRONTAB in UTC (see README.md).
module "app" {
  source               = "./modules/azure/function-app"
  name                 = local.function_app
  resource_group_name  = module.base.resource_group_name
  location             = var.location
  sku_name             = var.sku_name
  storage_account_name = module.base.storage_account_name
  storage_account_id   = module.base.storage_account_id
  app_settings         = merge(local.app_settings, module.settings.schedule_settings)
  tags                 = var.tags
}

module "servicebus" {
  source              = "./modules/azure/servicebus"
  name                = local.servicebus
  resource_group_name = module.base.resource_group_name
  location            = var.location
  queue_name          = "cronwarden-runs"
  max_delivery_count  = module.settings.servicebus.max_delivery_count
  lock_duration       = module.settings.servicebus.lock_duration
  senders = {
    app = module.app.principal_id
  }
  receivers = {
    app = module.app.principal_id
  }
  tags = var.tags
}

module "monitoring" {
  source              = "./modules/azure/monitoring"
  name                = local.function_app
  resource_group_name = module.base.resource_group_name
  namespace_id        = module.servicebus.namespace_id
  queue_name          = module.servicebus.queue_name
  alert_emails        = var.alert_emails
  tags                = var.tags
}

module "external_watcher" {
  source             = "./modules/azure/external-principal"
  principal_id       = var.aws_watcher_principal_id
  storage_account_id = module.base.storage_account_id
  queue_id           = module.servicebus.queue_id
}
