# Event source mappings: the commit queue into the committer, and the
# writer's sources. Every mapping turns on ReportBatchItemFailures: floe's
# functions answer with a partial batch response naming exactly what must be
# delivered again (SQS: every message of a failed batch; streams: the first
# position of a failed shard or partition batch), and the redelivery gets the
# same batch id, so nothing is committed twice.

# --- committer -----------------------------------------------------------------------------

# Each shard's queue feeds its own committer.
resource "aws_lambda_event_source_mapping" "commits" {
  count = var.commit_queue_shards

  event_source_arn = aws_sqs_queue.commits[count.index].arn
  function_name    = aws_lambda_function.committer[count.index].arn

  batch_size = local.committer_batch_size
  # FIFO event sources take no batching window.
  maximum_batching_window_in_seconds = var.fifo_commit_queue ? null : var.committer_batching_window_seconds
  function_response_types            = ["ReportBatchItemFailures"]

  # The committer has a reserved concurrency of 1; capping the pollers at the
  # smallest value SQS allows keeps throttled invocations (and the receive
  # counts they burn) rare.
  scaling_config {
    maximum_concurrency = 2
  }

  depends_on = [aws_iam_role_policy.fn]

  lifecycle {
    precondition {
      condition     = !var.fifo_commit_queue || local.committer_batch_size <= 10
      error_message = "A FIFO commit queue delivers at most 10 messages per batch: committer_batch_size <= 10."
    }
    precondition {
      condition     = var.fifo_commit_queue || local.committer_batch_size <= 10 || var.committer_batching_window_seconds >= 1
      error_message = "A standard-queue batch over 10 messages needs committer_batching_window_seconds >= 1."
    }
    precondition {
      condition     = local.committer_batch_size >= 1 && local.committer_batch_size <= 10000
      error_message = "committer_batch_size: 1-10000."
    }
  }
}

moved {
  from = aws_lambda_event_source_mapping.commits
  to   = aws_lambda_event_source_mapping.commits[0]
}

# --- writer: SQS ---------------------------------------------------------------------------

resource "aws_lambda_event_source_mapping" "sqs" {
  for_each = var.sqs_sources

  event_source_arn                   = each.value.queue_arn
  function_name                      = aws_lambda_function.writer.arn
  enabled                            = each.value.enabled
  batch_size                         = each.value.batch_size
  maximum_batching_window_in_seconds = each.value.maximum_batching_window_in_seconds
  function_response_types            = ["ReportBatchItemFailures"]

  dynamic "scaling_config" {
    for_each = each.value.maximum_concurrency == null ? [] : [1]
    content {
      maximum_concurrency = each.value.maximum_concurrency
    }
  }

  depends_on = [aws_iam_role_policy.fn]

  lifecycle {
    precondition {
      condition     = each.value.batch_size <= 10 || each.value.maximum_batching_window_in_seconds >= 1
      error_message = "sqs_sources: a batch over 10 messages needs maximum_batching_window_in_seconds >= 1 (and a FIFO queue at most 10)."
    }
  }
}

# --- writer: Kinesis -----------------------------------------------------------------------

resource "aws_lambda_event_source_mapping" "kinesis" {
  for_each = var.kinesis_sources

  event_source_arn                   = each.value.stream_arn
  function_name                      = aws_lambda_function.writer.arn
  enabled                            = each.value.enabled
  starting_position                  = each.value.starting_position
  batch_size                         = each.value.batch_size
  maximum_batching_window_in_seconds = each.value.maximum_batching_window_in_seconds
  parallelization_factor             = each.value.parallelization_factor
  bisect_batch_on_function_error     = each.value.bisect_batch_on_function_error
  maximum_retry_attempts             = each.value.maximum_retry_attempts
  maximum_record_age_in_seconds      = each.value.maximum_record_age_in_seconds
  function_response_types            = ["ReportBatchItemFailures"]

  destination_config {
    on_failure {
      destination_arn = aws_sqs_queue.stream_failures[0].arn
    }
  }

  depends_on = [aws_iam_role_policy.fn]
}

# --- writer: the HTTP buffer stream -------------------------------------------------------
# Buffered POSTs (http.tf): one window of them is one Parquet file per table.

resource "aws_lambda_event_source_mapping" "http_buffer" {
  count = local.http_buffer ? 1 : 0

  event_source_arn = aws_kinesis_stream.http_buffer[0].arn
  function_name    = aws_lambda_function.writer.arn
  # Every POST the stream holds, from a new mapping on: each got its 200.
  starting_position                  = "TRIM_HORIZON"
  batch_size                         = 10000
  maximum_batching_window_in_seconds = var.http_buffer_window_seconds
  # One invocation per shard at a time: a shard's records are written in
  # the order the stream took them.
  parallelization_factor = 1
  # A POST's 200 promised its records: retry a failing batch until its
  # records leave the stream (24 h) rather than skip them; the iterator age
  # alarm fires long before.
  bisect_batch_on_function_error = false
  maximum_retry_attempts         = -1
  maximum_record_age_in_seconds  = -1
  function_response_types        = ["ReportBatchItemFailures"]

  destination_config {
    on_failure {
      destination_arn = aws_sqs_queue.stream_failures[0].arn
    }
  }

  depends_on = [aws_iam_role_policy.fn]
}

