# HTTP ingest: an IAM-authenticated function URL, and optionally an API
# Gateway HTTP API. The function admits a request whose event carries an IAM
# identity (requestContext.authorizer.iam: the function URL's AWS_IAM auth
# verified the caller's SigV4 signature), or one with `Authorization: Bearer
# <token>` matching the secret in FLOE_HTTP_TOKEN (unset: IAM callers only).
# API Gateway's requests carry no IAM identity here, hence the token there.
# Either way, a table outside routing.allow (floe_toml) gets 403.

resource "aws_lambda_function_url" "ingest" {
  count = var.enable_http_ingest ? 1 : 0

  function_name      = aws_lambda_function.ingest[0].function_name
  authorization_type = "AWS_IAM"
}

# --- the HTTP buffer stream ---------------------------------------------------------------
# The HTTP function appends each POST to this stream and answers once
# PutRecord succeeded; the writer drains it in windows (triggers.tf), so a
# table gets one Parquet file per window instead of one per POST
# (docs/cost.md). ?wait=commit requests do not use it.

resource "aws_kinesis_stream" "http_buffer" {
  count = local.http_buffer ? 1 : 0

  name        = "${var.name}-http-buffer"
  shard_count = var.http_buffer_shards
  # Provisioned: one shard takes 1,000 POSTs a second, far above the rates
  # the buffer is for, and its hourly price is below an on-demand stream's
  # before that one's per-GB charges.
  stream_mode_details {
    stream_mode = "PROVISIONED"
  }

  # The least Kinesis keeps. Lambda redelivers a failed batch for as long
  # as its records are in the stream, and the table's ledger remembers the
  # ids of unordered records (POSTs) for floe.ledger.key-window-ms, 24 h by
  # default: raise that table property before raising the retention, or a
  # batch redelivered after a day could be committed twice.
  retention_period = 24

  encryption_type = "KMS"
  kms_key_id      = var.kms_key_arn != null ? var.kms_key_arn : "alias/aws/kinesis"

  tags = var.tags
}

# --- API Gateway HTTP API --------------------------------------------------------------------

locals {
  http_api = var.enable_http_ingest && var.http_api_gateway
}

resource "aws_apigatewayv2_api" "ingest" {
  count = local.http_api ? 1 : 0

  name          = "${var.name}-ingest"
  protocol_type = "HTTP"
  description   = "floe HTTP ingest: POST /v1/tables/{namespace}/{table}/records, GET /v1/tables/{namespace}/{table}"
  tags          = var.tags
}

resource "aws_apigatewayv2_integration" "ingest" {
  count = local.http_api ? 1 : 0

  api_id                 = aws_apigatewayv2_api.ingest[0].id
  integration_type       = "AWS_PROXY"
  integration_uri        = aws_lambda_function.ingest[0].invoke_arn
  payload_format_version = "2.0"
  # API Gateway's own limit for HTTP APIs.
  timeout_milliseconds = 30000
}

resource "aws_apigatewayv2_route" "ingest" {
  #checkov:skip=CKV_AWS_309:The function authenticates every request itself (bearer token from Secrets Manager, compared in constant time; the module requires the token with the HTTP API) and answers 401/403; an API Gateway authorizer would duplicate that check.
  for_each = local.http_api ? toset([
    "POST /v1/tables/{namespace}/{table}/records",
    "GET /v1/tables/{namespace}/{table}",
  ]) : toset([])

  api_id             = aws_apigatewayv2_api.ingest[0].id
  route_key          = each.value
  target             = "integrations/${aws_apigatewayv2_integration.ingest[0].id}"
  authorization_type = "NONE"
}

resource "aws_cloudwatch_log_group" "http_api" {
  #checkov:skip=CKV_AWS_158:KMS encryption of the logs is var.log_kms_key_arn; CloudWatch Logs encrypts at rest either way.
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (default 30): access logs for operations, not an audit trail.
  count = local.http_api ? 1 : 0

  name              = "/aws/apigateway/${var.name}-ingest"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.log_kms_key_arn
  tags              = var.tags
}

resource "aws_apigatewayv2_stage" "ingest" {
  count = local.http_api ? 1 : 0

  api_id      = aws_apigatewayv2_api.ingest[0].id
  name        = "$default"
  auto_deploy = true

  default_route_settings {
    throttling_rate_limit  = var.http_throttle_rate_limit
    throttling_burst_limit = var.http_throttle_burst_limit
  }

  access_log_settings {
    destination_arn = aws_cloudwatch_log_group.http_api[0].arn
    format = jsonencode({
      requestId          = "$context.requestId"
      ip                 = "$context.identity.sourceIp"
      requestTime        = "$context.requestTime"
      httpMethod         = "$context.httpMethod"
      routeKey           = "$context.routeKey"
      path               = "$context.path"
      status             = "$context.status"
      responseLength     = "$context.responseLength"
      integrationStatus  = "$context.integrationStatus"
      integrationLatency = "$context.integrationLatency"
      errorMessage       = "$context.error.message"
    })
  }

  tags = var.tags
}

resource "aws_lambda_permission" "http_api" {
  count = local.http_api ? 1 : 0

  statement_id  = "AllowHttpApi"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.ingest[0].function_name
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.ingest[0].execution_arn}/*/*/v1/tables/*"
}
