# Plan-and-apply tests of the module against a mocked AWS provider: no
# credentials, no AWS calls, only the provider's schema.
#
#   terraform -chdir=infra/modules/floe init -backend=false
#   terraform -chdir=infra/modules/floe test
#
# tests/artifacts holds empty stand-ins for cargo-lambda's zips.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_region" {
    defaults = { name = "eu-west-1" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{}" }
  }
  mock_resource "aws_sqs_queue" {
    defaults = {
      url = "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits"
      arn = "arn:aws:sqs:eu-west-1:123456789012:floe-commits"
    }
  }
  mock_resource "aws_s3_bucket" {
    defaults = { id = "floe-warehouse-abc" }
  }
  mock_resource "aws_cloudwatch_log_group" {
    defaults = { arn = "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/x" }
  }
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/x" }
  }
  mock_resource "aws_lambda_function" {
    defaults = { arn = "arn:aws:lambda:eu-west-1:123456789012:function:x" }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:eu-west-1:123456789012:rule/x" }
  }
  mock_resource "aws_apigatewayv2_api" {
    defaults = { execution_arn = "arn:aws:execute-api:eu-west-1:123456789012:abc" }
  }
  mock_resource "aws_kinesis_stream" {
    defaults = { arn = "arn:aws:kinesis:eu-west-1:123456789012:stream/floe-http-buffer" }
  }
}

variables {
  artifacts_dir         = "./tests/artifacts"
  glue_databases        = ["bronze"]
  floe_toml             = "[routing]\ntable = \"bronze.events\"\n"
  http_token_secret_arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tok-abc123"
}

