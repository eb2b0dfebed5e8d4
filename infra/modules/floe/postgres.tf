# The Postgres source: floe-pg-sync on an EventBridge schedule, one reader of
# the slot at a time (reserved concurrency 1), in the database's VPC, its
# login in Secrets Manager, and alarms on the slot (lag, WAL retained), on
# failed runs and on freshness. The slot and publication are the database's:
# create them with `floe pg setup` (docs/cdc.md, "Postgres source", "Setup").

locals {
  # The pg tables' files and Glue entries: pg_namespace only.
  pg_table_object_arns = var.catalog_type == "glue" ? [
    "${local.warehouse_arn}/${var.pg_namespace}.db/*"
  ] : ["${local.warehouse_arn}/*"]
  pg_metadata_object_arns = var.catalog_type == "glue" ? [
    "${local.warehouse_arn}/${var.pg_namespace}.db/*/metadata/*",
    "${local.warehouse_arn}/${var.pg_namespace}.db/_floe/ledger/*",
  ] : ["${local.warehouse_arn}/*/metadata/*", "${local.warehouse_arn}/*/_floe/ledger/*"]
  pg_glue_database_arn = "arn:${local.partition}:glue:${local.region}:${local.glue_catalog_id}:database/${var.pg_namespace}"
  pg_glue_table_arn    = "arn:${local.partition}:glue:${local.region}:${local.glue_catalog_id}:table/${var.pg_namespace}/*"
  pg_secret_arns       = concat(local.catalog_secret_arns, compact([var.pg_secret_arn]))
}

resource "aws_lambda_function" "pg_sync" {
  #checkov:skip=CKV_AWS_116:Invoked by the schedule with retries off: a failed run changes nothing (the slot stays), and the next scheduled run is the retry; the failure is alarmed on.
  #checkov:skip=CKV_AWS_117:VPC placement is pg_subnet_ids (or vpc_subnet_ids); a database reachable over the internet with TLS needs none.
  #checkov:skip=CKV_AWS_173:The environment holds no secrets (the login is a Secrets Manager ARN, and pg_conninfo refuses a password); Lambda encrypts it at rest with its own key.
  #checkov:skip=CKV_AWS_272:Code signing needs an AWS Signer profile the deployment owns; cargo-lambda zips are built and deployed by the same pipeline.
  count = var.enable_pg_sync ? 1 : 0

  function_name = local.function_names.pg_sync
  description   = "floe pg-sync: a Postgres logical replication slot into keyed Iceberg tables, one bounded run per schedule"
  role          = aws_iam_role.fn["pg_sync"].arn

  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = local.zips.pg_sync
  source_code_hash = filebase64sha256(local.zips.pg_sync)

  memory_size = var.pg_memory
  timeout     = var.pg_timeout
  # One reader of the slot: two runs would read the same changes.
  reserved_concurrent_executions = 1

  environment {
    variables = merge(local.pg_sync_env, { RUST_LOG = var.log_level })
  }

  tracing_config {
    mode = var.tracing_mode
  }

  dynamic "vpc_config" {
    for_each = local.pg_in_vpc ? [1] : []
    content {
      subnet_ids         = local.pg_subnet_ids
      security_group_ids = local.pg_security_group_ids
    }
  }

  tags = var.tags

  depends_on = [aws_cloudwatch_log_group.fn, aws_iam_role_policy.fn]

  lifecycle {
    precondition {
      condition     = var.pg_conninfo != "" && length(var.pg_tables) > 0
      error_message = "enable_pg_sync needs pg_conninfo and pg_tables."
    }
    precondition {
      condition     = var.catalog_type != "glue" || contains(var.glue_databases, var.pg_namespace)
      error_message = "pg_namespace must be one of glue_databases: the roles' Glue and S3 rights stop at those."
    }
    precondition {
      condition     = length(local.pg_subnet_ids) == 0 || length(local.pg_security_group_ids) > 0
      error_message = "pg-sync in a VPC needs security groups (pg_security_group_ids) the database admits."
    }
    precondition {
      condition     = local.env_bytes.pg_sync <= 4096
      error_message = "The pg-sync function's environment is over Lambda's 4 KB (floe_toml is most of it): shorten floe_toml."
    }
  }
}

# A failed run is not retried: the next scheduled run starts from the slot
# and the tables as they are, and a retry would only queue behind it.
resource "aws_lambda_function_event_invoke_config" "pg_sync" {
  count = var.enable_pg_sync ? 1 : 0

  function_name                = aws_lambda_function.pg_sync[0].function_name
  maximum_retry_attempts       = 0
  maximum_event_age_in_seconds = 300
}

