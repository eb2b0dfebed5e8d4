# Alarms. floe's functions publish CloudWatch Embedded Metric Format lines
# (shared/src/metrics/emf.rs): namespace "floe", two dimensions on every
# metric: "function" (writer, committer, ingest-http, maintenance) and
# "function_name" (the Lambda function's name, AWS_LAMBDA_FUNCTION_NAME), so
# two deployments in one account and region keep their metrics apart. An
# alarm must name both to match. The committer emits per table and run:
# commit_latency and freshness (ms), failed_commits, requests_per_commit,
# records, files, duplicates, catalog_retries; the writer and the HTTP
# function: records, bytes, files, dead_lettered_records; maintenance:
# compacted_files, expired_snapshots, deleted_files, orphans_deleted,
# data_files per table, maintenance_failures when tables fail.
#
# Data freshness: the committer's freshness metric (commit time minus the
# oldest record's arrival at its source) says how stale committed data is;
# the commit queue's age and the writer's IteratorAge catch a pipeline that
# commits nothing at all, which emits no freshness.

locals {
  alarm_actions = var.alarm_sns_topic_arn == null ? [] : [var.alarm_sns_topic_arn]
  emf_namespace = "floe"

  # The dimensions of floe's own metrics, per function.
  emf_dimensions = merge(
    {
      writer = { function = "writer", function_name = aws_lambda_function.writer.function_name }
    },
    # Every shard's committer emits function = "committer"; its function_name
    # tells them apart. Keyed like function_names: committer, committer_<i>.
    { for i, key in local.committer_keys : key => { function = "committer", function_name = aws_lambda_function.committer[i].function_name } },
    var.enable_http_ingest ? {
      "ingest-http" = { function = "ingest-http", function_name = aws_lambda_function.ingest[0].function_name }
    } : {},
    var.enable_maintenance ? {
      maintenance = { function = "maintenance", function_name = aws_lambda_function.maintenance[0].function_name }
    } : {},
    var.enable_pg_sync ? {
      "pg-sync" = { function = "pg-sync", function_name = aws_lambda_function.pg_sync[0].function_name }
    } : {},
  )
}

# --- the commit path ---------------------------------------------------------------------