run "defaults" {
  command = apply

  assert {
    condition     = aws_lambda_function.writer.environment[0].variables["FLOE_WAREHOUSE_URI"] == "s3://floe-warehouse-abc/warehouse"
    error_message = "warehouse uri: ${aws_lambda_function.writer.environment[0].variables["FLOE_WAREHOUSE_URI"]}"
  }
  assert {
    condition     = aws_lambda_function.writer.environment[0].variables["RUST_LOG"] == "info"
    error_message = "RUST_LOG"
  }
  assert {
    condition     = aws_lambda_function.committer[0].environment[0].variables["FLOE_QUEUE_CLAIM_PREFIX"] == "s3://floe-warehouse-abc/warehouse/_floe/claims"
    error_message = "claims"
  }
  assert {
    condition     = aws_lambda_function.ingest[0].environment[0].variables["FLOE_HTTP_MAX_BODY_BYTES"] == "5242880"
    error_message = "max body"
  }
  assert {
    condition     = aws_lambda_function.maintenance[0].environment[0].variables["FLOE_MAINTENANCE_TABLES"] == ""
    error_message = "maintenance tables"
  }
  assert {
    condition     = aws_lambda_function.writer.environment[0].variables["FLOE_CATALOG_CATALOG_ID"] == "123456789012"
    error_message = "catalog id"
  }
  assert {
    condition     = aws_sqs_queue.commits[0].visibility_timeout_seconds == 1830
    error_message = "visibility"
  }
  assert {
    condition     = aws_lambda_event_source_mapping.commits[0].batch_size == 10000 && aws_lambda_event_source_mapping.commits[0].maximum_batching_window_in_seconds == 5
    error_message = "committer batching"
  }
  assert {
    condition     = aws_lambda_function.committer[0].reserved_concurrent_executions == 1
    error_message = "committer concurrency"
  }
  # One shard: the unsharded module's queue, names and environment.
  assert {
    condition = (
      length(aws_sqs_queue.commits) == 1 && length(aws_lambda_function.committer) == 1 &&
      aws_sqs_queue.commits[0].name == "floe-commits" && aws_sqs_queue.commits_dlq[0].name == "floe-commits-dlq" &&
      aws_lambda_function.committer[0].function_name == "floe-committer" &&
      aws_lambda_function.writer.environment[0].variables["FLOE_QUEUE_URL"] == "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits" &&
      aws_lambda_function.writer.environment[0].variables["FLOE_QUEUE_URLS"] == "" &&
      aws_lambda_function.committer[0].environment[0].variables["FLOE_QUEUE_URLS"] == ""
    )
    error_message = "one shard"
  }
  # The env-var contract of docs/deploy.md, name for name.
  assert {
    condition     = toset(keys(aws_lambda_function.writer.environment[0].variables)) == toset(["FLOE_CONFIG_TOML", "FLOE_WAREHOUSE_URI", "FLOE_AWS_REGION", "FLOE_CATALOG_TYPE", "FLOE_CATALOG_CATALOG_ID", "FLOE_CATALOG_URI", "FLOE_CATALOG_PREFIX", "FLOE_CATALOG_TOKEN", "FLOE_CATALOG_CLIENT_ID", "FLOE_CATALOG_CLIENT_SECRET", "FLOE_CATALOG_OAUTH2_SERVER_URI", "FLOE_CATALOG_SCOPE", "FLOE_CATALOG_SIGV4_SERVICE", "FLOE_DEAD_LETTER_LOCATION", "FLOE_QUEUE_URL", "FLOE_QUEUE_URLS", "FLOE_QUEUE_CLAIM_PREFIX", "FLOE_QUEUE_RETENTION_SECONDS", "FLOE_QUEUE_DLQ_RETENTION_SECONDS", "FLOE_QUEUE_TABLE_CONCURRENCY", "FLOE_KINESIS_PER_RECORD", "FLOE_HTTP_BUFFER_STREAM", "RUST_LOG"])
    error_message = "writer environment: ${join(",", keys(aws_lambda_function.writer.environment[0].variables))}"
  }
  assert {
    condition     = toset(keys(aws_lambda_function.committer[0].environment[0].variables)) == toset(["FLOE_CONFIG_TOML", "FLOE_WAREHOUSE_URI", "FLOE_AWS_REGION", "FLOE_CATALOG_TYPE", "FLOE_CATALOG_CATALOG_ID", "FLOE_CATALOG_URI", "FLOE_CATALOG_PREFIX", "FLOE_CATALOG_TOKEN", "FLOE_CATALOG_CLIENT_ID", "FLOE_CATALOG_CLIENT_SECRET", "FLOE_CATALOG_OAUTH2_SERVER_URI", "FLOE_CATALOG_SCOPE", "FLOE_CATALOG_SIGV4_SERVICE", "FLOE_DEAD_LETTER_LOCATION", "FLOE_QUEUE_URL", "FLOE_QUEUE_URLS", "FLOE_QUEUE_CLAIM_PREFIX", "FLOE_QUEUE_RETENTION_SECONDS", "FLOE_QUEUE_DLQ_RETENTION_SECONDS", "FLOE_QUEUE_TABLE_CONCURRENCY", "RUST_LOG"])
    error_message = "committer environment: ${join(",", keys(aws_lambda_function.committer[0].environment[0].variables))}"
  }
  assert {
    condition     = toset(keys(aws_lambda_function.ingest[0].environment[0].variables)) == toset(["FLOE_CONFIG_TOML", "FLOE_WAREHOUSE_URI", "FLOE_AWS_REGION", "FLOE_CATALOG_TYPE", "FLOE_CATALOG_CATALOG_ID", "FLOE_CATALOG_URI", "FLOE_CATALOG_PREFIX", "FLOE_CATALOG_TOKEN", "FLOE_CATALOG_CLIENT_ID", "FLOE_CATALOG_CLIENT_SECRET", "FLOE_CATALOG_OAUTH2_SERVER_URI", "FLOE_CATALOG_SCOPE", "FLOE_CATALOG_SIGV4_SERVICE", "FLOE_DEAD_LETTER_LOCATION", "FLOE_QUEUE_URL", "FLOE_QUEUE_URLS", "FLOE_QUEUE_CLAIM_PREFIX", "FLOE_QUEUE_RETENTION_SECONDS", "FLOE_QUEUE_DLQ_RETENTION_SECONDS", "FLOE_QUEUE_TABLE_CONCURRENCY", "FLOE_HTTP_TOKEN", "FLOE_HTTP_MAX_BODY_BYTES", "FLOE_HTTP_WAIT_SECONDS", "FLOE_HTTP_MAX_RECORD_BYTES", "FLOE_HTTP_MAX_NEW_COLUMNS", "FLOE_HTTP_REDACT_VALUES", "FLOE_HTTP_CREATE_TABLES", "FLOE_HTTP_BUFFER_STREAM", "RUST_LOG"])
    error_message = "ingest environment: ${join(",", keys(aws_lambda_function.ingest[0].environment[0].variables))}"
  }
  assert {
    condition     = toset(keys(aws_lambda_function.maintenance[0].environment[0].variables)) == toset(["FLOE_CONFIG_TOML", "FLOE_WAREHOUSE_URI", "FLOE_AWS_REGION", "FLOE_CATALOG_TYPE", "FLOE_CATALOG_CATALOG_ID", "FLOE_CATALOG_URI", "FLOE_CATALOG_PREFIX", "FLOE_CATALOG_TOKEN", "FLOE_CATALOG_CLIENT_ID", "FLOE_CATALOG_CLIENT_SECRET", "FLOE_CATALOG_OAUTH2_SERVER_URI", "FLOE_CATALOG_SCOPE", "FLOE_CATALOG_SIGV4_SERVICE", "FLOE_DEAD_LETTER_LOCATION", "FLOE_MAINTENANCE_TABLES", "FLOE_MAINTENANCE_ORPHAN_WINDOW_SECONDS", "FLOE_QUEUE_RETENTION_SECONDS", "FLOE_QUEUE_DLQ_RETENTION_SECONDS", "RUST_LOG"])
    error_message = "maintenance environment: ${join(",", keys(aws_lambda_function.maintenance[0].environment[0].variables))}"
  }
  # floe's EMF metrics carry function and function_name: every alarm on
  # them names both, or it matches no metric.
  assert {
    condition = (
      aws_cloudwatch_metric_alarm.freshness[0].namespace == "floe" &&
      aws_cloudwatch_metric_alarm.freshness[0].metric_name == "freshness" &&
      aws_cloudwatch_metric_alarm.freshness[0].statistic == "Maximum" &&
      aws_cloudwatch_metric_alarm.freshness[0].threshold == 900000 &&
      aws_cloudwatch_metric_alarm.freshness[0].dimensions == tomap({ function = "committer", function_name = "floe-committer" })
    )
    error_message = "freshness alarm: ${jsonencode(aws_cloudwatch_metric_alarm.freshness[0].dimensions)}"
  }
  assert {
    condition = (
      aws_cloudwatch_metric_alarm.commit_failures[0].dimensions == tomap({ function = "committer", function_name = "floe-committer" }) &&
      aws_cloudwatch_metric_alarm.commit_latency[0].dimensions == tomap({ function = "committer", function_name = "floe-committer" }) &&
      aws_cloudwatch_metric_alarm.dead_letters["writer"].dimensions == tomap({ function = "writer", function_name = "floe-writer" }) &&
      aws_cloudwatch_metric_alarm.dead_letters["ingest-http"].dimensions == tomap({ function = "ingest-http", function_name = "floe-ingest-http" })
    )
    error_message = "EMF alarm dimensions"
  }
  assert {
    condition     = alltrue([for a in [aws_cloudwatch_metric_alarm.commit_queue_age[0], aws_cloudwatch_metric_alarm.freshness[0]] : a.treat_missing_data == "notBreaching"])
    error_message = "queue age and freshness alarms both exist"
  }
  assert {
    condition     = output.metric_dimensions["maintenance"]["function_name"] == "floe-maintenance"
    error_message = "metric_dimensions output"
  }
}

