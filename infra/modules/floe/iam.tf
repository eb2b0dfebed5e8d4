# One execution role per function, each with only what that function does.
#
#   writer      sources and the HTTP buffer stream (read) -> Parquet + dead
#               letters + claim checks (put), tables it creates or evolves
#               (Glue + metadata), every shard of the commit queue (send)
#   committer   its own shard of the commit queue (consume; one role per
#               shard's committer), claim checks (get, delete), table
#               metadata and manifests (get, put), Glue UpdateTable
#   ingest      the writer's rights without the sources, plus its token secret
#               and PutRecord on the HTTP buffer stream
#   maintenance table files (list, get, put, delete), Glue databases and tables
#               (list, read, update); no commit queue
#   pg_sync     its tables' files (get, put, delete old metadata), dead letters
#               (put), Glue tables of pg_namespace (create, update), its login
#               secret; no commit queue (it commits itself)
#
# Every S3 right stops at the warehouse prefix; under Glue, at the
# <db>.db/ directories of var.glue_databases.

data "aws_iam_policy_document" "assume_lambda" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "fn" {
  for_each = local.enabled_functions

  name               = "${local.function_names[each.key]}-${local.region}"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = var.tags
}

locals {
  role_policies = merge(
    {
      writer = data.aws_iam_policy_document.writer.json
    },
    { for i, key in local.committer_keys : key => data.aws_iam_policy_document.committer[i].json },
    var.enable_http_ingest ? { ingest = data.aws_iam_policy_document.ingest[0].json } : {},
    var.enable_maintenance ? { maintenance = data.aws_iam_policy_document.maintenance[0].json } : {},
    var.enable_pg_sync ? { pg_sync = data.aws_iam_policy_document.pg_sync[0].json } : {},
  )

  extra_policy_arns = merge(
    {
      writer      = var.extra_policy_arns.writer
      committer   = var.extra_policy_arns.committer
      ingest      = var.enable_http_ingest ? var.extra_policy_arns.ingest : []
      maintenance = var.enable_maintenance ? var.extra_policy_arns.maintenance : []
      pg_sync     = var.enable_pg_sync ? var.extra_policy_arns.pg_sync : []
    },
    # Every shard's committer gets the committer's extra policies.
    { for key in local.extra_committer_keys : key => var.extra_policy_arns.committer },
  )

  extra_policy_attachments = merge([
    for fn, arns in local.extra_policy_arns : { for i, arn in arns : "${fn}-${i}" => { function = fn, policy_arn = arn } }
  ]...)
}

resource "aws_iam_role_policy" "fn" {
  for_each = local.role_policies

  name   = "floe-${each.key}"
  role   = aws_iam_role.fn[each.key].id
  policy = each.value
}

resource "aws_iam_role_policy" "network" {
  for_each = {
    for fn, enabled in local.enabled_functions : fn => enabled
    if local.in_vpc || (fn == "writer" && local.kafka_in_vpc) || (fn == "pg_sync" && local.pg_in_vpc)
  }

  name   = "floe-vpc-network-interfaces"
  role   = aws_iam_role.fn[each.key].id
  policy = data.aws_iam_policy_document.network[0].json
}

resource "aws_iam_role_policy" "tracing" {
  for_each = var.tracing_mode == "Active" ? local.enabled_functions : {}

  name   = "floe-xray"
  role   = aws_iam_role.fn[each.key].id
  policy = data.aws_iam_policy_document.tracing[0].json
}

resource "aws_iam_role_policy_attachment" "extra" {
  for_each = local.extra_policy_attachments

  role       = aws_iam_role.fn[each.value.function].name
  policy_arn = each.value.policy_arn
}

# --- pieces several roles share ----------------------------------------------------

