# The Lambda functions, their log groups, and the checks the module can
# make before anything is created. Code: cargo-lambda's zips,
# <artifacts_dir>/<bin>/bootstrap.zip, on the provided.al2023 runtime.

locals {
  # Keys of the per-function maps (roles, policies, log groups); the
  # committers of shards 1.. are "committer_<i>".
  enabled_functions = merge(
    {
      for fn, enabled in {
        writer      = true
        committer   = true
        ingest      = var.enable_http_ingest
        maintenance = var.enable_maintenance
        pg_sync     = var.enable_pg_sync
      } : fn => enabled if enabled
    },
    { for key in local.extra_committer_keys : key => true },
  )

  zips = {
    writer      = "${var.artifacts_dir}/floe-writer/bootstrap.zip"
    committer   = "${var.artifacts_dir}/floe-committer/bootstrap.zip"
    ingest      = "${var.artifacts_dir}/floe-ingest-http/bootstrap.zip"
    maintenance = "${var.artifacts_dir}/floe-maintenance/bootstrap.zip"
    pg_sync     = "${var.artifacts_dir}/floe-pg-sync/bootstrap.zip"
  }

  # Lambda refuses more than 4 KB of environment (names and values) per function.
  env_bytes = {
    writer      = sum([for k, v in local.writer_env : length(k) + length(v)]) + 8 + length(var.log_level)
    committer   = sum([for k, v in local.committer_env : length(k) + length(v)]) + 8 + length(var.log_level)
    ingest      = sum([for k, v in local.ingest_env : length(k) + length(v)]) + 8 + length(var.log_level)
    maintenance = sum([for k, v in local.maintenance_env : length(k) + length(v)]) + 8 + length(var.log_level)
    pg_sync     = sum([for k, v in local.pg_sync_env : length(k) + length(v)]) + 8 + length(var.log_level)
  }
}

resource "aws_cloudwatch_log_group" "fn" {
  #checkov:skip=CKV_AWS_158:KMS encryption of the logs is var.log_kms_key_arn; CloudWatch Logs encrypts at rest either way, and the logs hold no record contents.
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (default 30): operational logs, not an audit trail.
  for_each = local.enabled_functions

  name              = "/aws/lambda/${local.function_names[each.key]}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.log_kms_key_arn
  tags              = var.tags
}

# --- writer --------------------------------------------------------------------------------

resource "aws_lambda_function" "writer" {
  #checkov:skip=CKV_AWS_116:The writer is invoked synchronously by event source mappings, which keep failed batches in their source (SQS redrive, stream retries, the stream failure queue); a function DLQ only applies to asynchronous invocations.
  #checkov:skip=CKV_AWS_117:VPC placement is optional (var.vpc_subnet_ids); the writer only needs S3, SQS, Glue and its sources.
  #checkov:skip=CKV_AWS_173:The environment holds no secrets (secrets are Secrets Manager ARNs resolved at start); Lambda encrypts it at rest with its own key.
  #checkov:skip=CKV_AWS_272:Code signing needs an AWS Signer profile the deployment owns; cargo-lambda zips are built and deployed by the same pipeline.
  function_name = local.function_names.writer
  description   = "floe writer: source batches to Parquet on S3 and a commit request on SQS"
  role          = aws_iam_role.fn["writer"].arn

  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = local.zips.writer
  source_code_hash = filebase64sha256(local.zips.writer)

  memory_size                    = var.writer_memory
  timeout                        = var.writer_timeout
  reserved_concurrent_executions = var.writer_reserved_concurrency

  environment {
    variables = merge(local.writer_env, { RUST_LOG = var.log_level })
  }

  tracing_config {
    mode = var.tracing_mode
  }

  dynamic "vpc_config" {
    for_each = local.in_vpc ? [1] : []
    content {
      subnet_ids         = var.vpc_subnet_ids
      security_group_ids = var.vpc_security_group_ids
    }
  }

  tags = var.tags

  depends_on = [aws_cloudwatch_log_group.fn, aws_iam_role_policy.fn]

  lifecycle {
    # The checks that span several inputs live here, on the one resource
    # every deployment has.
    precondition {
      condition     = var.create_bucket || var.bucket_name != ""
      error_message = "bucket_name is required when create_bucket is false."
    }
    precondition {
      condition     = var.catalog_type != "glue" || length(var.glue_databases) > 0
      error_message = "catalog_type \"glue\" needs glue_databases: the databases floe may write (its Glue and S3 rights are scoped to them)."
    }
    precondition {
      condition     = var.catalog_type != "rest" || var.rest_uri != ""
      error_message = "catalog_type \"rest\" needs rest_uri."
    }
    precondition {
      condition     = var.rest_credential_secret_arn == "" || var.rest_client_id != ""
      error_message = "rest_credential_secret_arn (the OAuth2 client secret) goes with rest_client_id."
    }
    precondition {
      condition     = var.rest_credential_secret_arn == "" || var.rest_token_secret_arn == ""
      error_message = "Give rest_credential_secret_arn (OAuth2) or rest_token_secret_arn (fixed token), not both."
    }
    precondition {
      condition     = var.rest_sigv4_service == "" || var.catalog_type == "rest"
      error_message = "rest_sigv4_service applies to catalog_type \"rest\" only."
    }
    precondition {
      condition     = can(regex("routing", var.floe_toml))
      error_message = "floe_toml must configure [routing] (routing.table, or routing.template with a mode): the writer refuses to start without it."
    }
    precondition {
      condition     = local.env_bytes.writer <= 4096
      error_message = "The writer's environment is over Lambda's 4 KB (floe_toml is most of it): shorten floe_toml."
    }
    precondition {
      condition     = length(var.vpc_subnet_ids) == 0 || length(var.vpc_security_group_ids) > 0
      error_message = "vpc_subnet_ids needs vpc_security_group_ids."
    }
  }
}

