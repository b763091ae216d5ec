# The state table: partition key pk = job name, sort key sk = "<kind>#<id>"; the by-kind index
# serves queries across jobs (every status record in one query); the sparse by-due-at and
# by-watch-due indexes serve the watcher's due query (the status records whose due_at /
# watch_due number is due: a check reads what is late, not every job). TTL on "ttl"
# (written from each record's expire_at), point-in-time recovery, on-demand capacity.
# The layout must match cronwarden.adapters.aws.store.table_definition.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 7.0"
    }
  }
}

variable "table_name" {
  type = string
}

variable "point_in_time_recovery" {
  description = "Continuous backups of the run records (35 days)."
  type        = bool
  default     = true
}

variable "deletion_protection" {
  type    = bool
  default = false
}

resource "aws_dynamodb_table" "state" {
  # checkov:skip=CKV_AWS_119:Run records hold no secret; encrypted at rest with the AWS-owned key.
  name                        = var.table_name
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = var.deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }
  attribute {
    name = "sk"
    type = "S"
  }
  attribute {
    name = "k"
    type = "S"
  }
  attribute {
    name = "jk"
    type = "S"
  }
  attribute {
    name = "due_at"
    type = "N"
  }
  attribute {
    name = "watch_due"
    type = "N"
  }

  global_secondary_index {
    name            = "by-kind"
    hash_key        = "k"
    range_key       = "jk"
    projection_type = "ALL"
  }

  global_secondary_index {
    name            = "by-due-at"
    hash_key        = "k"
    range_key       = "due_at"
    projection_type = "ALL"
  }

  global_secondary_index {
    name            = "by-watch-due"
    hash_key        = "k"
    range_key       = "watch_due"
    projection_type = "ALL"
  }

  ttl {
    attribute_name = "ttl"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  server_side_encryption {
    enabled = true
  }
}

output "table_name" {
  value = aws_dynamodb_table.state.name
}

output "table_arn" {
  value = aws_dynamodb_table.state.arn
}
