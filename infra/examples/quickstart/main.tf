# floe quickstart: an SQS queue of JSON records -> the writer -> the Glue
# table bronze.events, plus HTTP ingest: the IAM-authenticated function URL
# (SigV4) and an API Gateway HTTP API with a bearer token.

locals {
  writer_timeout = 60
}

# --- the source: an SQS queue producers send JSON records to ------------------

resource "aws_sqs_queue" "events_dlq" {
  name                      = "${var.name}-events-dlq"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
}

resource "aws_sqs_queue" "events" {
  name = "${var.name}-events"
  # Lambda's guidance for an SQS event source: 6 x the function timeout.
  visibility_timeout_seconds = 6 * local.writer_timeout
  message_retention_seconds  = 345600
  sqs_managed_sse_enabled    = true

  # A message whose batch keeps failing (floe dead-letters bad records
  # itself, so this means S3, SQS or Glue kept failing) ends up here.
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.events_dlq.arn
    maxReceiveCount     = 5
  })
}

# --- the bearer token of the HTTP API -------------------------------------------
# Requests through API Gateway carry no IAM identity, so the function admits
# them by this token; the function URL needs none (SigV4 callers get in).

data "aws_secretsmanager_random_password" "http_token" {
  password_length     = 40
  exclude_punctuation = true
}

resource "aws_secretsmanager_secret" "http_token" {
  #checkov:skip=CKV2_AWS_57:A static bearer token for a demo; rotate it by writing a new secret version.
  #checkov:skip=CKV_AWS_149:The example keeps to the aws/secretsmanager key; pass a CMK with secret_kms_key_arn in real deployments.
  name_prefix             = "${var.name}-http-token-"
  description             = "Bearer token of floe's HTTP ingest API"
  recovery_window_in_days = 0
}

resource "aws_secretsmanager_secret_version" "http_token" {
  secret_id     = aws_secretsmanager_secret.http_token.id
  secret_string = data.aws_secretsmanager_random_password.http_token.random_password

  # The data source draws a new password at every plan; keep the first one.
  lifecycle {
    ignore_changes = [secret_string]
  }
}

# --- alarms to e-mail (optional) --------------------------------------------------

resource "aws_sns_topic" "alarms" {
  count = var.alarm_email == "" ? 0 : 1

  name              = "${var.name}-alarms"
  kms_master_key_id = "alias/aws/sns"
}

resource "aws_sns_topic_subscription" "alarms" {
  count = var.alarm_email == "" ? 0 : 1

  topic_arn = aws_sns_topic.alarms[0].arn
  protocol  = "email"
  endpoint  = var.alarm_email
}

# --- floe ---------------------------------------------------------------------------

module "floe" {
  source = "../../modules/floe"

  name          = var.name
  artifacts_dir = var.artifacts_dir
  architecture  = var.architecture

  # A throwaway stack: destroy removes the bucket with its tables.
  force_destroy = true

  catalog_type   = "glue"
  glue_databases = ["bronze"]
  floe_toml      = file("${path.module}/floe.toml")

  sqs_sources = {
    events = {
      queue_arn                          = aws_sqs_queue.events.arn
      batch_size                         = 1000
      maximum_batching_window_in_seconds = 10
    }
  }
  writer_timeout = local.writer_timeout

  http_token_secret_arn = aws_secretsmanager_secret.http_token.arn
  http_api_gateway      = true

  enable_maintenance = var.enable_maintenance

  alarm_sns_topic_arn = var.alarm_email == "" ? null : aws_sns_topic.alarms[0].arn

  depends_on = [aws_secretsmanager_secret_version.http_token]
}
