# The commit queue between writers and the committer, its dead-letter queue,
# and the failure queues of stream sources and of the maintenance function.

locals {
  # A committer run may take its whole timeout; Lambda's guidance for an SQS
  # event source is a visibility timeout of 6 x the function timeout (its own
  # retries of a throttled invocation happen within it), plus the batching
  # window.
  commit_visibility_timeout = 6 * var.committer_timeout + 30
}

# One commit queue (and DLQ) per shard, var.commit_queue_shards of them:
# writers send each table's requests to its shard (a stable hash of the
# table's name), and each shard has its own committer. Shard 0 keeps the
# unsharded names, so adding shards to a deployment adds queues and
# committers and replaces none.
resource "aws_sqs_queue" "commits_dlq" {
  count = var.commit_queue_shards

  name                              = local.commit_dlq_names[count.index]
  fifo_queue                        = var.fifo_commit_queue ? true : null
  message_retention_seconds         = var.dlq_retention_seconds
  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 3600
  tags                              = var.tags
}

resource "aws_sqs_queue" "commits" {
  count = var.commit_queue_shards

  name       = local.commit_queue_names[count.index]
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
    deadLetterTargetArn = aws_sqs_queue.commits_dlq[count.index].arn
    maxReceiveCount     = var.commit_queue_max_receive_count
  })

  tags = var.tags
}

resource "aws_sqs_queue_redrive_allow_policy" "commits_dlq" {
  count = var.commit_queue_shards

  queue_url = aws_sqs_queue.commits_dlq[count.index].id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.commits[count.index].arn]
  })
}

# The resources of the unsharded module are shard 0's.
moved {
  from = aws_sqs_queue.commits
  to   = aws_sqs_queue.commits[0]
}

moved {
  from = aws_sqs_queue.commits_dlq
  to   = aws_sqs_queue.commits_dlq[0]
}

moved {
  from = aws_sqs_queue_redrive_allow_policy.commits_dlq
  to   = aws_sqs_queue_redrive_allow_policy.commits_dlq[0]
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
  # Shard 0's keys are the unsharded module's: its queue policies stay put.
  module_queues = merge(
    { for i, q in aws_sqs_queue.commits : (i == 0 ? "commits" : "commits_${i}") => q },
    { for i, q in aws_sqs_queue.commits_dlq : (i == 0 ? "commits_dlq" : "commits_dlq_${i}") => q },
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