# Writing tables: what the writer and the HTTP function both do for a batch.
data "aws_iam_policy_document" "table_writer" {
  statement {
    sid     = "PutDataMetadataDeadLettersClaims"
    actions = ["s3:PutObject", "s3:AbortMultipartUpload"]
    resources = concat(local.table_object_arns, [
      "${local.dlq_arn}/*",
      "${local.claims_arn}/*",
    ])
  }

  # Table metadata, to plan writes and evolve schemas.
  statement {
    sid       = "ReadTableFiles"
    actions   = ["s3:GetObject"]
    resources = local.table_object_arns
  }

  # Schema evolution commits through the commit engine, which deletes metadata
  # files that fall out of the metadata log; a failed CreateTable deletes the
  # metadata file it wrote.
  statement {
    sid       = "DeleteOldMetadata"
    actions   = ["s3:DeleteObject"]
    resources = local.metadata_object_arns
  }

  statement {
    sid       = "EnqueueCommitRequests"
    actions   = ["sqs:SendMessage"]
    resources = aws_sqs_queue.commits[*].arn
  }

  # Routing creates missing tables (routing.create) in existing databases:
  # CreateTable first calls CreateDatabase, which answers AlreadyExists only
  # to a caller allowed to call it. Schema evolution is an UpdateTable.
  dynamic "statement" {
    for_each = local.uses_glue ? [1] : []
    content {
      sid = "GlueCreateAndEvolveTables"
      actions = [
        "glue:GetDatabase",
        "glue:CreateDatabase",
        "glue:GetTable",
        "glue:CreateTable",
        "glue:UpdateTable",
      ]
      resources = concat([local.glue_catalog_arn], local.glue_database_arns, local.glue_table_arns)
    }
  }
}

data "aws_iam_policy_document" "kms" {
  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [1]
    content {
      sid       = "WarehouseAndQueueKey"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [var.kms_key_arn]
    }
  }
}

# ENIs of functions in a VPC, and of the Kafka pollers in the brokers' VPC
# (Lambda creates those with the writer's role). EC2's network-interface
# actions take no resource ARNs.
data "aws_iam_policy_document" "network" {
  #checkov:skip=CKV_AWS_111:EC2 network-interface actions for Lambda's VPC ENIs support no resource-level constraint (as in AWSLambdaVPCAccessExecutionRole).
  #checkov:skip=CKV_AWS_356:ec2:CreateNetworkInterface and ec2:Describe* accept only "*" as resource.
  count = local.in_vpc || local.kafka_in_vpc || local.pg_in_vpc ? 1 : 0

  statement {
    sid = "VpcNetworkInterfaces"
    actions = [
      "ec2:CreateNetworkInterface",
      "ec2:DescribeNetworkInterfaces",
      "ec2:DeleteNetworkInterface",
      "ec2:AssignPrivateIpAddresses",
      "ec2:UnassignPrivateIpAddresses",
      "ec2:DescribeVpcs",
      "ec2:DescribeSubnets",
      "ec2:DescribeSecurityGroups",
    ]
    resources = ["*"]
  }
}

# X-Ray segments with tracing_mode = "Active".
data "aws_iam_policy_document" "tracing" {
  #checkov:skip=CKV_AWS_356:xray:PutTraceSegments and xray:PutTelemetryRecords accept only "*" as resource.
  count = var.tracing_mode == "Active" ? 1 : 0

  statement {
    sid       = "XRay"
    actions   = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]
    resources = ["*"]
  }
}

# --- writer ------------------------------------------------------------------------------

locals {
  msk_topic_arns = flatten([
    for s in values(var.msk_sources) : [
      for t in s.topics : "${replace(s.cluster_arn, ":cluster/", ":topic/")}/${t}"
    ]
  ])
  msk_group_arns = [
    for s in values(var.msk_sources) : "${replace(s.cluster_arn, ":cluster/", ":group/")}/*"
  ]
}