# The HTTP path is buffered by default: the HTTP function appends to the
# stream, the writer drains it in windows, and both know its name.
run "http_buffer_on_by_default" {
  command = apply

  assert {
    condition = (
      aws_kinesis_stream.http_buffer[0].name == "floe-http-buffer" &&
      aws_kinesis_stream.http_buffer[0].shard_count == 1 &&
      aws_kinesis_stream.http_buffer[0].stream_mode_details[0].stream_mode == "PROVISIONED" &&
      aws_kinesis_stream.http_buffer[0].retention_period == 24 &&
      aws_kinesis_stream.http_buffer[0].encryption_type == "KMS" &&
      aws_kinesis_stream.http_buffer[0].kms_key_id == "alias/aws/kinesis"
    )
    error_message = "buffer stream"
  }
  assert {
    condition = (
      aws_lambda_function.writer.environment[0].variables["FLOE_HTTP_BUFFER_STREAM"] == "floe-http-buffer" &&
      aws_lambda_function.ingest[0].environment[0].variables["FLOE_HTTP_BUFFER_STREAM"] == "floe-http-buffer"
    )
    error_message = "FLOE_HTTP_BUFFER_STREAM on both functions"
  }
  assert {
    condition = (
      aws_lambda_event_source_mapping.http_buffer[0].event_source_arn == "arn:aws:kinesis:eu-west-1:123456789012:stream/floe-http-buffer" &&
      aws_lambda_event_source_mapping.http_buffer[0].function_name == aws_lambda_function.writer.arn &&
      aws_lambda_event_source_mapping.http_buffer[0].starting_position == "TRIM_HORIZON" &&
      aws_lambda_event_source_mapping.http_buffer[0].batch_size == 10000 &&
      aws_lambda_event_source_mapping.http_buffer[0].maximum_batching_window_in_seconds == 60 &&
      aws_lambda_event_source_mapping.http_buffer[0].parallelization_factor == 1 &&
      aws_lambda_event_source_mapping.http_buffer[0].maximum_retry_attempts == -1 &&
      aws_lambda_event_source_mapping.http_buffer[0].function_response_types == toset(["ReportBatchItemFailures"]) &&
      aws_lambda_event_source_mapping.http_buffer[0].destination_config[0].on_failure[0].destination_arn == aws_sqs_queue.stream_failures[0].arn
    )
    error_message = "buffer mapping"
  }
  assert {
    condition = (
      [for st in data.aws_iam_policy_document.ingest[0].statement : st.actions if st.sid == "AppendToBufferStream"] == [toset(["kinesis:PutRecord", "kinesis:DescribeStreamSummary"])] &&
      [for st in data.aws_iam_policy_document.ingest[0].statement : st.resources if st.sid == "AppendToBufferStream"] == [toset(["arn:aws:kinesis:eu-west-1:123456789012:stream/floe-http-buffer"])] &&
      [for st in data.aws_iam_policy_document.writer.statement : st.resources if st.sid == "ReadKinesisStreams"] == [toset(["arn:aws:kinesis:eu-west-1:123456789012:stream/floe-http-buffer"])]
    )
    error_message = "buffer IAM"
  }
  # The stream alarms and the failure queue come with it.
  assert {
    condition     = length(aws_sqs_queue.stream_failures) == 1 && length(aws_cloudwatch_metric_alarm.iterator_age) == 1 && length(aws_cloudwatch_metric_alarm.stream_failures) == 1
    error_message = "stream failure queue and alarms"
  }
  assert {
    condition     = output.http_buffer_stream_name == "floe-http-buffer" && output.http_buffer_stream_arn == "arn:aws:kinesis:eu-west-1:123456789012:stream/floe-http-buffer"
    error_message = "buffer outputs"
  }
  # The writer's per-record naming is for Kinesis sources read in parallel;
  # the buffer stream is read one invocation per shard.
  assert {
    condition     = aws_lambda_function.writer.environment[0].variables["FLOE_KINESIS_PER_RECORD"] == "false"
    error_message = "the buffer does not turn on per-record names"
  }
}