# --- committer -----------------------------------------------------------------------------

resource "aws_lambda_function" "committer" {
  #checkov:skip=CKV_AWS_116:The committer is invoked synchronously by the commit queue's event source mapping; SQS redrive (maxReceiveCount) moves requests that keep failing to the commit DLQ.
  #checkov:skip=CKV_AWS_117:VPC placement is optional (var.vpc_subnet_ids); the committer only needs S3, SQS and the catalog.
  #checkov:skip=CKV_AWS_173:The environment holds no secrets (secrets are Secrets Manager ARNs resolved at start); Lambda encrypts it at rest with its own key.
  #checkov:skip=CKV_AWS_272:Code signing needs an AWS Signer profile the deployment owns; cargo-lambda zips are built and deployed by the same pipeline.
  # One per shard of the commit queue, each reading only its own.
  count = var.commit_queue_shards

  function_name = local.function_names[local.committer_keys[count.index]]
  description   = var.commit_queue_shards == 1 ? "floe committer: coalesces commit requests into Iceberg snapshots, exactly once" : "floe committer of commit queue shard ${count.index} of ${var.commit_queue_shards}: coalesces commit requests into Iceberg snapshots, exactly once"
  role          = aws_iam_role.fn[local.committer_keys[count.index]].arn

  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = local.zips.committer
  source_code_hash = filebase64sha256(local.zips.committer)

  memory_size = var.committer_memory
  timeout     = var.committer_timeout
  # One committer per shard at a time: it coalesces everything pending per
  # table and commits optimistically; a second one on the same tables would
  # only produce conflicts.
  reserved_concurrent_executions = 1

  environment {
    # Its own shard: the one it reads (FLOE_QUEUE_URLS lists them all).
    variables = merge(local.committer_env, { FLOE_QUEUE_URL = aws_sqs_queue.commits[count.index].url, RUST_LOG = var.log_level })
  }

  tracing_config {
    mode = var.tracing_mode
  }

  dynamic "vpc_config" {
    for_each = local.in_vpc ? [1] : []
    content {
      subnet_ids         = var.vpc_subnet_ids
      security_group_ids = var.vpc_security_group_ids
    }
  }

  tags = var.tags

  depends_on = [aws_cloudwatch_log_group.fn, aws_iam_role_policy.fn]

  lifecycle {
    precondition {
      condition     = local.env_bytes.committer <= 4096
      error_message = "The committer's environment is over Lambda's 4 KB (floe_toml is most of it, then FLOE_QUEUE_URLS): shorten floe_toml."
    }
  }
}

moved {
  from = aws_lambda_function.committer
  to   = aws_lambda_function.committer[0]
}

# --- HTTP ingest ---------------------------------------------------------------------------