# --- writer: DynamoDB Streams --------------------------------------------------------------

resource "aws_lambda_event_source_mapping" "dynamodb" {
  for_each = var.dynamodb_sources

  event_source_arn                   = each.value.stream_arn
  function_name                      = aws_lambda_function.writer.arn
  enabled                            = each.value.enabled
  starting_position                  = each.value.starting_position
  batch_size                         = each.value.batch_size
  maximum_batching_window_in_seconds = each.value.maximum_batching_window_in_seconds
  parallelization_factor             = each.value.parallelization_factor
  bisect_batch_on_function_error     = each.value.bisect_batch_on_function_error
  maximum_retry_attempts             = each.value.maximum_retry_attempts
  maximum_record_age_in_seconds      = each.value.maximum_record_age_in_seconds
  function_response_types            = ["ReportBatchItemFailures"]

  destination_config {
    on_failure {
      destination_arn = aws_sqs_queue.stream_failures[0].arn
    }
  }

  depends_on = [aws_iam_role_policy.fn]
}

# --- writer: Kafka (MSK and self-managed) --------------------------------------------------
# A Kafka mapping reads one topic, so each source gets one mapping per topic.
# Consumer group ids must be unique per mapping: a given id gets "-<topic>"
# appended when the source has several topics. Lambda honours a Kafka
# mapping's partial batch response only in provisioned mode, hence the
# provisioned_poller_config; without it a failed partition batch would be
# checkpointed as if written.

locals {
  msk_mappings = merge([
    for key, s in var.msk_sources : {
      for t in s.topics : "${key}/${t}" => merge(s, {
        topic = t
        group = s.consumer_group_id == null ? null : (length(s.topics) > 1 ? "${s.consumer_group_id}-${t}" : s.consumer_group_id)
      })
    }
  ]...)
  kafka_mappings = merge([
    for key, s in var.kafka_sources : {
      for t in s.topics : "${key}/${t}" => merge(s, {
        topic = t
        group = s.consumer_group_id == null ? null : (length(s.topics) > 1 ? "${s.consumer_group_id}-${t}" : s.consumer_group_id)
      })
    }
  ]...)
}

resource "aws_lambda_event_source_mapping" "msk" {
  for_each = local.msk_mappings

  event_source_arn                   = each.value.cluster_arn
  function_name                      = aws_lambda_function.writer.arn
  enabled                            = each.value.enabled
  topics                             = [each.value.topic]
  starting_position                  = each.value.starting_position
  batch_size                         = each.value.batch_size
  maximum_batching_window_in_seconds = each.value.maximum_batching_window_in_seconds
  function_response_types            = ["ReportBatchItemFailures"]

  provisioned_poller_config {
    minimum_pollers = each.value.minimum_pollers
    maximum_pollers = each.value.maximum_pollers
  }

  dynamic "amazon_managed_kafka_event_source_config" {
    for_each = each.value.group == null ? [] : [1]
    content {
      consumer_group_id = each.value.group
    }
  }

  dynamic "source_access_configuration" {
    for_each = each.value.auth_secret_arn == null ? [] : [each.value.auth_secret_arn]
    content {
      type = "SASL_SCRAM_512_AUTH"
      uri  = source_access_configuration.value
    }
  }

  depends_on = [aws_iam_role_policy.fn, aws_iam_role_policy.network]
}

resource "aws_lambda_event_source_mapping" "kafka" {
  for_each = local.kafka_mappings

  function_name                      = aws_lambda_function.writer.arn
  enabled                            = each.value.enabled
  topics                             = [each.value.topic]
  starting_position                  = each.value.starting_position
  batch_size                         = each.value.batch_size
  maximum_batching_window_in_seconds = each.value.maximum_batching_window_in_seconds
  function_response_types            = ["ReportBatchItemFailures"]

  self_managed_event_source {
    endpoints = {
      KAFKA_BOOTSTRAP_SERVERS = join(",", each.value.bootstrap_servers)
    }
  }

  provisioned_poller_config {
    minimum_pollers = each.value.minimum_pollers
    maximum_pollers = each.value.maximum_pollers
  }

  dynamic "self_managed_kafka_event_source_config" {
    for_each = each.value.group == null ? [] : [1]
    content {
      consumer_group_id = each.value.group
    }
  }

  dynamic "source_access_configuration" {
    for_each = each.value.subnet_ids
    content {
      type = "VPC_SUBNET"
      uri  = "subnet:${source_access_configuration.value}"
    }
  }

  dynamic "source_access_configuration" {
    for_each = each.value.security_group_ids
    content {
      type = "VPC_SECURITY_GROUP"
      uri  = "security_group:${source_access_configuration.value}"
    }
  }

  dynamic "source_access_configuration" {
    for_each = each.value.auth_secret_arn == null ? [] : [each.value.auth_secret_arn]
    content {
      type = coalesce(each.value.auth_type, "SASL_SCRAM_512_AUTH")
      uri  = source_access_configuration.value
    }
  }

  depends_on = [aws_iam_role_policy.fn, aws_iam_role_policy.network]
}
