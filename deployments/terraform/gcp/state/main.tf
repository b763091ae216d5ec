# Firestore for cronwarden's records: the database, the TTL policy on `expire_at`, the composite
# indexes the store's queries need, and index exemptions for fields never queried. The index
# data comes from `cronwarden.adapters.gcp.indexes.index_config()` (rendered into the root module).

terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
  }
}

variable "project" {
  type = string
}

variable "location" {
  description = "Firestore location (e.g. eur3, nam5, europe-west1)."
  type        = string
}

variable "database" {
  description = "Database id; \"(default)\" is the project's default database."
  type        = string
  default     = "(default)"
}

variable "create_database" {
  description = "Create the database (false when it exists already)."
  type        = bool
  default     = true
}

variable "indexes" {
  description = "Composite indexes: collection and ordered fields."
  type = list(object({
    collection = string
    fields = list(object({
      field_path = string
      order      = string
    }))
  }))
}

variable "field_overrides" {
  description = "Single-field settings: index exemptions (order \"\"), single-field indexes (order ASCENDING) and TTL fields."
  type = list(object({
    collection = string
    field      = string
    ttl        = bool
    order      = string
  }))
}

variable "deletion_protection" {
  type    = bool
  default = true
}

resource "google_firestore_database" "this" {
  count                   = var.create_database ? 1 : 0
  project                 = var.project
  name                    = var.database
  location_id             = var.location
  type                    = "FIRESTORE_NATIVE"
  concurrency_mode        = "OPTIMISTIC"
  delete_protection_state = var.deletion_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy         = var.deletion_protection ? "ABANDON" : "DELETE"
}

locals {
  database = var.create_database ? google_firestore_database.this[0].name : var.database
  indexes  = { for index in var.indexes : "${index.collection}/${join(",", [for f in index.fields : f.field_path])}" => index }
  fields   = { for field in var.field_overrides : "${field.collection}/${field.field}" => field }
}

resource "google_firestore_index" "this" {
  for_each    = local.indexes
  project     = var.project
  database    = local.database
  collection  = each.value.collection
  query_scope = "COLLECTION"

  dynamic "fields" {
    for_each = each.value.fields
    content {
      field_path = fields.value.field_path
      order      = fields.value.order
    }
  }
}

# An empty index_config exempts the field from single-field indexing (an order keeps one index
# in that order: the status records' due fields, which the watcher's due query ranges over);
# ttl_config makes Firestore delete documents once `expire_at` has passed.
resource "google_firestore_field" "this" {
  for_each   = local.fields
  project    = var.project
  database   = local.database
  collection = each.value.collection
  field      = each.value.field

  index_config {
    dynamic "indexes" {
      for_each = each.value.order != "" ? [each.value.order] : []
      content {
        order       = indexes.value
        query_scope = "COLLECTION"
      }
    }
  }

  dynamic "ttl_config" {
    for_each = each.value.ttl ? [1] : []
    content {}
  }
}

output "database" {
  value = local.database
}