resource "aws_lambda_function" "ingest" {
  #checkov:skip=CKV_AWS_116:The HTTP function is invoked synchronously (function URL, API Gateway); the client gets the error and retries with its Idempotency-Key.
  #checkov:skip=CKV_AWS_117:VPC placement is optional (var.vpc_subnet_ids); the function only needs S3, SQS, Kinesis (the HTTP buffer stream), the catalog and Secrets Manager.
  #checkov:skip=CKV_AWS_173:The environment holds no secrets: FLOE_HTTP_TOKEN is blank or the ARN of a Secrets Manager secret resolved at start; Lambda encrypts it at rest with its own key.
  #checkov:skip=CKV_AWS_272:Code signing needs an AWS Signer profile the deployment owns; cargo-lambda zips are built and deployed by the same pipeline.
  count = var.enable_http_ingest ? 1 : 0

  function_name = local.function_names.ingest
  description   = "floe HTTP ingest: POST /v1/tables/{namespace}/{table}/records"
  role          = aws_iam_role.fn["ingest"].arn

  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = local.zips.ingest
  source_code_hash = filebase64sha256(local.zips.ingest)

  memory_size                    = var.ingest_memory
  timeout                        = var.ingest_timeout
  reserved_concurrent_executions = var.ingest_reserved_concurrency

  environment {
    variables = merge(local.ingest_env, { RUST_LOG = var.log_level })
  }

  tracing_config {
    mode = var.tracing_mode
  }

  dynamic "vpc_config" {
    for_each = local.in_vpc ? [1] : []
    content {
      subnet_ids         = var.vpc_subnet_ids
      security_group_ids = var.vpc_security_group_ids
    }
  }

  tags = var.tags

  depends_on = [aws_cloudwatch_log_group.fn, aws_iam_role_policy.fn]

  lifecycle {
    # The function URL (AWS_IAM) needs no token: the function lets in any
    # request whose event carries the IAM identity Lambda authenticated.
    # API Gateway's requests carry none, so there the bearer token is the
    # only way in.
    precondition {
      condition     = !var.http_api_gateway || var.http_token_secret_arn != ""
      error_message = "http_api_gateway needs http_token_secret_arn: requests through API Gateway carry no IAM identity, so the function admits only those with the bearer token."
    }
    precondition {
      condition     = var.ingest_timeout > var.http_wait_seconds
      error_message = "ingest_timeout must exceed http_wait_seconds (?wait=commit waits that long)."
    }
    precondition {
      condition     = local.env_bytes.ingest <= 4096
      error_message = "The HTTP function's environment is over Lambda's 4 KB (floe_toml is most of it): shorten floe_toml."
    }
  }
}

# --- maintenance ---------------------------------------------------------------------------

resource "aws_lambda_function" "maintenance" {
  #checkov:skip=CKV_AWS_117:VPC placement is optional (var.vpc_subnet_ids); maintenance only needs S3 and the catalog.
  #checkov:skip=CKV_AWS_173:The environment holds no secrets (secrets are Secrets Manager ARNs resolved at start); Lambda encrypts it at rest with its own key.
  #checkov:skip=CKV_AWS_272:Code signing needs an AWS Signer profile the deployment owns; cargo-lambda zips are built and deployed by the same pipeline.
  count = var.enable_maintenance ? 1 : 0

  function_name = local.function_names.maintenance
  description   = "floe maintenance: compaction, manifest merging, snapshot expiry, orphan cleanup"
  role          = aws_iam_role.fn["maintenance"].arn

  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = local.zips.maintenance
  source_code_hash = filebase64sha256(local.zips.maintenance)

  memory_size = var.maintenance_memory
  timeout     = var.maintenance_timeout
  # One run at a time: two would plan the same compaction and one would give up.
  reserved_concurrent_executions = 1

  environment {
    variables = merge(local.maintenance_env, { RUST_LOG = var.log_level })
  }

  # Invoked asynchronously by EventBridge: a run that fails lands here.
  dead_letter_config {
    target_arn = aws_sqs_queue.maintenance_dlq[0].arn
  }

  tracing_config {
    mode = var.tracing_mode
  }

  dynamic "vpc_config" {
    for_each = local.in_vpc ? [1] : []
    content {
      subnet_ids         = var.vpc_subnet_ids
      security_group_ids = var.vpc_security_group_ids
    }
  }

  tags = var.tags

  depends_on = [aws_cloudwatch_log_group.fn, aws_iam_role_policy.fn]

  lifecycle {
    # A commit request waits in the queue, then in its DLQ, before it is
    # committed; its data files look like orphans all that time.
    precondition {
      condition     = var.orphan_window_seconds >= max(var.commit_queue_retention_seconds, var.dlq_retention_seconds)
      error_message = "orphan_window_seconds (${var.orphan_window_seconds}) is shorter than the commit queue's or its DLQ's retention (${max(var.commit_queue_retention_seconds, var.dlq_retention_seconds)}): orphan cleanup would delete the files of requests still waiting or redriven. Raise it to at least that (the default covers both, one after the other)."
    }
    precondition {
      condition     = local.env_bytes.maintenance <= 4096
      error_message = "The maintenance function's environment is over Lambda's 4 KB (floe_toml is most of it): shorten floe_toml."
    }
  }
}

# A failed run is not retried: the next scheduled run starts from the table's
# new state anyway, and a retry could overlap it.
resource "aws_lambda_function_event_invoke_config" "maintenance" {
  count = var.enable_maintenance ? 1 : 0

  function_name                = aws_lambda_function.maintenance[0].function_name
  maximum_retry_attempts       = 0
  maximum_event_age_in_seconds = 3600
}
