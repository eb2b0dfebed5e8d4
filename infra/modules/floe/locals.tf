data "aws_caller_identity" "current" {}
data "aws_region" "current" {}
data "aws_partition" "current" {}

locals {
  account_id = data.aws_caller_identity.current.account_id
  region     = data.aws_region.current.name
  partition  = data.aws_partition.current.partition

  # --- where things live -------------------------------------------------------
  bucket        = var.create_bucket ? aws_s3_bucket.warehouse[0].id : var.bucket_name
  bucket_arn    = "arn:${local.partition}:s3:::${local.bucket}"
  warehouse_uri = "s3://${local.bucket}/${var.warehouse_prefix}"
  warehouse_arn = "${local.bucket_arn}/${var.warehouse_prefix}"
  dlq_uri       = "${local.warehouse_uri}/_floe/dlq"
  claims_uri    = "${local.warehouse_uri}/_floe/claims"
  dlq_arn       = "${local.warehouse_arn}/_floe/dlq"
  claims_arn    = "${local.warehouse_arn}/_floe/claims"

  # Table files. Glue: <warehouse>/<db>.db/<table>/{data,metadata}/..., so the
  # rights stop at the configured databases. REST: the server lays tables out
  # under the warehouse as it likes.
  uses_glue = var.catalog_type == "glue" || var.rest_sigv4_service == "glue"
  table_object_arns = var.catalog_type == "glue" ? [
    for db in var.glue_databases : "${local.warehouse_arn}/${db}.db/*"
  ] : ["${local.warehouse_arn}/*"]
  # Metadata files the commit engine deletes when they fall out of the
  # metadata log (write.metadata.delete-after-commit.enabled), or after a
  # conflicting commit; ledger files it retires (beside the tables, in
  # <namespace>/_floe/ledger/, where no engine's orphan cleanup looks).
  metadata_object_arns = var.catalog_type == "glue" ? flatten([
    for db in var.glue_databases : [
      "${local.warehouse_arn}/${db}.db/*/metadata/*",
      "${local.warehouse_arn}/${db}.db/_floe/ledger/*",
    ]
  ]) : ["${local.warehouse_arn}/*/metadata/*", "${local.warehouse_arn}/*/_floe/ledger/*"]

  glue_catalog_id  = var.glue_catalog_id != "" ? var.glue_catalog_id : local.account_id
  glue_catalog_arn = "arn:${local.partition}:glue:${local.region}:${local.glue_catalog_id}:catalog"
  glue_database_arns = [
    for db in var.glue_databases : "arn:${local.partition}:glue:${local.region}:${local.glue_catalog_id}:database/${db}"
  ]
  glue_table_arns = [
    for db in var.glue_databases : "arn:${local.partition}:glue:${local.region}:${local.glue_catalog_id}:table/${db}/*"
  ]

  # --- secrets: each role may read only the secrets it is given ------------------
  catalog_secret_arns = var.catalog_type == "rest" ? compact([var.rest_credential_secret_arn, var.rest_token_secret_arn]) : []
  ingest_secret_arns  = concat(local.catalog_secret_arns, compact([var.http_token_secret_arn]))
  source_secret_arns = distinct(compact(concat(
    [for s in values(var.msk_sources) : s.auth_secret_arn],
    [for s in values(var.kafka_sources) : s.auth_secret_arn],
  )))
  writer_secret_arns = concat(local.catalog_secret_arns, local.source_secret_arns)

  # --- switches ---------------------------------------------------------------------
  # The HTTP function appends each POST to a Kinesis stream that the writer
  # drains in windows (http.tf); like a Kinesis source, the stream needs the
  # failure queue and the stream alarms.
  http_buffer    = var.enable_http_ingest && var.http_buffer
  stream_sources = length(var.kinesis_sources) + length(var.dynamodb_sources) > 0 || local.http_buffer
  kafka_in_vpc = length(var.msk_sources) > 0 || anytrue([
    for s in values(var.kafka_sources) : length(s.subnet_ids) > 0
  ])
  in_vpc = length(var.vpc_subnet_ids) > 0
  # pg-sync reaches the database in its own subnets, else in vpc_subnet_ids.
  pg_subnet_ids         = length(var.pg_subnet_ids) > 0 ? var.pg_subnet_ids : var.vpc_subnet_ids
  pg_security_group_ids = length(var.pg_subnet_ids) > 0 ? var.pg_security_group_ids : var.vpc_security_group_ids
  pg_in_vpc             = var.enable_pg_sync && length(local.pg_subnet_ids) > 0

  # --- commit queue shards ------------------------------------------------------------
  # Shard i's queue, DLQ and committer are named like the unsharded module's
  # for i = 0 and with "-<i>" after that; the committers' keys in the
  # per-function maps (roles, log groups, outputs) are "committer" and
  # "committer_<i>".
  shard_suffixes       = [for i in range(var.commit_queue_shards) : i == 0 ? "" : "-${i}"]
  fifo_suffix          = var.fifo_commit_queue ? ".fifo" : ""
  commit_queue_names   = [for s in local.shard_suffixes : "${var.name}-commits${s}${local.fifo_suffix}"]
  commit_dlq_names     = [for s in local.shard_suffixes : "${var.name}-commits${s}-dlq${local.fifo_suffix}"]
  committer_keys       = [for i in range(var.commit_queue_shards) : i == 0 ? "committer" : "committer_${i}"]
  extra_committer_keys = slice(local.committer_keys, 1, var.commit_queue_shards)
  committer_batch_size = coalesce(var.committer_batch_size, var.fifo_commit_queue ? 10 : 10000)

  function_names = merge(
    {
      writer      = "${var.name}-writer"
      committer   = "${var.name}-committer"
      ingest      = "${var.name}-ingest-http"
      maintenance = "${var.name}-maintenance"
      pg_sync     = "${var.name}-pg-sync"
    },
    { for i in range(1, var.commit_queue_shards) : "committer_${i}" => "${var.name}-committer-${i}" },
  )

  # --- the functions' environment ---------------------------------------------------
  #
  # floe reads its configuration from FLOE_<SECTION>_<KEY> (docs/config.md); a
  # blank value unsets the key, so its default applies. Convention of these
  # maps, which tests parse with python-hcl2:
  #   - every key is written out literally (no computed keys), and every
  #     function sets ALL of its keys, "" where one does not apply (the REST
  #     keys under Glue), so each function's set of names is static;
  #   - common_env holds what all four functions share, queue_env what the
  #     three that meet on the commit queue add, writer_own_env,
  #     ingest_own_env, maintenance_own_env and pg_sync_own_env what only
  #     those functions have; each <function>_env (writer_env,
  #     committer_env, ingest_env, maintenance_env, pg_sync_env) is a merge()
  #     of those named locals only;
  #   - RUST_LOG is not a floe config key: it is merged in at each
  #     aws_lambda_function's environment block, never in these maps.
  # FLOE_CONFIG_TOML (var.floe_toml) carries [routing], [defaults] and
  # [tables.*]; the variables below override whatever it says about the other
  # sections.
  common_env = {
    FLOE_CONFIG_TOML               = var.floe_toml
    FLOE_WAREHOUSE_URI             = local.warehouse_uri
    FLOE_AWS_REGION                = local.region
    FLOE_CATALOG_TYPE              = var.catalog_type
    FLOE_CATALOG_CATALOG_ID        = var.catalog_type == "glue" ? local.glue_catalog_id : ""
    FLOE_CATALOG_URI               = var.catalog_type == "rest" ? var.rest_uri : ""
    FLOE_CATALOG_PREFIX            = var.catalog_type == "rest" ? var.rest_prefix : ""
    FLOE_CATALOG_TOKEN             = var.catalog_type == "rest" ? var.rest_token_secret_arn : ""
    FLOE_CATALOG_CLIENT_ID         = var.catalog_type == "rest" ? var.rest_client_id : ""
    FLOE_CATALOG_CLIENT_SECRET     = var.catalog_type == "rest" ? var.rest_credential_secret_arn : ""
    FLOE_CATALOG_OAUTH2_SERVER_URI = var.catalog_type == "rest" ? var.rest_oauth2_server_uri : ""
    FLOE_CATALOG_SCOPE             = var.catalog_type == "rest" ? var.rest_scope : ""
    FLOE_CATALOG_SIGV4_SERVICE     = var.catalog_type == "rest" ? var.rest_sigv4_service : ""
    FLOE_DEAD_LETTER_LOCATION      = local.dlq_uri
  }

  # The retentions are set wherever the queue is: every function's config
  # check holds the orphan window against them. One shard: FLOE_QUEUE_URL,
  # as before sharding. More: FLOE_QUEUE_URLS lists them in shard order (the
  # writers pick one per table), and each committer's FLOE_QUEUE_URL, set at
  # its function, names the shard it reads.
  queue_env = {
    FLOE_QUEUE_URL                   = var.commit_queue_shards == 1 ? aws_sqs_queue.commits[0].url : ""
    FLOE_QUEUE_URLS                  = var.commit_queue_shards == 1 ? "" : join(",", aws_sqs_queue.commits[*].url)
    FLOE_QUEUE_CLAIM_PREFIX          = local.claims_uri
    FLOE_QUEUE_RETENTION_SECONDS     = tostring(var.commit_queue_retention_seconds)
    FLOE_QUEUE_DLQ_RETENTION_SECONDS = tostring(var.dlq_retention_seconds)
    FLOE_QUEUE_TABLE_CONCURRENCY     = tostring(var.committer_table_concurrency)
  }

  # A Kinesis shard read with a parallelization factor above 1 reaches
  # several invocations at once: the writer then names each record by its
  # sequence number instead of by its batch's range. The buffer stream's
  # mapping reads each shard with one invocation, so it does not count.
  # FLOE_HTTP_BUFFER_STREAM: the writer takes that stream's records for
  # buffered POSTs, not for source records; the HTTP function appends to it.
  # Blank on both: every POST is written as it comes.
  writer_own_env = {
    FLOE_KINESIS_PER_RECORD = anytrue([for s in values(var.kinesis_sources) : s.parallelization_factor > 1]) ? "true" : "false"
    FLOE_HTTP_BUFFER_STREAM = local.http_buffer ? aws_kinesis_stream.http_buffer[0].name : ""
  }

  writer_env = merge(local.common_env, local.queue_env, local.writer_own_env)

  committer_env = merge(local.common_env, local.queue_env)

  # The keys only the HTTP function and only maintenance have.
  # FLOE_HTTP_TOKEN blank: the function admits IAM-authenticated callers of
  # its function URL only.
  ingest_own_env = {
    FLOE_HTTP_TOKEN            = var.http_token_secret_arn
    FLOE_HTTP_MAX_BODY_BYTES   = tostring(var.http_max_body_bytes)
    FLOE_HTTP_WAIT_SECONDS     = tostring(var.http_wait_seconds)
    FLOE_HTTP_MAX_RECORD_BYTES = tostring(var.http_max_record_bytes)
    FLOE_HTTP_MAX_NEW_COLUMNS  = tostring(var.http_max_new_columns)
    FLOE_HTTP_REDACT_VALUES    = tostring(var.http_redact_values)
    FLOE_HTTP_CREATE_TABLES    = tostring(var.http_create_tables)
    FLOE_HTTP_BUFFER_STREAM    = local.http_buffer ? aws_kinesis_stream.http_buffer[0].name : ""
  }

  maintenance_own_env = {
    FLOE_MAINTENANCE_TABLES                = join(",", var.maintenance_tables)
    FLOE_MAINTENANCE_ORPHAN_WINDOW_SECONDS = tostring(var.orphan_window_seconds)
    # Maintenance reads no queue, but checks its window against these.
    FLOE_QUEUE_RETENTION_SECONDS     = tostring(var.commit_queue_retention_seconds)
    FLOE_QUEUE_DLQ_RETENTION_SECONDS = tostring(var.dlq_retention_seconds)
  }

  ingest_env = merge(local.common_env, local.queue_env, local.ingest_own_env)

  maintenance_env = merge(local.common_env, local.maintenance_own_env)

  # pg-sync commits straight to the catalog (it advances its slot only once a
  # batch is in): no commit queue. FLOE_POSTGRES_MAX_SECONDS blank: the
  # function's own deadline bounds each run.
  pg_sync_own_env = {
    FLOE_POSTGRES_CONNINFO    = var.pg_conninfo
    FLOE_POSTGRES_SECRET      = var.pg_secret_arn
    FLOE_POSTGRES_SLOT        = var.pg_slot
    FLOE_POSTGRES_PUBLICATION = var.pg_publication
    FLOE_POSTGRES_TABLES      = join(",", var.pg_tables)
    FLOE_POSTGRES_NAMESPACE   = var.pg_namespace
    FLOE_POSTGRES_CHUNK_ROWS  = tostring(var.pg_chunk_rows)
    FLOE_POSTGRES_MAX_CHANGES = tostring(var.pg_max_changes)
    FLOE_POSTGRES_PEEK        = tostring(var.pg_peek)
    FLOE_POSTGRES_MAX_SECONDS = ""
  }

  pg_sync_env = merge(local.common_env, local.pg_sync_own_env)
}