run "http_buffer_settings" {
  command = plan
  variables {
    name                       = "edge"
    http_buffer_shards         = 3
    http_buffer_window_seconds = 300
    kms_key_arn                = "arn:aws:kms:eu-west-1:123456789012:key/0000"
  }
  assert {
    condition = (
      aws_kinesis_stream.http_buffer[0].name == "edge-http-buffer" &&
      aws_kinesis_stream.http_buffer[0].shard_count == 3 &&
      aws_kinesis_stream.http_buffer[0].kms_key_id == "arn:aws:kms:eu-west-1:123456789012:key/0000" &&
      aws_lambda_event_source_mapping.http_buffer[0].maximum_batching_window_in_seconds == 300
    )
    error_message = "buffer settings"
  }
}

# Off: every POST writes its own file, as before; nothing of the stream is
# left, and without other streams neither is the failure queue.
run "http_buffer_off" {
  command = apply
  variables {
    http_buffer = false
  }
  assert {
    condition = (
      length(aws_kinesis_stream.http_buffer) == 0 &&
      length(aws_lambda_event_source_mapping.http_buffer) == 0 &&
      length(aws_sqs_queue.stream_failures) == 0 &&
      length(aws_cloudwatch_metric_alarm.iterator_age) == 0
    )
    error_message = "no buffer resources"
  }
  assert {
    condition = (
      aws_lambda_function.writer.environment[0].variables["FLOE_HTTP_BUFFER_STREAM"] == "" &&
      aws_lambda_function.ingest[0].environment[0].variables["FLOE_HTTP_BUFFER_STREAM"] == ""
    )
    error_message = "FLOE_HTTP_BUFFER_STREAM blank on both functions"
  }
  assert {
    condition = (
      length([for st in data.aws_iam_policy_document.ingest[0].statement : st if st.sid == "AppendToBufferStream"]) == 0 &&
      length([for st in data.aws_iam_policy_document.writer.statement : st if st.sid == "ReadKinesisStreams"]) == 0
    )
    error_message = "no buffer IAM"
  }
  assert {
    condition     = output.http_buffer_stream_name == null && output.http_buffer_stream_arn == null
    error_message = "buffer outputs are null"
  }
}