data "aws_iam_policy_document" "writer" {
  source_policy_documents = [
    data.aws_iam_policy_document.table_writer.json,
    data.aws_iam_policy_document.kms.json,
  ]

  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.fn["writer"].arn}:*"]
  }

  dynamic "statement" {
    for_each = length(local.writer_secret_arns) > 0 ? [1] : []
    content {
      sid       = "CatalogAndSourceSecrets"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = local.writer_secret_arns
    }
  }

  dynamic "statement" {
    for_each = length(local.writer_secret_arns) > 0 && var.secret_kms_key_arn != null ? [1] : []
    content {
      sid       = "SecretKey"
      actions   = ["kms:Decrypt"]
      resources = [var.secret_kms_key_arn]
    }
  }

  dynamic "statement" {
    for_each = length(var.sqs_sources) > 0 ? [1] : []
    content {
      sid       = "ReadSourceQueues"
      actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"]
      resources = [for s in values(var.sqs_sources) : s.queue_arn]
    }
  }

  # The Kinesis sources and the HTTP buffer stream.
  dynamic "statement" {
    for_each = length(var.kinesis_sources) > 0 || local.http_buffer ? [1] : []
    content {
      sid = "ReadKinesisStreams"
      actions = [
        "kinesis:DescribeStream",
        "kinesis:DescribeStreamSummary",
        "kinesis:GetRecords",
        "kinesis:GetShardIterator",
        "kinesis:ListShards",
        "kinesis:SubscribeToShard",
      ]
      resources = concat(
        [for s in values(var.kinesis_sources) : s.stream_arn],
        aws_kinesis_stream.http_buffer[*].arn,
      )
    }
  }

  dynamic "statement" {
    for_each = length(var.dynamodb_sources) > 0 ? [1] : []
    content {
      sid = "ReadDynamoDbStreams"
      actions = [
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
      ]
      resources = [for s in values(var.dynamodb_sources) : s.stream_arn]
    }
  }

  # On-failure destination of the stream mappings: Lambda sends with the
  # function's role.
  dynamic "statement" {
    for_each = local.stream_sources ? [1] : []
    content {
      sid       = "StreamFailureQueue"
      actions   = ["sqs:SendMessage"]
      resources = [aws_sqs_queue.stream_failures[0].arn]
    }
  }

  dynamic "statement" {
    for_each = length(var.msk_sources) > 0 ? [1] : []
    content {
      sid = "DescribeMskClusters"
      actions = [
        "kafka:DescribeCluster",
        "kafka:DescribeClusterV2",
        "kafka:GetBootstrapBrokers",
        "kafka-cluster:Connect",
        "kafka-cluster:DescribeClusterDynamicConfiguration",
      ]
      resources = [for s in values(var.msk_sources) : s.cluster_arn]
    }
  }

  dynamic "statement" {
    for_each = length(var.msk_sources) > 0 ? [1] : []
    content {
      sid       = "ReadMskTopics"
      actions   = ["kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"]
      resources = local.msk_topic_arns
    }
  }

  dynamic "statement" {
    for_each = length(var.msk_sources) > 0 ? [1] : []
    content {
      sid       = "MskConsumerGroups"
      actions   = ["kafka-cluster:AlterGroup", "kafka-cluster:DescribeGroup"]
      resources = local.msk_group_arns
    }
  }

  dynamic "statement" {
    for_each = length(var.source_kms_key_arns) > 0 ? [1] : []
    content {
      sid       = "SourceKeys"
      actions   = ["kms:Decrypt"]
      resources = var.source_kms_key_arns
    }
  }
}

# --- committer ---------------------------------------------------------------------------

# One per shard: each committer reads only its own shard's queue.
data "aws_iam_policy_document" "committer" {
  count = var.commit_queue_shards

  source_policy_documents = [data.aws_iam_policy_document.kms.json]

  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.fn[local.committer_keys[count.index]].arn}:*"]
  }

  statement {
    sid = "ConsumeCommitQueue"
    actions = [
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ChangeMessageVisibility",
    ]
    resources = [aws_sqs_queue.commits[count.index].arn]
  }

  # Table metadata and manifests; the claim-check bodies of large requests.
  statement {
    sid       = "ReadTableFilesAndClaims"
    actions   = ["s3:GetObject"]
    resources = concat(local.table_object_arns, ["${local.claims_arn}/*"])
  }

  # Metadata files, manifests, manifest lists; data files rewritten by
  # copy-on-write commits.
  statement {
    sid       = "WriteTableFiles"
    actions   = ["s3:PutObject", "s3:AbortMultipartUpload"]
    resources = local.table_object_arns
  }

  # Claim-check bodies once their request is acknowledged; metadata files
  # past the metadata log, or written by a commit that lost a conflict.
  statement {
    sid       = "DeleteClaimsAndOldMetadata"
    actions   = ["s3:DeleteObject"]
    resources = concat(local.metadata_object_arns, ["${local.claims_arn}/*"])
  }

  # A redelivered request whose claim object went with its first commit must
  # read as 404 (then the duplicate is dropped); without s3:ListBucket S3
  # answers 403 instead and the duplicate would loop until the DLQ. A
  # prefix condition cannot be used: GetObject carries no s3:prefix.
  statement {
    sid       = "MissingClaimsAre404"
    actions   = ["s3:ListBucket"]
    resources = [local.bucket_arn]
  }

  dynamic "statement" {
    for_each = local.uses_glue ? [1] : []
    content {
      sid       = "GlueCommit"
      actions   = ["glue:GetDatabase", "glue:GetTable", "glue:UpdateTable"]
      resources = concat([local.glue_catalog_arn], local.glue_database_arns, local.glue_table_arns)
    }
  }

  dynamic "statement" {
    for_each = length(local.catalog_secret_arns) > 0 ? [1] : []
    content {
      sid       = "CatalogSecrets"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = local.catalog_secret_arns
    }
  }

  dynamic "statement" {
    for_each = length(local.catalog_secret_arns) > 0 && var.secret_kms_key_arn != null ? [1] : []
    content {
      sid       = "SecretKey"
      actions   = ["kms:Decrypt"]
      resources = [var.secret_kms_key_arn]
    }
  }
}