resource "aws_cloudwatch_event_rule" "pg_sync" {
  count = var.enable_pg_sync ? 1 : 0

  name                = "${var.name}-pg-sync"
  description         = "floe Postgres slot ${var.pg_slot} into Iceberg"
  schedule_expression = var.pg_schedule
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "pg_sync" {
  count = var.enable_pg_sync ? 1 : 0

  rule = aws_cloudwatch_event_rule.pg_sync[0].name
  arn  = aws_lambda_function.pg_sync[0].arn

  # A run throttled behind the previous one (concurrency 1) is dropped, not
  # queued: the next tick starts from the same place.
  retry_policy {
    maximum_retry_attempts       = 0
    maximum_event_age_in_seconds = 60
  }
}

resource "aws_lambda_permission" "pg_sync" {
  count = var.enable_pg_sync ? 1 : 0

  statement_id  = "AllowSchedule"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.pg_sync[0].function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.pg_sync[0].arn
}

data "aws_iam_policy_document" "pg_sync" {
  count = var.enable_pg_sync ? 1 : 0

  source_policy_documents = [data.aws_iam_policy_document.kms.json]

  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.fn["pg_sync"].arn}:*"]
  }

  # Data, delete and metadata files of its tables; dead letters.
  statement {
    sid       = "WriteTableFilesAndDeadLetters"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]
    resources = concat(local.pg_table_object_arns, ["${local.dlq_arn}/*"])
  }

  # The commit engine deletes metadata files that fall out of the metadata log.
  statement {
    sid       = "DeleteOldMetadata"
    actions   = ["s3:DeleteObject"]
    resources = local.pg_metadata_object_arns
  }

  # Tables are created from the Postgres schema on the first run and evolve
  # with it; each batch is an UpdateTable.
  dynamic "statement" {
    for_each = local.uses_glue ? [1] : []
    content {
      sid = "GlueTablesOfTheNamespace"
      actions = [
        "glue:GetDatabase",
        "glue:CreateDatabase",
        "glue:GetTable",
        "glue:CreateTable",
        "glue:UpdateTable",
      ]
      resources = [local.glue_catalog_arn, local.pg_glue_database_arn, local.pg_glue_table_arn]
    }
  }

  dynamic "statement" {
    for_each = length(local.pg_secret_arns) > 0 ? [1] : []
    content {
      sid       = "LoginAndCatalogSecrets"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = local.pg_secret_arns
    }
  }

  dynamic "statement" {
    for_each = length(local.pg_secret_arns) > 0 && var.secret_kms_key_arn != null ? [1] : []
    content {
      sid       = "SecretKey"
      actions   = ["kms:Decrypt"]
      resources = [var.secret_kms_key_arn]
    }
  }
}

# --- alarms (pg-sync emits its metrics once per run, with function and
# function_name dimensions like every floe function) ---------------------------------

locals {
  pg_alarms = var.create_alarms && var.enable_pg_sync ? {
    slot_lag = {
      metric      = "pg_slot_lag"
      threshold   = var.pg_slot_lag_alarm_bytes
      missing     = "notBreaching"
      description = "floe: slot ${var.pg_slot} is over ${var.pg_slot_lag_alarm_bytes} bytes of WAL behind the server; the sync is falling behind or not running."
    }
    wal_retained = {
      metric      = "pg_wal_retained"
      threshold   = var.pg_wal_retained_alarm_bytes
      missing     = "notBreaching"
      description = "floe: the database keeps over ${var.pg_wal_retained_alarm_bytes} bytes of WAL for slot ${var.pg_slot}; left alone it fills the disk or, past max_slot_wal_keep_size, loses the slot (then `floe pg resync`)."
    }
    # No runs, no datapoints: a stalled schedule is stale data too.
    freshness = {
      metric      = "pg_oldest_uncommitted_change_age"
      threshold   = var.pg_freshness_alarm_ms
      missing     = "breaching"
      description = "floe: the oldest Postgres change not yet in Iceberg is over ${var.pg_freshness_alarm_ms} ms old, or pg-sync reported nothing for 10 minutes."
    }
  } : {}
}

resource "aws_cloudwatch_metric_alarm" "pg" {
  for_each = local.pg_alarms

  alarm_name          = "${var.name}-pg-${replace(each.key, "_", "-")}"
  alarm_description   = each.value.description
  namespace           = local.emf_namespace
  metric_name         = each.value.metric
  dimensions          = local.emf_dimensions["pg-sync"]
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 2
  datapoints_to_alarm = 2
  threshold           = each.value.threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = each.value.missing
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# Lambda's Errors: a run that failed (connection, TLS, a lost slot, a
# catalog outage), crashed or timed out; the log says which.
resource "aws_cloudwatch_metric_alarm" "pg_sync_errors" {
  count = var.create_alarms && var.enable_pg_sync ? 1 : 0

  alarm_name          = "${var.name}-pg-sync-errors"
  alarm_description   = "floe: pg-sync runs failed in two 5-minute periods in a row; nothing reaches the tables and the database keeps WAL for the slot. A lost slot says to run `floe pg resync`."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.pg_sync[0].function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 2
  datapoints_to_alarm = 2
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}