# http_buffer is about the HTTP function: without it there is no stream.
run "http_buffer_needs_http_ingest" {
  command = plan
  variables {
    enable_http_ingest = false
  }
  assert {
    condition     = length(aws_kinesis_stream.http_buffer) == 0 && length(aws_lambda_event_source_mapping.http_buffer) == 0 && aws_lambda_function.writer.environment[0].variables["FLOE_HTTP_BUFFER_STREAM"] == ""
    error_message = "no buffer without HTTP ingest"
  }
}

run "http_buffer_window_is_bounded" {
  command = plan
  variables {
    http_buffer_window_seconds = 301
  }
  expect_failures = [var.http_buffer_window_seconds]
}

run "http_buffer_needs_a_shard" {
  command = plan
  variables {
    http_buffer_shards = 0
  }
  expect_failures = [var.http_buffer_shards]
}

run "fifo_defaults_to_10" {
  command = apply
  variables {
    fifo_commit_queue = true
  }
  assert {
    condition     = aws_lambda_event_source_mapping.commits[0].batch_size == 10 && aws_lambda_event_source_mapping.commits[0].maximum_batching_window_in_seconds == null
    error_message = "fifo batching"
  }
  assert {
    condition     = aws_sqs_queue.commits[0].name == "floe-commits.fifo" && aws_sqs_queue.commits_dlq[0].name == "floe-commits-dlq.fifo"
    error_message = "fifo name"
  }
}

run "fifo_batch_too_big" {
  command = plan
  variables {
    fifo_commit_queue    = true
    committer_batch_size = 100
  }
  expect_failures = [aws_lambda_event_source_mapping.commits]
}

run "standard_batch_needs_window" {
  command = plan
  variables {
    committer_batching_window_seconds = 0
  }
  expect_failures = [aws_lambda_event_source_mapping.commits]
}

# The function URL (AWS_IAM) admits IAM-authenticated callers without a token.
run "function_url_iam_only" {
  command = plan
  variables {
    http_token_secret_arn = ""
  }
  assert {
    condition     = aws_lambda_function.ingest[0].environment[0].variables["FLOE_HTTP_TOKEN"] == ""
    error_message = "FLOE_HTTP_TOKEN should be blank"
  }
  assert {
    condition     = aws_lambda_function_url.ingest[0].authorization_type == "AWS_IAM"
    error_message = "function URL auth"
  }
  assert {
    condition     = length(aws_apigatewayv2_api.ingest) == 0
    error_message = "no HTTP API by default"
  }
}

# API Gateway's requests carry no IAM identity: the bearer token is required.
run "api_gateway_needs_token" {
  command = plan
  variables {
    http_api_gateway      = true
    http_token_secret_arn = ""
  }
  expect_failures = [aws_lambda_function.ingest]
}

run "api_gateway_with_token" {
  command = apply
  variables {
    http_api_gateway = true
  }
  assert {
    condition     = length(aws_apigatewayv2_route.ingest) == 2 && aws_lambda_function.ingest[0].environment[0].variables["FLOE_HTTP_TOKEN"] == "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tok-abc123"
    error_message = "HTTP API with token"
  }
}

# floe resolves only Secrets Manager ARNs (any partition); anything else
# would be taken as the token itself.
run "token_must_be_a_secret_arn" {
  command = plan
  variables {
    http_token_secret_arn = "arn:aws:ssm:eu-west-1:123456789012:parameter/tok"
  }
  expect_failures = [var.http_token_secret_arn]
}

run "secret_arns_of_other_partitions" {
  command = plan
  variables {
    http_token_secret_arn = "arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:tok-abc123"
  }
}

run "freshness_threshold" {
  command = plan
  variables {
    freshness_alarm_ms = 60000
    enable_http_ingest = false
  }
  assert {
    condition     = aws_cloudwatch_metric_alarm.freshness[0].threshold == 60000 && length(aws_cloudwatch_metric_alarm.dead_letters) == 1
    error_message = "freshness threshold / dead-letter alarms without HTTP"
  }
}

run "orphan_window_covers_the_queues" {
  command = plan

  assert {
    condition     = aws_lambda_function.maintenance[0].environment[0].variables["FLOE_MAINTENANCE_ORPHAN_WINDOW_SECONDS"] == "1382400"
    error_message = "default orphan window: ${aws_lambda_function.maintenance[0].environment[0].variables["FLOE_MAINTENANCE_ORPHAN_WINDOW_SECONDS"]}"
  }
  assert {
    condition     = aws_lambda_function.maintenance[0].environment[0].variables["FLOE_QUEUE_DLQ_RETENTION_SECONDS"] == "1209600"
    error_message = "the function checks its window against the DLQ's retention"
  }
}

