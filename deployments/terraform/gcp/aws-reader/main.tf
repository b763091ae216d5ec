# Access for a liveness watcher that runs on AWS (a Lambda function): a workload identity pool
# with an AWS provider trusting one AWS account, whose watcher role (and only that role) may
# impersonate a service account allowed to read/write job status records (Firestore) and to
# peek the dead-letter subscription. The Lambda presents a GetCallerIdentity request signed
# with its role's short-lived credentials; no key is ever created, nothing secret is in state.

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

variable "project_number" {
  type = string
}

variable "name" {
  description = "Pool and service account id (6-30 characters)."
  type        = string
}

variable "aws_account_id" {
  description = "The 12-digit AWS account running the watcher."
  type        = string

  validation {
    condition     = can(regex("^[0-9]{12}$", var.aws_account_id))
    error_message = "aws_account_id is the 12-digit AWS account id."
  }
}

variable "aws_role_name" {
  description = "The watcher Lambda's execution role (output watcher_role_name of the AWS watcher root module)."
  type        = string
}

variable "dead_letter_subscription" {
  type = string
}

locals {
  # What a Lambda's assumed-role ARN maps to (the session name, the function, is dropped).
  aws_role = "arn:aws:sts::${var.aws_account_id}:assumed-role/${var.aws_role_name}"
}

resource "google_iam_workload_identity_pool" "this" {
  project                   = var.project
  workload_identity_pool_id = var.name
  display_name              = "cronwarden external watcher"
}

resource "google_iam_workload_identity_pool_provider" "aws" {
  # checkov:skip=CKV_GCP_125:An AWS provider has no oidc block, which this GitHub Actions check reads unconditionally; the attribute_condition pins one role of one account.
  project                            = var.project
  workload_identity_pool_id          = google_iam_workload_identity_pool.this.workload_identity_pool_id
  workload_identity_pool_provider_id = "aws"
  attribute_mapping = {
    "google.subject"     = "assertion.arn"
    "attribute.aws_role" = "assertion.arn.contains('assumed-role') ? assertion.arn.extract('{account_arn}assumed-role/') + 'assumed-role/' + assertion.arn.extract('assumed-role/{role_name}/') : assertion.arn"
  }
  attribute_condition = "attribute.aws_role == \"${local.aws_role}\""
  aws {
    account_id = var.aws_account_id
  }
}

resource "google_service_account" "this" {
  project      = var.project
  account_id   = var.name
  display_name = "cronwarden external watcher (AWS)"
}

resource "google_service_account_iam_member" "federation" {
  service_account_id = google_service_account.this.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principalSet://iam.googleapis.com/projects/${var.project_number}/locations/global/workloadIdentityPools/${google_iam_workload_identity_pool.this.workload_identity_pool_id}/attribute.aws_role/${local.aws_role}"
}

resource "google_project_iam_member" "firestore" {
  project = var.project
  role    = "roles/datastore.user"
  member  = google_service_account.this.member
}

resource "google_pubsub_subscription_iam_member" "dead_letters" {
  for_each     = toset(["roles/pubsub.subscriber", "roles/pubsub.viewer"])
  project      = var.project
  subscription = var.dead_letter_subscription
  role         = each.value
  member       = google_service_account.this.member
}

output "service_account_email" {
  value = google_service_account.this.email
}

output "provider_name" {
  value = google_iam_workload_identity_pool_provider.aws.name
}

output "credential_config" {
  description = "The external_account credential configuration of the watcher (no key: the Lambda's role credentials sign a GetCallerIdentity request)."
  value = jsonencode({
    type                              = "external_account"
    audience                          = "//iam.googleapis.com/${google_iam_workload_identity_pool_provider.aws.name}"
    subject_token_type                = "urn:ietf:params:aws:token-type:aws4_request"
    token_url                         = "https://sts.googleapis.com/v1/token"
    service_account_impersonation_url = "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${google_service_account.this.email}:generateAccessToken"
    credential_source = {
      environment_id                 = "aws1"
      regional_cred_verification_url = "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"
    }
  })
}