resource "aws_cloudwatch_metric_alarm" "commit_queue_age" {
  # One per shard of the commit queue (and its committer).
  count = var.create_alarms ? var.commit_queue_shards : 0

  alarm_name          = "${var.name}-commit-queue-age${local.shard_suffixes[count.index]}"
  alarm_description   = "floe: a commit request has waited over ${var.commit_age_alarm_seconds}s; written data is not reaching its table (committer failing, throttled or too slow)."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateAgeOfOldestMessage"
  dimensions          = { QueueName = aws_sqs_queue.commits[count.index].name }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 3
  datapoints_to_alarm = 3
  threshold           = var.commit_age_alarm_seconds
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "commit_dlq" {
  # One per shard of the commit queue (and its committer).
  count = var.create_alarms ? var.commit_queue_shards : 0

  alarm_name          = "${var.name}-commit-dlq${local.shard_suffixes[count.index]}"
  alarm_description   = "floe: commit requests reached the dead-letter queue; their data files are written but not committed. Fix the cause and redrive them within a day (snapshot expiry, 24 h by default, forgets committed batch ids; orphan cleanup keeps uncommitted files for orphan_window_seconds, 16 days by default)."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.commits_dlq[count.index].name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "committer_errors" {
  # One per shard of the commit queue (and its committer).
  count = var.create_alarms ? var.commit_queue_shards : 0

  alarm_name          = "${var.name}-committer-errors${local.shard_suffixes[count.index]}"
  alarm_description   = "floe: the committer function failed (crash, timeout, bad configuration)."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.committer[count.index].function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "commit_failures" {
  # One per shard of the commit queue (and its committer).
  count = var.create_alarms ? var.commit_queue_shards : 0

  alarm_name          = "${var.name}-commit-failures${local.shard_suffixes[count.index]}"
  alarm_description   = "floe: table commits failed (failed_commits); the requests went back to the queue. See the committer's log for the table and error."
  namespace           = local.emf_namespace
  metric_name         = "failed_commits"
  dimensions          = local.emf_dimensions[local.committer_keys[count.index]]
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "commit_latency" {
  # One per shard of the commit queue (and its committer).
  count = var.create_alarms ? var.commit_queue_shards : 0

  alarm_name          = "${var.name}-commit-latency${local.shard_suffixes[count.index]}"
  alarm_description   = "floe: a committer run took over ${var.commit_latency_alarm_ms} ms (commit_latency): a slow catalog or many conflicts."
  namespace           = local.emf_namespace
  metric_name         = "commit_latency"
  dimensions          = local.emf_dimensions[local.committer_keys[count.index]]
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 2
  datapoints_to_alarm = 2
  threshold           = var.commit_latency_alarm_ms
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "freshness" {
  # One per shard of the commit queue (and its committer).
  count = var.create_alarms ? var.commit_queue_shards : 0

  alarm_name          = "${var.name}-freshness${local.shard_suffixes[count.index]}"
  alarm_description   = "floe: data committed in two 5-minute periods in a row was over ${var.freshness_alarm_ms} ms old (freshness: commit time minus the oldest record's arrival at its source): sources, writer or committer lag; a backfill fires it too."
  namespace           = local.emf_namespace
  metric_name         = "freshness"
  dimensions          = local.emf_dimensions[local.committer_keys[count.index]]
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 2
  datapoints_to_alarm = 2
  threshold           = var.freshness_alarm_ms
  comparison_operator = "GreaterThanThreshold"
  # No commits, no datapoints: a stalled pipeline is the commit queue age,
  # iterator age and error alarms' to catch.
  treat_missing_data = "notBreaching"
  alarm_actions      = local.alarm_actions
  ok_actions         = local.alarm_actions
  tags               = var.tags
}

# --- writers -------------------------------------------------------------------------------

resource "aws_cloudwatch_metric_alarm" "writer_errors" {
  count = var.create_alarms ? 1 : 0

  alarm_name          = "${var.name}-writer-errors"
  alarm_description   = "floe: the writer function failed as a whole (crash, timeout, unreadable event, bad configuration); failed batches alone are reported as partial batch failures and retried."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.writer.function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  for_each = var.create_alarms && var.alarm_on_dead_letters ? toset(var.enable_http_ingest ? ["writer", "ingest-http"] : ["writer"]) : toset([])

  alarm_name          = "${var.name}-${each.value}-dead-letters"
  alarm_description   = "floe: the ${each.value} function dead-lettered records that do not fit their table (s3://…/_floe/dlq; `floe dlq list`)."
  namespace           = local.emf_namespace
  metric_name         = "dead_lettered_records"
  dimensions          = local.emf_dimensions[each.value]
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# Lambda's IteratorAge of the writer covers all its stream mappings, the
# HTTP buffer stream's included: buffered POSTs the writer does not drain
# are not yet in any file.
resource "aws_cloudwatch_metric_alarm" "iterator_age" {
  count = var.create_alarms && local.stream_sources ? 1 : 0

  alarm_name          = "${var.name}-writer-iterator-age"
  alarm_description   = "floe: the writer lags its Kinesis or DynamoDB stream (or the HTTP buffer stream) by over ${var.iterator_age_alarm_ms} ms."
  namespace           = "AWS/Lambda"
  metric_name         = "IteratorAge"
  dimensions          = { FunctionName = aws_lambda_function.writer.function_name }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 5
  datapoints_to_alarm = 5
  threshold           = var.iterator_age_alarm_ms
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "stream_failures" {
  count = var.create_alarms && local.stream_sources ? 1 : 0

  alarm_name          = "${var.name}-stream-failures"
  alarm_description   = "floe: a stream batch was given up after its retries (its shard and positions are in the stream failure queue); those records are not in their table."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.stream_failures[0].name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# --- maintenance ---------------------------------------------------------------------------

# A run that fails any table emits maintenance_failures (the number of tables)
# and then fails the invocation, so Lambda's Errors covers it together with
# crashes and timeouts; the maintenance_failures metric says how many tables.
resource "aws_cloudwatch_metric_alarm" "maintenance_errors" {
  count = var.create_alarms && var.enable_maintenance ? 1 : 0

  alarm_name          = "${var.name}-maintenance-errors"
  alarm_description   = "floe: a maintenance run failed; small files and snapshots accumulate until one succeeds."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.maintenance[0].function_name }
  statistic           = "Sum"
  period              = 3600
  evaluation_periods  = 3
  datapoints_to_alarm = 2
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}