run "orphan_window_shorter_than_the_dlq_is_refused" {
  command = plan
  variables {
    orphan_window_seconds = 259200
  }
  expect_failures = [aws_lambda_function.maintenance]
}

run "orphan_window_shorter_than_the_queue_is_refused" {
  command = plan
  variables {
    commit_queue_retention_seconds = 1209600
    dlq_retention_seconds          = 86400
    orphan_window_seconds          = 604800
  }
  expect_failures = [aws_lambda_function.maintenance]
}

run "glue_needs_databases" {
  command = plan
  variables {
    glue_databases = []
  }
  expect_failures = [aws_lambda_function.writer]
}

run "rest_catalog" {
  command = apply
  variables {
    catalog_type               = "rest"
    glue_databases             = []
    rest_uri                   = "https://catalog.example.com"
    rest_client_id             = "floe"
    rest_credential_secret_arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cred-abc123"
    enable_maintenance         = false
    maintenance_tables         = ["a.b", "c.d"]
  }
  assert {
    condition     = aws_lambda_function.writer.environment[0].variables["FLOE_CATALOG_CLIENT_SECRET"] == "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cred-abc123" && aws_lambda_function.writer.environment[0].variables["FLOE_CATALOG_CATALOG_ID"] == ""
    error_message = "rest env"
  }
  assert {
    condition     = length(aws_lambda_function.maintenance) == 0
    error_message = "maintenance off"
  }
}