# --- HTTP ingest ---------------------------------------------------------------------------

data "aws_iam_policy_document" "ingest" {
  count = var.enable_http_ingest ? 1 : 0

  source_policy_documents = [
    data.aws_iam_policy_document.table_writer.json,
    data.aws_iam_policy_document.kms.json,
  ]

  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.fn["ingest"].arn}:*"]
  }

  # Each accepted POST is one PutRecord on the buffer stream.
  dynamic "statement" {
    for_each = local.http_buffer ? [1] : []
    content {
      sid       = "AppendToBufferStream"
      actions   = ["kinesis:PutRecord", "kinesis:DescribeStreamSummary"]
      resources = [aws_kinesis_stream.http_buffer[0].arn]
    }
  }

  dynamic "statement" {
    for_each = length(local.ingest_secret_arns) > 0 ? [1] : []
    content {
      sid       = "TokenAndCatalogSecrets"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = local.ingest_secret_arns
    }
  }

  dynamic "statement" {
    for_each = length(local.ingest_secret_arns) > 0 && var.secret_kms_key_arn != null ? [1] : []
    content {
      sid       = "SecretKey"
      actions   = ["kms:Decrypt"]
      resources = [var.secret_kms_key_arn]
    }
  }
}

# --- maintenance ---------------------------------------------------------------------------

locals {
  table_list_prefixes = var.catalog_type == "glue" ? [
    for db in var.glue_databases : "${var.warehouse_prefix}/${db}.db/*"
  ] : ["${var.warehouse_prefix}/*"]
}

data "aws_iam_policy_document" "maintenance" {
  count = var.enable_maintenance ? 1 : 0

  source_policy_documents = [data.aws_iam_policy_document.kms.json]

  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.fn["maintenance"].arn}:*"]
  }

  # Compaction reads and writes data files; expiry and orphan cleanup delete.
  statement {
    sid       = "RewriteAndDeleteTableFiles"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    resources = local.table_object_arns
  }

  # Orphan cleanup lists each table's location (ListObjectsV2 with the
  # location as prefix); expiry and orphan cleanup delete with DeleteObjects,
  # which S3 authorizes as s3:DeleteObject per key.
  statement {
    sid       = "ListTableLocations"
    actions   = ["s3:ListBucket"]
    resources = [local.bucket_arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = local.table_list_prefixes
    }
  }

  # With maintenance_tables empty, the function lists every Iceberg table:
  # GetDatabases on the catalog, then GetTables in each database listed.
  # The rights stop at glue_databases: should Glue list a database outside
  # them, its GetTables is refused and the run fails (set maintenance_tables).
  dynamic "statement" {
    for_each = local.uses_glue ? [1] : []
    content {
      sid = "GlueMaintain"
      actions = [
        "glue:GetDatabase",
        "glue:GetDatabases",
        "glue:GetTable",
        "glue:GetTables",
        "glue:UpdateTable",
      ]
      resources = concat([local.glue_catalog_arn], local.glue_database_arns, local.glue_table_arns)
    }
  }

  statement {
    sid       = "FailedRuns"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.maintenance_dlq[0].arn]
  }

  dynamic "statement" {
    for_each = length(local.catalog_secret_arns) > 0 ? [1] : []
    content {
      sid       = "CatalogSecrets"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = local.catalog_secret_arns
    }
  }

  dynamic "statement" {
    for_each = length(local.catalog_secret_arns) > 0 && var.secret_kms_key_arn != null ? [1] : []
    content {
      sid       = "SecretKey"
      actions   = ["kms:Decrypt"]
      resources = [var.secret_kms_key_arn]
    }
  }
}
