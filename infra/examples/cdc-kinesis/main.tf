# floe CDC: Debezium change events on a Kinesis data stream -> the writer ->
# the keyed Iceberg table silver.customers (last state per id), exactly once
# and in stream order.

resource "aws_kinesis_stream" "cdc" {
  name             = "${var.name}-changes"
  retention_period = 24
  encryption_type  = "KMS"
  kms_key_id       = "alias/aws/kinesis"

  stream_mode_details {
    stream_mode = "ON_DEMAND"
  }
}

module "floe" {
  source = "../../modules/floe"

  name          = var.name
  artifacts_dir = var.artifacts_dir
  architecture  = var.architecture
  force_destroy = true

  catalog_type   = "glue"
  glue_databases = ["silver"]
  floe_toml = templatefile("${path.module}/floe.toml.tftpl", {
    merge_strategy = var.merge_strategy
    changelog      = var.changelog
  })

  kinesis_sources = {
    changes = {
      stream_arn = aws_kinesis_stream.cdc.arn
      # Every change since the stream's retention start: a new table gets
      # the whole history the stream still holds.
      starting_position                  = "TRIM_HORIZON"
      batch_size                         = 1000
      maximum_batching_window_in_seconds = 5
      # One batch per shard at a time keeps each key's changes in order
      # (Lambda keeps order per partition key with a higher factor too).
      parallelization_factor = 1
      # Retry a failing batch until its records expire from the stream
      # rather than skip changes of a keyed table.
      maximum_retry_attempts = -1
    }
  }

  # Change events arrive through the stream only.
  enable_http_ingest = false
  enable_maintenance = var.enable_maintenance
}