run "sources" {
  command = apply
  variables {
    sqs_sources     = { a = { queue_arn = "arn:aws:sqs:eu-west-1:123456789012:src" } }
    kinesis_sources = { k = { stream_arn = "arn:aws:kinesis:eu-west-1:123456789012:stream/s" } }
    msk_sources     = { m = { cluster_arn = "arn:aws:kafka:eu-west-1:123456789012:cluster/c/u-1", topics = ["t1", "t2"], consumer_group_id = "g" } }
    kafka_sources   = { s = { bootstrap_servers = ["b1:9092", "b2:9092"], topics = ["x"], subnet_ids = ["subnet-1"], security_group_ids = ["sg-1"], auth_type = "SASL_SCRAM_256_AUTH", auth_secret_arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:k-abc123" } }
  }
  assert {
    condition     = length(aws_lambda_event_source_mapping.msk) == 2 && length(aws_lambda_event_source_mapping.kafka) == 1
    error_message = "kafka mappings"
  }
  assert {
    condition     = length(aws_sqs_queue.stream_failures) == 1 && length(aws_iam_role_policy.network) == 1
    error_message = "stream failures / network"
  }
  assert {
    condition     = aws_lambda_function.writer.environment[0].variables["FLOE_KINESIS_PER_RECORD"] == "false"
    error_message = "one reader per shard: records are named by their shard's ranges"
  }
}

run "parallel_kinesis_names_records_one_by_one" {
  command = apply
  variables {
    kinesis_sources = { k = { stream_arn = "arn:aws:kinesis:eu-west-1:123456789012:stream/s", parallelization_factor = 4 } }
  }
  assert {
    condition     = aws_lambda_function.writer.environment[0].variables["FLOE_KINESIS_PER_RECORD"] == "true"
    error_message = "a shard read in parallel needs per-record names"
  }
}

run "pg_sync_off_by_default" {
  command = plan
  assert {
    condition     = length(aws_lambda_function.pg_sync) == 0 && length(aws_cloudwatch_event_rule.pg_sync) == 0 && length(aws_cloudwatch_metric_alarm.pg) == 0
    error_message = "pg-sync is opt-in"
  }
}

run "pg_sync" {
  command = apply
  variables {
    enable_pg_sync        = true
    glue_databases        = ["bronze", "raw"]
    pg_conninfo           = "host=shop.abc.eu-west-1.rds.amazonaws.com dbname=shop sslmode=verify-full sslrootcert=system"
    pg_secret_arn         = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds-login-abc123"
    pg_tables             = ["public.orders", "public.users"]
    pg_subnet_ids         = ["subnet-a", "subnet-b"]
    pg_security_group_ids = ["sg-pg"]
  }
  assert {
    condition     = aws_lambda_function.pg_sync[0].reserved_concurrent_executions == 1 && aws_lambda_function.pg_sync[0].timeout == 900
    error_message = "one run at a time, within Lambda's 15 minutes"
  }
  assert {
    condition = (
      aws_lambda_function.pg_sync[0].vpc_config[0].subnet_ids == toset(["subnet-a", "subnet-b"]) &&
      aws_lambda_function.pg_sync[0].vpc_config[0].security_group_ids == toset(["sg-pg"]) &&
      length(aws_lambda_function.writer.vpc_config) == 0 &&
      length(aws_iam_role_policy.network) == 1 && contains(keys(aws_iam_role_policy.network), "pg_sync")
    )
    error_message = "pg-sync alone in the database's subnets, with the ENI rights"
  }
  assert {
    condition = (
      aws_lambda_function.pg_sync[0].environment[0].variables["FLOE_POSTGRES_TABLES"] == "public.orders,public.users" &&
      aws_lambda_function.pg_sync[0].environment[0].variables["FLOE_POSTGRES_SECRET"] == "arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds-login-abc123" &&
      aws_lambda_function.pg_sync[0].environment[0].variables["FLOE_POSTGRES_NAMESPACE"] == "raw" &&
      !contains(keys(aws_lambda_function.pg_sync[0].environment[0].variables), "FLOE_QUEUE_URL")
    )
    error_message = "pg-sync environment: ${jsonencode(aws_lambda_function.pg_sync[0].environment[0].variables)}"
  }
  assert {
    condition     = aws_cloudwatch_event_rule.pg_sync[0].schedule_expression == "rate(1 minute)" && aws_cloudwatch_event_target.pg_sync[0].retry_policy[0].maximum_retry_attempts == 0 && aws_lambda_permission.pg_sync[0].principal == "events.amazonaws.com"
    error_message = "schedule"
  }
  assert {
    condition = (
      aws_cloudwatch_metric_alarm.pg["slot_lag"].metric_name == "pg_slot_lag" &&
      aws_cloudwatch_metric_alarm.pg["wal_retained"].metric_name == "pg_wal_retained" &&
      aws_cloudwatch_metric_alarm.pg["freshness"].metric_name == "pg_oldest_uncommitted_change_age" &&
      aws_cloudwatch_metric_alarm.pg["freshness"].treat_missing_data == "breaching" &&
      aws_cloudwatch_metric_alarm.pg["slot_lag"].dimensions == tomap({ function = "pg-sync", function_name = "floe-pg-sync" }) &&
      aws_cloudwatch_metric_alarm.pg_sync_errors[0].dimensions == tomap({ FunctionName = "floe-pg-sync" })
    )
    error_message = "pg alarms"
  }
  assert {
    condition     = contains(keys(aws_iam_role.fn), "pg_sync") && contains(keys(aws_iam_role_policy.fn), "pg_sync")
    error_message = "pg-sync has its own role and policy"
  }
}

run "pg_sync_keeps_passwords_out_of_the_conninfo" {
  command = plan
  variables {
    enable_pg_sync = true
    pg_conninfo    = "host=db password=hunter2"
    pg_tables      = ["public.t"]
  }
  expect_failures = [var.pg_conninfo]
}

run "pg_sync_namespace_within_glue_databases" {
  command = plan
  variables {
    enable_pg_sync = true
    pg_conninfo    = "host=db sslmode=verify-full sslrootcert=system"
    pg_tables      = ["public.t"]
  }
  expect_failures = [aws_lambda_function.pg_sync]
}

# Two shards: two queues with their DLQs and alarms, two committers of
# reserved concurrency 1 each fed by its own queue; writers send to both
# (FLOE_QUEUE_URLS), each committer reads only its own (FLOE_QUEUE_URL, IAM).
run "two_shards" {
  command = apply
  variables {
    commit_queue_shards = 2
  }
  override_resource {
    target = aws_sqs_queue.commits[1]
    values = {
      url = "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits-1"
      arn = "arn:aws:sqs:eu-west-1:123456789012:floe-commits-1"
    }
  }
  override_resource {
    target = aws_lambda_function.committer[1]
    values = { arn = "arn:aws:lambda:eu-west-1:123456789012:function:floe-committer-1" }
  }
  assert {
    condition = (
      [for q in aws_sqs_queue.commits : q.name] == ["floe-commits", "floe-commits-1"] &&
      [for q in aws_sqs_queue.commits_dlq : q.name] == ["floe-commits-dlq", "floe-commits-1-dlq"] &&
      length(aws_sqs_queue_redrive_allow_policy.commits_dlq) == 2
    )
    error_message = "queues: ${jsonencode([for q in aws_sqs_queue.commits : q.name])}"
  }
  assert {
    condition = (
      [for f in aws_lambda_function.committer : f.function_name] == ["floe-committer", "floe-committer-1"] &&
      alltrue([for f in aws_lambda_function.committer : f.reserved_concurrent_executions == 1]) &&
      aws_lambda_event_source_mapping.commits[1].event_source_arn == "arn:aws:sqs:eu-west-1:123456789012:floe-commits-1" &&
      aws_lambda_event_source_mapping.commits[1].function_name == "arn:aws:lambda:eu-west-1:123456789012:function:floe-committer-1" &&
      aws_lambda_event_source_mapping.commits[0].event_source_arn == "arn:aws:sqs:eu-west-1:123456789012:floe-commits"
    )
    error_message = "committers"
  }
  assert {
    condition = (
      aws_lambda_function.writer.environment[0].variables["FLOE_QUEUE_URLS"] == "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits,https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits-1" &&
      aws_lambda_function.writer.environment[0].variables["FLOE_QUEUE_URL"] == "" &&
      aws_lambda_function.ingest[0].environment[0].variables["FLOE_QUEUE_URLS"] == aws_lambda_function.writer.environment[0].variables["FLOE_QUEUE_URLS"] &&
      aws_lambda_function.committer[0].environment[0].variables["FLOE_QUEUE_URL"] == "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits" &&
      aws_lambda_function.committer[1].environment[0].variables["FLOE_QUEUE_URL"] == "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits-1" &&
      aws_lambda_function.committer[1].environment[0].variables["FLOE_QUEUE_URLS"] == aws_lambda_function.writer.environment[0].variables["FLOE_QUEUE_URLS"]
    )
    error_message = "shard environment"
  }
  # Least privilege: each committer's role consumes its own queue only;
  # writers may send to every shard.
  assert {
    condition = (
      contains(keys(aws_iam_role.fn), "committer_1") && contains(keys(aws_iam_role_policy.fn), "committer_1") &&
      aws_iam_role.fn["committer_1"].name == "floe-committer-1-eu-west-1" &&
      aws_lambda_function.committer[1].role == aws_iam_role.fn["committer_1"].arn &&
      aws_cloudwatch_log_group.fn["committer_1"].name == "/aws/lambda/floe-committer-1" &&
      [for st in data.aws_iam_policy_document.committer[1].statement : st.resources if st.sid == "ConsumeCommitQueue"] == [toset(["arn:aws:sqs:eu-west-1:123456789012:floe-commits-1"])] &&
      [for st in data.aws_iam_policy_document.committer[0].statement : st.resources if st.sid == "ConsumeCommitQueue"] == [toset(["arn:aws:sqs:eu-west-1:123456789012:floe-commits"])] &&
      [for st in data.aws_iam_policy_document.table_writer.statement : st.resources if st.sid == "EnqueueCommitRequests"] == [toset(["arn:aws:sqs:eu-west-1:123456789012:floe-commits", "arn:aws:sqs:eu-west-1:123456789012:floe-commits-1"])]
    )
    error_message = "shard IAM"
  }
  assert {
    condition = (
      [for a in aws_cloudwatch_metric_alarm.commit_queue_age : a.alarm_name] == ["floe-commit-queue-age", "floe-commit-queue-age-1"] &&
      aws_cloudwatch_metric_alarm.commit_queue_age[1].dimensions == tomap({ QueueName = "floe-commits-1" }) &&
      aws_cloudwatch_metric_alarm.commit_dlq[1].dimensions == tomap({ QueueName = "floe-commits-1-dlq" }) &&
      aws_cloudwatch_metric_alarm.committer_errors[1].dimensions == tomap({ FunctionName = "floe-committer-1" }) &&
      aws_cloudwatch_metric_alarm.freshness[1].dimensions == tomap({ function = "committer", function_name = "floe-committer-1" }) &&
      aws_cloudwatch_metric_alarm.commit_failures[1].alarm_name == "floe-commit-failures-1"
    )
    error_message = "shard alarms"
  }
  assert {
    condition = (
      output.commit_queue_urls == ["https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits", "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits-1"] &&
      output.committer_function_names == ["floe-committer", "floe-committer-1"] &&
      output.function_names["committer_1"] == "floe-committer-1" &&
      output.metric_dimensions["committer_1"]["function_name"] == "floe-committer-1"
    )
    error_message = "shard outputs"
  }
}

run "shards_are_bounded" {
  command = plan
  variables {
    commit_queue_shards = 17
  }
  expect_failures = [var.commit_queue_shards]
}
