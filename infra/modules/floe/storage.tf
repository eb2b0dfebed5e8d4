# The warehouse bucket: tables under <warehouse_prefix>/<db>.db/<table>, dead
# letters under <warehouse_prefix>/_floe/dlq, claim-check bodies of large
# commit requests under <warehouse_prefix>/_floe/claims. With create_bucket =
# false the module only points the functions at var.bucket_name.

resource "aws_s3_bucket" "warehouse" {
  #checkov:skip=CKV_AWS_144:Cross-region replication is a disaster-recovery choice of the deployment (a second bucket, region and role), not something this module can pick.
  #checkov:skip=CKV2_AWS_62:Nothing consumes object events; floe's writers hand data to the committer through SQS.
  #checkov:skip=CKV_AWS_18:Access logging needs a separate log bucket: set var.access_log_bucket (aws_s3_bucket_logging below).
  #checkov:skip=CKV_AWS_21:Versioning is var.bucket_versioning (off by default): floe never overwrites an object, and maintenance deletes expired files on purpose.
  #checkov:skip=CKV_AWS_145:SSE-KMS is var.kms_key_arn; the default is SSE-S3, which needs no key policy.
  count = var.create_bucket ? 1 : 0

  bucket        = var.bucket_name != "" ? var.bucket_name : null
  bucket_prefix = var.bucket_name == "" ? "${substr(var.name, 0, 26)}-warehouse-" : null
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "warehouse" {
  count = var.create_bucket ? 1 : 0

  bucket                  = aws_s3_bucket.warehouse[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "warehouse" {
  count = var.create_bucket ? 1 : 0

  bucket = aws_s3_bucket.warehouse[0].id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "warehouse" {
  count = var.create_bucket ? 1 : 0

  bucket = aws_s3_bucket.warehouse[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    # One KMS data key per bucket instead of per object: floe writes many
    # small files (manifests, metadata), each a KMS call otherwise.
    bucket_key_enabled = var.kms_key_arn != null
  }
}

resource "aws_s3_bucket_versioning" "warehouse" {
  count = var.create_bucket && var.bucket_versioning ? 1 : 0

  bucket = aws_s3_bucket.warehouse[0].id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "warehouse" {
  count = var.create_bucket ? 1 : 0

  bucket = aws_s3_bucket.warehouse[0].id

  # floe writes files over 8 MiB as multipart uploads and aborts them on
  # failure; a writer killed mid-upload leaves parts that only this removes.
  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_days
    }
  }

  dynamic "rule" {
    for_each = var.bucket_versioning ? [1] : []
    content {
      id     = "expire-noncurrent-versions"
      status = "Enabled"
      filter {}
      noncurrent_version_expiration {
        noncurrent_days = var.noncurrent_version_expiration_days
      }
      expiration {
        expired_object_delete_marker = true
      }
    }
  }

  depends_on = [aws_s3_bucket_versioning.warehouse]
}

resource "aws_s3_bucket_logging" "warehouse" {
  count = var.create_bucket && var.access_log_bucket != "" ? 1 : 0

  bucket        = aws_s3_bucket.warehouse[0].id
  target_bucket = var.access_log_bucket
  target_prefix = "${local.bucket}/"
}

data "aws_iam_policy_document" "bucket" {
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      local.bucket_arn,
      "${local.bucket_arn}/*",
    ]
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

resource "aws_s3_bucket_policy" "warehouse" {
  count = var.create_bucket ? 1 : 0

  bucket = aws_s3_bucket.warehouse[0].id
  policy = data.aws_iam_policy_document.bucket.json

  depends_on = [aws_s3_bucket_public_access_block.warehouse]
}
