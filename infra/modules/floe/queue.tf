# The commit queue between writers and the committer, its dead-letter queue,
# and the failure queues of stream sources and of the maintenance function.

locals {
  # A committer run may take its whole timeout; Lambda's guidance for an SQS
  # event source is a visibility timeout of 6 x the function timeout (its own
  # retries of a throttled invocation happen within it), plus the batching
  # window.
  commit_visibility_timeout = 6 * var.committer_timeout + 30
}

resource "aws_sqs_queue" "commits_dlq" {
  name                              = local.commit_dlq_name
  fifo_queue                        = var.fifo_commit_queue ? true : null
  message_retention_seconds         = var.dlq_retention_seconds
  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 3600
  tags                              = var.tags
}

resource "aws_sqs_queue" "commits" {
  name       = local.commit_queue_name
  fifo_queue = var.fifo_commit_queue ? true : null
  # floe sets MessageDeduplicationId (xxh3-128 of the body) and
  # MessageGroupId (the table) itself.
  content_based_deduplication = var.fifo_commit_queue ? false : null

  visibility_timeout_seconds = local.commit_visibility_timeout
  message_retention_seconds  = var.commit_queue_retention_seconds
  receive_wait_time_seconds  = 20

  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 3600

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.commits_dlq.arn
    maxReceiveCount     = var.commit_queue_max_receive_count
  })

  tags = var.tags
}

resource "aws_sqs_queue_redrive_allow_policy" "commits_dlq" {
  queue_url = aws_sqs_queue.commits_dlq.id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.commits.arn]
  })
}

# Kinesis and DynamoDB mappings send a batch's metadata (shard, sequence
# numbers) here once it is past maximum_retry_attempts or
# maximum_record_age_in_seconds.
resource "aws_sqs_queue" "stream_failures" {
  count = local.stream_sources ? 1 : 0

  name                              = "${var.name}-stream-failures"
  message_retention_seconds         = var.dlq_retention_seconds
  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 3600
  tags                              = var.tags
}

# Maintenance is invoked asynchronously by EventBridge; a run that fails is
# recorded here (the next scheduled run tries again anyway).
resource "aws_sqs_queue" "maintenance_dlq" {
  count = var.enable_maintenance ? 1 : 0

  name                              = "${var.name}-maintenance-dlq"
  message_retention_seconds         = var.dlq_retention_seconds
  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 3600
  tags                              = var.tags
}

locals {
  module_queues = merge(
    {
      commits     = aws_sqs_queue.commits
      commits_dlq = aws_sqs_queue.commits_dlq
    },
    local.stream_sources ? { stream_failures = aws_sqs_queue.stream_failures[0] } : {},
    var.enable_maintenance ? { maintenance_dlq = aws_sqs_queue.maintenance_dlq[0] } : {},
  )
}

data "aws_iam_policy_document" "queue_tls" {
  for_each = local.module_queues

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [each.value.arn]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_sqs_queue_policy" "tls" {
  for_each = local.module_queues

  queue_url = each.value.id
  policy    = data.aws_iam_policy_document.queue_tls[each.key].json
}
