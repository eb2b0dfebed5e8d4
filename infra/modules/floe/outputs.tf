output "bucket" {
  description = "Warehouse bucket name."
  value       = local.bucket
}

output "warehouse_uri" {
  description = "Warehouse location, s3://<bucket>/<warehouse_prefix> (FLOE_WAREHOUSE_URI)."
  value       = local.warehouse_uri
}

output "dead_letter_uri" {
  description = "Where rejected records go (FLOE_DEAD_LETTER_LOCATION)."
  value       = local.dlq_uri
}

output "commit_queue_url" {
  description = "Commit queue URL (FLOE_QUEUE_URL); with shards, shard 0's (commit_queue_urls has them all)."
  value       = aws_sqs_queue.commits[0].url
}

output "commit_queue_arn" {
  description = "Commit queue ARN; with shards, shard 0's."
  value       = aws_sqs_queue.commits[0].arn
}

output "commit_dlq_url" {
  description = "Dead-letter queue of commit requests; with shards, shard 0's."
  value       = aws_sqs_queue.commits_dlq[0].url
}

output "commit_dlq_arn" {
  description = "Dead-letter queue ARN of commit requests; with shards, shard 0's."
  value       = aws_sqs_queue.commits_dlq[0].arn
}

output "commit_queue_urls" {
  description = "Every shard's commit queue URL, in shard order (FLOE_QUEUE_URLS with more than one): the queue.urls of a floe.toml that talks to this deployment."
  value       = aws_sqs_queue.commits[*].url
}

output "commit_queue_arns" {
  description = "Every shard's commit queue ARN, in shard order."
  value       = aws_sqs_queue.commits[*].arn
}

output "commit_dlq_urls" {
  description = "Every shard's commit dead-letter queue URL, in shard order."
  value       = aws_sqs_queue.commits_dlq[*].url
}

output "commit_dlq_arns" {
  description = "Every shard's commit dead-letter queue ARN, in shard order."
  value       = aws_sqs_queue.commits_dlq[*].arn
}

output "committer_function_names" {
  description = "Every shard's committer function name, in shard order."
  value       = aws_lambda_function.committer[*].function_name
}

output "stream_failure_queue_url" {
  description = "On-failure destination of the Kinesis and DynamoDB mappings and of the HTTP buffer stream's (null without any)."
  value       = local.stream_sources ? aws_sqs_queue.stream_failures[0].url : null
}

output "function_names" {
  description = "Function names by role: writer, committer, ingest, maintenance, pg_sync; with shards, committer_<i> for shard i > 0."
  value = merge(
    {
      writer = aws_lambda_function.writer.function_name
    },
    { for i, key in local.committer_keys : key => aws_lambda_function.committer[i].function_name },
    var.enable_http_ingest ? { ingest = aws_lambda_function.ingest[0].function_name } : {},
    var.enable_maintenance ? { maintenance = aws_lambda_function.maintenance[0].function_name } : {},
    var.enable_pg_sync ? { pg_sync = aws_lambda_function.pg_sync[0].function_name } : {},
  )
}

output "function_arns" {
  description = "Function ARNs by role: writer, committer, ingest, maintenance, pg_sync; with shards, committer_<i> for shard i > 0."
  value = merge(
    {
      writer = aws_lambda_function.writer.arn
    },
    { for i, key in local.committer_keys : key => aws_lambda_function.committer[i].arn },
    var.enable_http_ingest ? { ingest = aws_lambda_function.ingest[0].arn } : {},
    var.enable_maintenance ? { maintenance = aws_lambda_function.maintenance[0].arn } : {},
    var.enable_pg_sync ? { pg_sync = aws_lambda_function.pg_sync[0].arn } : {},
  )
}

output "role_arns" {
  description = "Execution role ARNs by function, e.g. to grant a key or a source in another account."
  value       = { for fn, role in aws_iam_role.fn : fn => role.arn }
}

output "log_group_names" {
  description = "CloudWatch log groups by function."
  value       = { for fn, lg in aws_cloudwatch_log_group.fn : fn => lg.name }
}

output "function_url" {
  description = "IAM-authenticated (AWS_IAM: SigV4 for service \"lambda\") URL of the HTTP ingest function; callers need lambda:InvokeFunctionUrl and lambda:InvokeFunction on the function. null when it is disabled."
  value       = var.enable_http_ingest ? aws_lambda_function_url.ingest[0].function_url : null
}

output "api_endpoint" {
  description = "HTTP API endpoint in front of the ingest function; null without http_api_gateway."
  value       = local.http_api ? aws_apigatewayv2_api.ingest[0].api_endpoint : null
}

output "http_buffer_stream_name" {
  description = "Name of the HTTP buffer stream (FLOE_HTTP_BUFFER_STREAM); null without http_buffer or enable_http_ingest."
  value       = local.http_buffer ? aws_kinesis_stream.http_buffer[0].name : null
}

output "http_buffer_stream_arn" {
  description = "ARN of the HTTP buffer stream; null without http_buffer or enable_http_ingest."
  value       = local.http_buffer ? aws_kinesis_stream.http_buffer[0].arn : null
}

output "glue_databases" {
  description = "Glue databases floe writes (catalog_type glue)."
  value       = var.catalog_type == "glue" ? var.glue_databases : []
}

output "metric_dimensions" {
  description = "Dimensions of floe's own CloudWatch metrics (namespace \"floe\") by function: { function, function_name }, for dashboards and further alarms."
  value       = local.emf_dimensions
}
